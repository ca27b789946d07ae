"""A materialized table's lifecycle, FLIP-435's as Flink's MaterializedTableManager applies
it, on the catalog's one commit path (its runs: refresh.runs; its definition versions:
refresh.definitions).

- CREATE resolves the query's sources in the catalog (refresh.sources: unknown ones and
  cycles refused, with the line and column), has Spark's analyzer derive the schema (on a
  refresh worker), checks it as Flink does, creates the Iceberg table (its definition in
  the table's properties) and the row INITIALIZING, then sets up the refresh pipeline (the
  schedule, the first refresh) and turns ACTIVATED. If the pipeline cannot be set up, the
  create is undone: schedule, runs, row and table with its files.
- SUSPEND and RESUME are refused while INITIALIZING; suspending a suspended table or
  resuming an active one is an error. SUSPEND disables the schedule, RESUME enables it; the
  options of RESUME WITH go to the resumed runs only, never into the definition.
- SET FRESHNESS / SET REFRESH_MODE re-plan the mode and the schedule; SET / RESET change
  options; DROP is refused while views or materialized tables read the table, and otherwise
  removes the schedule, cancels queued runs and drops the table with its data.

Every change to the definition or the state is also committed to the table's properties
(refresh.table_state), so an engine that loads the table sees what it is."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from django.db import transaction
from django.utils import timezone

from catalog import selectors
from catalog import services as catalog_services
from catalog.core.errors import AlreadyExists, CatalogError, InvalidInput, NoSuchTable
from catalog.core.inputs import check_name
from refresh import analysis, definitions, runs, schedules, signals, table_state
from refresh.core import definition as defs
from refresh.core import expectations as ex
from refresh.core.columns import ColumnDefinition, check_declared, with_comments
from refresh.core.freshness import Freshness, RefreshMode, plan_refresh
from refresh.core.options import check_option_keys, check_run_options, check_table_options
from refresh.core.partitions import check_formatter_option
from refresh.models import MaterializedTable, RefreshRun, Verification
from refresh.sources import check_streamable, readers_of, resolve_sources
from refresh.spark.schema import iceberg_schema

logger = logging.getLogger(__name__)


class PipelineFailed(CatalogError):
    """The refresh pipeline of a new table could not be set up; the create was undone."""

    status = 503


def create_materialized_table(
    *,
    namespace: str,
    name: str,
    query: str,
    freshness: Freshness,
    refresh_mode: RefreshMode | None = None,
    primary_key: Sequence[str] = (),
    constraint_name: str | None = None,
    partitioned_by: Sequence[str] = (),
    options: Mapping[str, str] | None = None,
    comment: str | None = None,
    columns: Sequence[ColumnDefinition] = (),
    distribution: tuple[Sequence[str], int] | None = None,
    expectations: Sequence[ex.Expectation] = (),
    statement: str = "CREATE",
    actor: Any = None,
) -> MaterializedTable:
    """CREATE MATERIALIZED TABLE: see the module's docstring. Returns the ACTIVATED table;
    its first refresh (trigger CREATE) is queued. `columns`, the statement's schema part,
    must be satisfied by the schema Spark derives (their comments become the columns'
    docs); `distribution` (columns, n) adds a bucket[n] partition field per column."""
    name = check_name(name, field="name")
    if selectors.holder_of(selectors.get_namespace(namespace), name) is not None:
        raise AlreadyExists(
            f"Table with same name already exists: {namespace}.{name}", field="name"
        )
    options = check_table_options(dict(options or {}))
    for key, pattern in options.items():
        check_formatter_option(key, pattern, partitioned_by)
    plan = plan_refresh(freshness, refresh_mode, table_state.threshold())
    if not query or not query.strip():
        raise InvalidInput("A materialized table needs a query", field="query")
    sources = resolve_sources(query, namespace=namespace, own=(namespace, name), actor=actor)
    if plan.mode is RefreshMode.CONTINUOUS:
        check_streamable(query, namespace=namespace, primary_key=primary_key)
    definition = defs.Definition(
        query=query.strip(),
        default_namespace=namespace,
        freshness=freshness,
        refresh_mode=plan.mode,
        mode_is_explicit=refresh_mode is not None,
        primary_key=tuple(primary_key),
        constraint_name=constraint_name,
        partitioned_by=tuple(partitioned_by),
        options=options,
        comment=comment,
        distribution=(tuple(distribution[0]), int(distribution[1])) if distribution else None,
    )
    spark_schema = analysis.query_schema(definition.query, namespace=namespace)
    definitions.check_expectations(
        definition.query, expectations, spark_schema, namespace=namespace
    )
    schema = iceberg_schema(spark_schema)
    check_declared(columns, schema, statement=statement)
    defs.check_against_schema(definition, schema)
    schema = with_comments(
        iceberg_schema(spark_schema, identifier_fields=definition.primary_key), columns
    )

    with transaction.atomic():
        loaded = catalog_services.create_table(
            namespace=namespace,
            name=name,
            schema=schema,
            partition_spec=defs.partition_spec(
                schema, definition.partitioned_by, definition.distribution
            ),
            properties=defs.table_properties(
                definition, state=MaterializedTable.State.INITIALIZING, version=1
            ),
            actor=actor,
        )
        mt = MaterializedTable.objects.create(
            table=loaded.obj,
            query=definition.query,
            default_namespace=namespace,
            sources=sources,
            freshness_value=freshness.value,
            freshness_unit=freshness.unit.value,
            refresh_mode=plan.mode.value,
            mode_is_explicit=refresh_mode is not None,
            state=MaterializedTable.State.INITIALIZING,
            options=options,
            primary_key=list(definition.primary_key),
            constraint_name=constraint_name or "",
            partitioned_by=list(definition.partitioned_by),
            comment=comment or "",
            expectations=ex.as_json(expectations),
            created_by=actor if getattr(actor, "pk", None) else None,
        )
        definitions.new_version(mt, version_id=1, operation="create", actor=actor)
        table_state.record(
            mt, actor=actor, action="create_materialized_table", message=str(freshness)
        )
    try:
        with transaction.atomic():
            mt = table_state.locked(mt)
            run = None
            if plan.mode is RefreshMode.FULL:
                schedules.install(mt, enabled=True)
                run = runs.enqueue(mt, trigger=RefreshRun.Trigger.CREATE, force=True, actor=actor)
            # CONTINUOUS: the streaming process (refresh.streams) sees the active table,
            # loads it and starts its query; its first run has trigger CREATE.
            mt.state = MaterializedTable.State.ACTIVATED
            mt.save(update_fields=["state", "updated_at"])
        table_state.commit_properties(mt, actor=actor)
        if run is not None:
            runs.dispatch(run)
    except Exception as error:
        logger.exception("Setting up the refresh pipeline of %s failed", mt)
        _undo_create(mt, actor=actor)
        reason = error.message if isinstance(error, CatalogError) else str(error)
        raise PipelineFailed(
            f"The refresh pipeline of {namespace}.{name} could not be set up, so the create "
            f"was undone: {reason}"
        ) from error
    return mt


def _undo_create(mt: MaterializedTable, *, actor: Any) -> None:
    table = mt.table
    with transaction.atomic():
        RefreshRun.objects.filter(materialized_table=mt).delete()
        schedules.remove(mt)
    with contextlib.suppress(NoSuchTable):
        catalog_services.drop_table(
            namespace=table.namespace.name, name=table.name, purge=True, actor=actor
        )


def resume(
    mt: MaterializedTable, *, actor: Any = None, options: Mapping[str, str] | None = None
) -> MaterializedTable:
    """RESUME [WITH (...)]: the options apply to the runs the schedule starts from now on
    (until the next SUSPEND), and are not part of the definition."""
    run_options = check_run_options(dict(options or {}))
    with transaction.atomic():
        mt = table_state.locked(mt)
        if mt.state == MaterializedTable.State.INITIALIZING:
            raise table_state.InvalidState(
                f"Materialized table {mt} is initializing and cannot be resumed"
            )
        if mt.state == MaterializedTable.State.ACTIVATED:
            raise table_state.InvalidState(f"Materialized table {mt} is already active")
        mt.state = MaterializedTable.State.ACTIVATED
        mt.suspended_reason = ""
        mt.consecutive_failures = 0
        mt.save(update_fields=["state", "suspended_reason", "consecutive_failures", "updated_at"])
        if mt.refresh_mode == RefreshMode.FULL:
            schedules.install(mt, enabled=True, run_options=run_options)
        else:  # the streaming query restarts from its checkpoint with these settings
            mt.stream_options = run_options
            mt.save(update_fields=["stream_options"])
        message = f"with {run_options}" if run_options else ""
        table_state.record(mt, actor=actor, action="resume_materialized_table", message=message)
        table_state.commit_properties(mt, actor=actor)
    return mt


def _replan(
    mt: MaterializedTable, freshness: Freshness, explicit: RefreshMode | None
) -> RefreshMode:
    plan = plan_refresh(freshness, explicit, table_state.threshold())
    if plan.mode is RefreshMode.CONTINUOUS:
        check_streamable(
            mt.query,
            namespace=mt.default_namespace or mt.table.namespace.name,
            primary_key=mt.primary_key,
        )
    if plan.mode.value != mt.refresh_mode and plan.mode is RefreshMode.CONTINUOUS:
        # From FULL: the streaming process loads the table again and starts a new stream.
        mt.stream_checkpoint = ""
        mt.save(update_fields=["stream_checkpoint"])
    return plan.mode


def set_freshness(
    mt: MaterializedTable, *, freshness: Freshness, actor: Any = None
) -> MaterializedTable:
    """SET FRESHNESS: a new schedule, and a new mode unless the mode was given explicitly."""
    with transaction.atomic():
        mt = table_state.locked(mt)
        definitions.refuse_while_pending(mt, "change its freshness")
        explicit = RefreshMode(mt.refresh_mode) if mt.mode_is_explicit else None
        mode = _replan(mt, freshness, explicit)
        mt.freshness_value, mt.freshness_unit = freshness.value, freshness.unit.value
        mt.refresh_mode = mode.value
        mt.save(update_fields=["freshness_value", "freshness_unit", "refresh_mode", "updated_at"])
        _reschedule(mt)
        table_state.record(mt, actor=actor, action="set_freshness", message=str(freshness))
        table_state.commit_properties(mt, actor=actor)
    return mt


def set_refresh_mode(
    mt: MaterializedTable, *, refresh_mode: RefreshMode | None, actor: Any = None
) -> MaterializedTable:
    """SET REFRESH_MODE; None (a CREATE OR ALTER without REFRESH_MODE) lets the freshness
    decide the mode again, as at a CREATE without it (Flink's AUTOMATIC)."""
    with transaction.atomic():
        mt = table_state.locked(mt)
        definitions.refuse_while_pending(mt, "change its refresh mode")
        explicit = RefreshMode(refresh_mode) if refresh_mode is not None else None
        mode = _replan(mt, mt.freshness, explicit)
        mt.refresh_mode, mt.mode_is_explicit = mode.value, explicit is not None
        mt.save(update_fields=["refresh_mode", "mode_is_explicit", "updated_at"])
        _reschedule(mt)
        message = mode.value if explicit is not None else f"automatic ({mode.value})"
        table_state.record(mt, actor=actor, action="set_refresh_mode", message=message)
        table_state.commit_properties(mt, actor=actor)
    return mt


def _reschedule(mt: MaterializedTable) -> None:
    if mt.refresh_mode == RefreshMode.FULL:
        run_options = schedules.run_options(mt)
        schedules.install(
            mt, enabled=mt.state == MaterializedTable.State.ACTIVATED, run_options=run_options
        )
    else:
        schedules.remove(mt)


def set_options(
    mt: MaterializedTable, *, options: Mapping[str, str], actor: Any = None
) -> MaterializedTable:
    """SET ('k' = 'v', ...): options are checked as at CREATE (a date formatter must name a
    string partition column)."""
    options = check_table_options(dict(options))
    with transaction.atomic():
        mt = table_state.locked(mt)
        for key, pattern in options.items():
            check_formatter_option(key, pattern, mt.partitioned_by)
        merged = {**mt.options, **options}
        schema = {
            "fields": [
                {"name": f.name, "type": f.type, "required": f.required}
                for f in mt.table.schema_fields()
            ]
        }
        defs.check_against_schema(
            dataclasses.replace(table_state.definition_of(mt), options=options), schema
        )
        mt.options = merged
        mt.save(update_fields=["options", "updated_at"])
        table_state.record(
            mt, actor=actor, action="set_options", message=", ".join(sorted(options))
        )
        table_state.commit_properties(mt, actor=actor)
    return mt


def reset_options(
    mt: MaterializedTable, *, keys: Sequence[str], actor: Any = None
) -> MaterializedTable:
    keys = check_option_keys(keys)
    with transaction.atomic():
        mt = table_state.locked(mt)
        mt.options = {k: v for k, v in mt.options.items() if k not in keys}
        mt.save(update_fields=["options", "updated_at"])
        table_state.record(mt, actor=actor, action="reset_options", message=", ".join(keys))
        table_state.commit_properties(mt, actor=actor, removals=[k for k in keys])
    return mt


def set_comment(
    mt: MaterializedTable, *, comment: str | None, actor: Any = None
) -> MaterializedTable:
    """The table's COMMENT (CREATE OR ALTER): in the row and the table's `comment` property."""
    with transaction.atomic():
        mt = table_state.locked(mt)
        mt.comment = comment or ""
        mt.save(update_fields=["comment", "updated_at"])
        table_state.record(mt, actor=actor, action="set_comment", message=comment or "")
        table_state.commit_properties(mt, actor=actor, removals=() if comment else ["comment"])
    return mt


def set_column_comments(
    mt: MaterializedTable, *, comments: Mapping[str, str | None], actor: Any = None
) -> MaterializedTable:
    """Columns' COMMENTs (CREATE OR ALTER's schema part): their docs in a new current schema
    of the table (a schema-only commit; the rows stay); None removes a doc."""
    from catalog.core.tables import read_table_metadata

    with transaction.atomic():
        mt = table_state.locked(mt)
        definitions.refuse_while_pending(mt, "change its columns' comments")
        metadata = read_table_metadata(mt.table.metadata_location)
        schema = json.loads(metadata.schema().model_dump_json(by_alias=True, exclude_none=True))
        known = {f["name"] for f in schema["fields"]}
        for name in comments:
            if name not in known:
                raise InvalidInput(f"Column '{name}' not found in {mt}", field="columns")
        for column in schema["fields"]:
            if column["name"] in comments:
                column.pop("doc", None)
                if comments[column["name"]]:
                    column["doc"] = comments[column["name"]]
        table_state.commit_schema(mt, metadata, schema, actor=actor)
        table_state.record(
            mt, actor=actor, action="set_column_comments", message=", ".join(comments)
        )
    return mt


def drop_materialized_table(mt: MaterializedTable, *, actor: Any = None) -> None:
    """DROP: refused while views or materialized tables read the table; otherwise the
    schedule goes, queued runs are cancelled and the table is dropped with its files."""
    table = mt.table
    readers = readers_of(table.namespace.name, table.name)
    if readers:
        raise table_state.InvalidState(
            f"Materialized table {mt} cannot be dropped while these read it: " + ", ".join(readers),
            field="name",
        )
    with transaction.atomic():
        mt = table_state.locked(mt)
        mt.runs.filter(state=RefreshRun.State.QUEUED).update(
            state=RefreshRun.State.CANCELLED,
            finished_at=timezone.now(),
            error="The materialized table was dropped",
        )
        schedules.remove(mt)
        table_state.record(mt, actor=actor, action="drop_materialized_table")
        catalog_services.drop_table(
            namespace=table.namespace.name, name=table.name, purge=True, actor=actor
        )


def record_data_change(mt: MaterializedTable, *, kind: str, actor: Any = None) -> None:
    """An UPDATE or DELETE ran on the table (by Spark, from the console): kept in its
    history, since the next full refresh overwrites it."""
    table_state.record(mt, actor=actor, action=f"{kind.lower()}_materialized_table")


#: Verifications kept per table (the newest); older ones are dropped as new ones come.
VERIFICATIONS_KEPT = 200


def record_verification(
    mt: MaterializedTable,
    *,
    snapshot_id: int,
    verdict: str,
    definition_version: int | None = None,
    source_snapshots: Mapping[str, int | None] | None = None,
    missing_rows: int | None = None,
    extra_rows: int | None = None,
    sample: Mapping[str, Any] | None = None,
    reason: str = "",
    seconds: float | None = None,
    actor: Any = None,
) -> Verification:
    """Keep a snapshot's verification with the table's history (the newest
    VERIFICATIONS_KEPT of them), and say so in the catalog's history."""
    with transaction.atomic():
        verification = Verification.objects.create(
            materialized_table=mt,
            snapshot_id=snapshot_id,
            verdict=verdict,
            definition_version=definition_version,
            source_snapshots=dict(source_snapshots or {}),
            missing_rows=missing_rows,
            extra_rows=extra_rows,
            sample=dict(sample or {}),
            reason=reason,
            seconds=seconds,
            requested_by=actor if getattr(actor, "pk", None) else None,
        )
        stale = mt.verifications.order_by("-verified_at", "-id").values_list("pk", flat=True)[
            VERIFICATIONS_KEPT:
        ]
        Verification.objects.filter(pk__in=list(stale)).delete()
        signals.verified.send(Verification, verification=verification)
        message = f"snapshot {snapshot_id}: {verdict.lower()}"
        if verdict == Verification.Verdict.DIFFERS:
            message += f" ({missing_rows} rows missing, {extra_rows} extra)"
        elif reason:
            message += f" ({reason})"
        table_state.record(mt, actor=actor, action="verify_materialized_table", message=message)
    return verification

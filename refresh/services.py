"""Every write to materialized tables and their refresh runs: the lifecycle of FLIP-435 as
Flink's MaterializedTableManager applies it, on the catalog's one commit path.

- CREATE resolves the query's sources in the catalog (unknown ones and cycles refused, with
  the line and column), has Spark's analyzer derive the schema (on a refresh worker), checks
  it as Flink does, creates the Iceberg table (its definition in the table's properties) and
  the row INITIALIZING, then sets up the refresh pipeline (the schedule, the first refresh)
  and turns ACTIVATED. If the pipeline cannot be set up, the create is undone: schedule,
  runs, row and table with its files.
- SUSPEND and RESUME are refused while INITIALIZING; suspending a suspended table or
  resuming an active one is an error. SUSPEND disables the schedule, RESUME enables it; the
  options of RESUME WITH go to the resumed runs only, never into the definition.
- A refresh is a RefreshRun row, claimed by a conditional update (QUEUED -> RUNNING) under a
  lock on its table, so a redelivered message or a manual refresh racing a scheduled one
  never does the same work twice at once. A run whose worker stopped saying it is alive is
  failed; after `MT_FAILURES_BEFORE_SUSPEND` consecutive failures (5, as Snowflake) the
  table suspends itself and says why.
- SET FRESHNESS / SET REFRESH_MODE re-plan the mode and the schedule; SET / RESET change
  options; DROP is refused while views or materialized tables read the table, and otherwise
  removes the schedule, cancels queued runs and drops the table with its data.

Every change to the definition or the state is also committed to the table's properties,
so an engine that loads the table sees what it is."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from catalog import access, history, selectors
from catalog import services as catalog_services
from catalog.core.errors import (
    AlreadyExists,
    CatalogError,
    CommitConflict,
    InvalidInput,
    NoSuchTable,
    NoSuchVersion,
    NotFound,
    SqlError,
    Unavailable,
)
from catalog.core.inputs import check_name
from catalog.models import Namespace, View
from refresh import analysis, rights, schedules, signals
from refresh.core import definition as defs
from refresh.core import expectations as ex
from refresh.core.columns import ColumnDefinition, check_declared, with_comments
from refresh.core.freshness import Freshness, RefreshMode, plan_refresh
from refresh.core.options import check_option_keys, check_run_options, check_table_options
from refresh.core.partitions import check_formatter_option, check_partition_values
from refresh.models import (
    MaterializedTable,
    MaterializedTableVersion,
    MaterializedTableVersionLogEntry,
    RefreshRun,
    Verification,
)
from refresh.sources import check_streamable
from refresh.spark.schema import iceberg_schema
from webapp import broker, metrics
from webapp.broker import redis_client

logger = logging.getLogger(__name__)

FAILURES_BEFORE_SUSPEND = 5


class InvalidState(CommitConflict):
    """The table's state forbids the operation (Flink's lifecycle rules); HTTP 409."""


class PipelineFailed(CatalogError):
    """The refresh pipeline of a new table could not be set up; the create was undone."""

    status = 503


def threshold() -> timedelta:
    return timedelta(seconds=settings.MT_FRESHNESS_THRESHOLD_SECONDS)


def _failures_allowed() -> int:
    return int(getattr(settings, "MT_FAILURES_BEFORE_SUSPEND", FAILURES_BEFORE_SUSPEND))


def _locked(mt: MaterializedTable) -> MaterializedTable:
    return (
        MaterializedTable.objects.select_for_update(of=("self",))
        .select_related("table__namespace", "periodic_task")
        .get(pk=mt.pk)
    )


def _record(mt: MaterializedTable, *, actor: Any, action: str, message: str = "") -> None:
    history.record_change(mt.table, actor=actor, action=action, message=message)


def _definition(mt: MaterializedTable) -> defs.Definition:
    return defs.Definition(
        query=mt.query,
        default_namespace=mt.default_namespace or mt.table.namespace.name,
        freshness=mt.freshness,
        refresh_mode=RefreshMode(mt.refresh_mode),
        mode_is_explicit=mt.mode_is_explicit,
        primary_key=tuple(mt.primary_key),
        constraint_name=mt.constraint_name or None,
        partitioned_by=tuple(mt.partitioned_by),
        options=dict(mt.options),
        comment=mt.comment or None,
        distribution=distribution(mt),
    )


def distribution(mt: MaterializedTable) -> tuple[tuple[str, ...], int] | None:
    """DISTRIBUTED BY, as the table's current partition spec has it (bucket fields)."""
    names = {f.field_id: f.name for f in mt.table.schema_fields()}
    return defs.distribution_of(mt.table.default_spec(), names)


def _commit_properties(mt: MaterializedTable, *, actor: Any, removals: Sequence[str] = ()) -> None:
    """Write the definition and state into the table's properties (one catalog commit)."""
    updates: list[dict[str, Any]] = [
        {
            "action": "set-properties",
            "updates": defs.table_properties(
                _definition(mt), state=mt.state, version=mt.current_version
            ),
        }
    ]
    if removals:
        updates.append({"action": "remove-properties", "removals": list(removals)})
    catalog_services.commit_table(
        namespace=mt.table.namespace.name,
        name=mt.table.name,
        requirements=[],
        updates=updates,
        actor=actor,
    )
    mt.table.refresh_from_db()


# -- sources -------------------------------------------------------------------------------


def resolve_sources(
    query: str,
    *,
    namespace: str,
    own: tuple[str, str],
    planned: Collection[str] = (),
    actor: Any = None,
) -> list[str]:
    """["ns.name", ...] the query reads, each a table, view or materialized table of this
    catalog; an unknown one, one of another catalog, or one that (through views and other
    materialized tables) reads the table being defined is refused with its line and
    column in the query. `planned` names objects a plan's earlier statements create: they
    count as there (a dry run changes nothing, so they are not). Given the `actor` who
    defines the table, each source must be one it may read (refresh.rights.check_source):
    one it may not see is refused as an unknown one."""
    from sqlglot import exp

    from catalog.core.sql import parse_query

    parsed = parse_query(query, "spark")
    _refuse_reflection(parsed)
    ctes = {cte.alias_or_name for cte in parsed.find_all(exp.CTE)}
    found: list[str] = []
    for table in parsed.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier):
            continue  # a table-valued function (range(...)); the worker's sandbox decides
        parts = [part.name for part in table.parts]
        if len(parts) == 1 and parts[0] in ctes:
            continue
        meta = table.this.meta if isinstance(table.this, exp.Expression) else {}
        line, column = meta.get("line"), meta.get("col")
        if column is not None:
            column = max(1, column - len(parts[-1]) + 1)
        if len(parts) >= 3 and parts[0] != settings.CATALOG_NAME:
            raise SqlError(
                f"{'.'.join(parts)} is not in this catalog ({settings.CATALOG_NAME}): a "
                "materialized table reads tables, views and materialized tables of its "
                "own catalog",
                line=line,
                column=column,
                field="query",
            )
        if len(parts) >= 3:
            parts = parts[1:]
        ns = ".".join(parts[:-1]) if len(parts) > 1 else namespace
        qualified = f"{ns}.{parts[-1]}"
        if (ns, parts[-1]) == own:
            raise SqlError(
                f"A materialized table cannot read itself: {qualified}",
                line=line,
                column=column,
                field="query",
            )
        in_namespace = Namespace.objects.filter(name=ns).first()
        holder = selectors.holder_of(in_namespace, parts[-1]) if in_namespace else None
        if actor is not None and holder is not None:
            holder = rights.check_source(
                access.for_user(actor), holder, qualified, line=line, column=column
            )
        if holder is None and qualified not in planned:
            raise SqlError(
                f"Table or view not found: {qualified}", line=line, column=column, field="query"
            )
        if qualified not in found:
            found.append(qualified)
    _refuse_cycle(found, own)
    return found


#: Spark functions that call any static Java method (System.exit included): a query that
#: refresh workers run on the app's behalf must not reach into their JVM. A first pass
#: here, with no worker asked; the worker's sandbox (refresh.spark.sandbox) refuses them in
#: Spark's own plan, where no spelling escapes it.
REFLECTION_FUNCTIONS = frozenset({"reflect", "java_method", "try_reflect"})


def _refuse_reflection(parsed: Any) -> None:
    from sqlglot import exp

    for call in parsed.find_all(exp.Anonymous, exp.Func):
        name = (call.name if isinstance(call, exp.Anonymous) else call.sql_name()).lower()
        if name in REFLECTION_FUNCTIONS:
            raise InvalidInput(
                f"{name}() calls Java methods inside the refresh workers and is not allowed "
                "in a materialized table's query",
                field="query",
            )


def _refuse_cycle(sources: list[str], own: tuple[str, str]) -> None:
    """Walk what the sources read (views through their current version, materialized
    tables through their query) and refuse a path that leads back to `own`."""
    target = f"{own[0]}.{own[1]}"
    pending = [(s, [s]) for s in sources]
    seen: set[str] = set()
    while pending:
        name, path = pending.pop()
        if name == target:
            raise InvalidInput(
                "The query reads itself through a cycle: " + " -> ".join([target, *path]),
                field="query",
            )
        if name in seen:
            continue
        seen.add(name)
        ns, _, short = name.rpartition(".")
        view = View.objects.filter(namespace__name=ns, name=short).first()
        if view is not None:
            for dependency in view.dependencies:
                catalog, *levels, dep_name = dependency
                if catalog and catalog != settings.CATALOG_NAME:
                    continue
                qualified = f"{'.'.join(levels)}.{dep_name}"
                pending.append((qualified, [*path, qualified]))
            continue
        mt = MaterializedTable.objects.filter(table__namespace__name=ns, table__name=short).first()
        if mt is not None:
            pending.extend((s, [*path, s]) for s in mt.sources)


def readers_of(namespace: str, name: str) -> list[str]:
    """The views and materialized tables that read `namespace.name`."""
    qualified = f"{namespace}.{name}"
    readers = []
    for view in View.objects.reading(namespace, name).select_related("namespace"):
        readers.append(f"view {view}")
    for mt in MaterializedTable.objects.filter(sources__icontains=name).select_related(
        "table__namespace"
    ):
        if qualified in mt.sources:
            readers.append(f"materialized table {mt}")
    return readers


# -- create --------------------------------------------------------------------------------


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
    plan = plan_refresh(freshness, refresh_mode, threshold())
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
    check_expectations(definition.query, expectations, spark_schema, namespace=namespace)
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
        _new_version(mt, version_id=1, operation="create", actor=actor)
        _record(mt, actor=actor, action="create_materialized_table", message=str(freshness))
    try:
        with transaction.atomic():
            mt = _locked(mt)
            run = None
            if plan.mode is RefreshMode.FULL:
                schedules.install(mt, enabled=True)
                run = enqueue(mt, trigger=RefreshRun.Trigger.CREATE, force=True, actor=actor)
            # CONTINUOUS: the streaming process (refresh.streams) sees the active table,
            # loads it and starts its query; its first run has trigger CREATE.
            mt.state = MaterializedTable.State.ACTIVATED
            mt.save(update_fields=["state", "updated_at"])
        _commit_properties(mt, actor=actor)
        if run is not None:
            dispatch(run)
    except Exception as error:
        logger.exception("Setting up the refresh pipeline of %s failed", mt)
        _undo_create(mt, actor=actor)
        reason = error.message if isinstance(error, CatalogError) else str(error)
        raise PipelineFailed(
            f"The refresh pipeline of {namespace}.{name} could not be set up, so the create "
            f"was undone: {reason}"
        ) from error
    return mt


def _new_version(
    mt: MaterializedTable, *, version_id: int, operation: str, actor: Any
) -> MaterializedTableVersion:
    """Record the table's current definition as `version_id` and make it current."""
    version = MaterializedTableVersion.objects.create(
        materialized_table=mt,
        version_id=version_id,
        query=mt.query,
        default_namespace=mt.default_namespace,
        sources=mt.sources,
        schema_id=mt.table.current_schema_id,
        expectations=mt.expectations,
        created_by=_user(actor),
    )
    MaterializedTableVersionLogEntry.objects.create(
        materialized_table=mt,
        version_id=version_id,
        operation=operation,
        actor=actor if getattr(actor, "pk", None) else None,
    )
    return version


def check_expectations(
    query: str, expectations: Sequence[ex.Expectation], spark_schema: str, *, namespace: str
) -> None:
    """Each condition names only the query's output columns, and Spark's sandbox allows the
    query with the conditions evaluated on its rows (functions on its allow list, a boolean
    result), as it allows query text. Writes nothing."""
    if not expectations:
        return
    names = [field["name"] for field in json.loads(spark_schema)["fields"]]
    ex.check_columns(expectations, names)
    try:
        analysis.query_schema(ex.flagged_query(query, expectations), namespace=namespace)
    except SqlError as error:
        # Spark's place is in the wrapped query's text, not the statement's.
        raise InvalidInput(
            f"An expectation's condition is refused: {error.message}", field="expectations"
        ) from None


def _undo_create(mt: MaterializedTable, *, actor: Any) -> None:
    table = mt.table
    with transaction.atomic():
        RefreshRun.objects.filter(materialized_table=mt).delete()
        schedules.remove(mt)
    with contextlib.suppress(NoSuchTable):
        catalog_services.drop_table(
            namespace=table.namespace.name, name=table.name, purge=True, actor=actor
        )


# -- the lifecycle -------------------------------------------------------------------------


def suspend(mt: MaterializedTable, *, actor: Any = None, reason: str = "") -> MaterializedTable:
    with transaction.atomic():
        mt = _locked(mt)
        if mt.state == MaterializedTable.State.INITIALIZING:
            raise InvalidState(
                f"Materialized table {mt} is initializing and cannot be suspended yet"
            )
        if mt.state == MaterializedTable.State.SUSPENDED:
            raise InvalidState(f"Materialized table {mt} is already suspended")
        mt.state = MaterializedTable.State.SUSPENDED
        mt.suspended_reason = reason
        mt.save(update_fields=["state", "suspended_reason", "updated_at"])
        schedules.set_enabled(mt, False)
        _record(mt, actor=actor, action="suspend_materialized_table", message=reason)
        _commit_properties(mt, actor=actor)
    return mt


def resume(
    mt: MaterializedTable, *, actor: Any = None, options: Mapping[str, str] | None = None
) -> MaterializedTable:
    """RESUME [WITH (...)]: the options apply to the runs the schedule starts from now on
    (until the next SUSPEND), and are not part of the definition."""
    run_options = check_run_options(dict(options or {}))
    with transaction.atomic():
        mt = _locked(mt)
        if mt.state == MaterializedTable.State.INITIALIZING:
            raise InvalidState(f"Materialized table {mt} is initializing and cannot be resumed")
        if mt.state == MaterializedTable.State.ACTIVATED:
            raise InvalidState(f"Materialized table {mt} is already active")
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
        _record(mt, actor=actor, action="resume_materialized_table", message=message)
        _commit_properties(mt, actor=actor)
    return mt


def _replan(
    mt: MaterializedTable, freshness: Freshness, explicit: RefreshMode | None
) -> RefreshMode:
    plan = plan_refresh(freshness, explicit, threshold())
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
        mt = _locked(mt)
        _refuse_while_pending(mt, "change its freshness")
        explicit = RefreshMode(mt.refresh_mode) if mt.mode_is_explicit else None
        mode = _replan(mt, freshness, explicit)
        mt.freshness_value, mt.freshness_unit = freshness.value, freshness.unit.value
        mt.refresh_mode = mode.value
        mt.save(update_fields=["freshness_value", "freshness_unit", "refresh_mode", "updated_at"])
        _reschedule(mt)
        _record(mt, actor=actor, action="set_freshness", message=str(freshness))
        _commit_properties(mt, actor=actor)
    return mt


def set_refresh_mode(
    mt: MaterializedTable, *, refresh_mode: RefreshMode | None, actor: Any = None
) -> MaterializedTable:
    """SET REFRESH_MODE; None (a CREATE OR ALTER without REFRESH_MODE) lets the freshness
    decide the mode again, as at a CREATE without it (Flink's AUTOMATIC)."""
    with transaction.atomic():
        mt = _locked(mt)
        _refuse_while_pending(mt, "change its refresh mode")
        explicit = RefreshMode(refresh_mode) if refresh_mode is not None else None
        mode = _replan(mt, mt.freshness, explicit)
        mt.refresh_mode, mt.mode_is_explicit = mode.value, explicit is not None
        mt.save(update_fields=["refresh_mode", "mode_is_explicit", "updated_at"])
        _reschedule(mt)
        message = mode.value if explicit is not None else f"automatic ({mode.value})"
        _record(mt, actor=actor, action="set_refresh_mode", message=message)
        _commit_properties(mt, actor=actor)
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
        mt = _locked(mt)
        for key, pattern in options.items():
            check_formatter_option(key, pattern, mt.partitioned_by)
        merged = {**mt.options, **options}
        schema = {
            "fields": [
                {"name": f.name, "type": f.type, "required": f.required}
                for f in mt.table.schema_fields()
            ]
        }
        defs.check_against_schema(dataclasses.replace(_definition(mt), options=options), schema)
        mt.options = merged
        mt.save(update_fields=["options", "updated_at"])
        _record(mt, actor=actor, action="set_options", message=", ".join(sorted(options)))
        _commit_properties(mt, actor=actor)
    return mt


def reset_options(
    mt: MaterializedTable, *, keys: Sequence[str], actor: Any = None
) -> MaterializedTable:
    keys = check_option_keys(keys)
    with transaction.atomic():
        mt = _locked(mt)
        mt.options = {k: v for k, v in mt.options.items() if k not in keys}
        mt.save(update_fields=["options", "updated_at"])
        _record(mt, actor=actor, action="reset_options", message=", ".join(keys))
        _commit_properties(mt, actor=actor, removals=[k for k in keys])
    return mt


def set_comment(
    mt: MaterializedTable, *, comment: str | None, actor: Any = None
) -> MaterializedTable:
    """The table's COMMENT (CREATE OR ALTER): in the row and the table's `comment` property."""
    with transaction.atomic():
        mt = _locked(mt)
        mt.comment = comment or ""
        mt.save(update_fields=["comment", "updated_at"])
        _record(mt, actor=actor, action="set_comment", message=comment or "")
        _commit_properties(mt, actor=actor, removals=() if comment else ["comment"])
    return mt


def set_column_comments(
    mt: MaterializedTable, *, comments: Mapping[str, str | None], actor: Any = None
) -> MaterializedTable:
    """Columns' COMMENTs (CREATE OR ALTER's schema part): their docs in a new current schema
    of the table (a schema-only commit; the rows stay); None removes a doc."""
    from catalog.core.tables import read_table_metadata

    with transaction.atomic():
        mt = _locked(mt)
        _refuse_while_pending(mt, "change its columns' comments")
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
        _commit_schema(mt, metadata, schema, actor=actor)
        _record(mt, actor=actor, action="set_column_comments", message=", ".join(comments))
    return mt


def _commit_schema(mt: MaterializedTable, metadata: Any, schema: dict, *, actor: Any) -> None:
    """`schema` (the current one, changed) as the table's new current schema."""
    schema["schema-id"] = max(s.schema_id for s in metadata.schemas) + 1
    catalog_services.commit_table(
        namespace=mt.table.namespace.name,
        name=mt.table.name,
        requirements=[
            {"type": "assert-current-schema-id", "current-schema-id": metadata.current_schema_id}
        ],
        updates=[
            {"action": "add-schema", "schema": schema, "last-column-id": metadata.last_column_id},
            {"action": "set-current-schema", "schema-id": -1},
        ],
        actor=actor,
    )
    mt.table.refresh_from_db()


def alter_query(
    mt: MaterializedTable,
    *,
    query: str,
    columns: Sequence[ColumnDefinition] = (),
    expectations: Sequence[ex.Expectation] | None = None,
    actor: Any = None,
) -> RefreshRun:
    """ALTER MATERIALIZED TABLE ... AS <query>: a new definition version, applied by a
    rebuild (see `_redefine`). Returns the rebuild's run. `columns` (CREATE OR ALTER's
    schema part) must be satisfied by the new query's schema; `expectations` (CREATE OR
    ALTER's) replace the table's, which ALTER ... AS (None) keeps."""
    if not query or not query.strip():
        raise InvalidInput("A materialized table needs a query", field="query")
    return _redefine(
        mt,
        query=query.strip(),
        version_id=None,
        operation="alter",
        actor=actor,
        columns=columns,
        expectations=expectations,
    )


def check_query(
    mt: MaterializedTable,
    *,
    query: str,
    columns: Sequence[ColumnDefinition] = (),
    expectations: Sequence[ex.Expectation] | None = None,
    actor: Any = None,
) -> None:
    """What ALTER ... AS checks before it writes (sources, the stream's shape, Spark's schema
    against the schema part and Flink's rules), writing nothing: CREATE OR ALTER asks it
    before changing anything else, so that a refused query leaves the table as it was."""
    table = mt.table
    namespace = mt.default_namespace or table.namespace.name
    own = (table.namespace.name, table.name)
    resolve_sources(query, namespace=namespace, own=own, actor=actor)
    if mt.refresh_mode == RefreshMode.CONTINUOUS:
        check_streamable(query, namespace=namespace, primary_key=mt.primary_key)
    spark_schema = analysis.query_schema(query, namespace=namespace)
    if expectations is None:
        expectations = ex.from_json(mt.expectations)
    check_expectations(query, expectations, spark_schema, namespace=namespace)
    schema = iceberg_schema(spark_schema)
    check_declared(columns, schema, statement="CREATE OR ALTER")
    defs.check_against_schema(dataclasses.replace(_definition(mt), query=query), schema)


def rollback_definition(mt: MaterializedTable, *, version_id: int, actor: Any = None) -> RefreshRun:
    """Make an earlier definition current again, by a rebuild as ALTER ... AS does."""
    _refuse_while_pending(mt, "change its definition")
    version = mt.versions.filter(version_id=version_id).first()
    if version is None:
        raise NoSuchVersion(
            f"Materialized table {mt} has no definition version {version_id}", field="version_id"
        )
    if version_id == mt.current_version:  # checked again under the lock
        raise InvalidInput(f"Version {version_id} is already current", field="version_id")
    return _redefine(
        mt, query=version.query, version_id=version_id, operation="rollback", actor=actor
    )


def pending_change(mt: MaterializedTable) -> MaterializedTableVersionLogEntry | None:
    """The ALTER ... AS or rollback whose rebuild has not finished, if any."""
    return (
        mt.version_log.filter(outcome=MaterializedTableVersionLogEntry.Outcome.PENDING)
        .select_related("run")
        .first()
    )


def _refuse_while_pending(mt: MaterializedTable, what: str) -> None:
    pending = pending_change(mt)
    if pending is not None:
        raise InvalidState(
            f"Materialized table {mt} cannot {what} while version {pending.version_id} is "
            f"being applied (its rebuild is run {pending.run_id}); wait for it to finish",
        )


def _redefine(
    mt: MaterializedTable,
    *,
    query: str,
    version_id: int | None,
    operation: str,
    actor: Any,
    columns: Sequence[ColumnDefinition] = (),
    expectations: Sequence[ex.Expectation] | None = None,
) -> RefreshRun:
    """A new definition (alter: `version_id` None, the next id is taken under the lock) or
    an older one again (rollback). Checked now as CREATE checks (sources, Spark's schema,
    Flink's rules), then applied by a rebuild run (trigger REBUILD): the worker (FULL) or
    the streaming process (CONTINUOUS) builds the new rows and replaces the table's schema,
    partitioning, properties and rows in ONE Iceberg commit, and only then does this row
    take the new definition (`apply_rebuild`). Until then readers see the old definition
    with its rows; a rebuild that fails changes nothing they can see (`fail_rebuild`)."""
    from catalog.core.tables import read_table_metadata

    table = mt.table
    namespace = mt.default_namespace or table.namespace.name
    _refuse_while_pending(mt, "change its definition")
    own = (table.namespace.name, table.name)
    sources = resolve_sources(query, namespace=namespace, own=own, actor=actor)
    definition = dataclasses.replace(_definition(mt), query=query)
    if expectations is None:
        kept = mt.expectations
        if version_id is not None:
            kept = mt.versions.get(version_id=version_id).expectations
        expectations = ex.from_json(kept)
    if mt.refresh_mode == RefreshMode.CONTINUOUS:
        check_streamable(query, namespace=namespace, primary_key=mt.primary_key)
    spark_schema = analysis.query_schema(query, namespace=namespace)
    if version_id is None:  # an older version's were checked when it was made
        check_expectations(query, expectations, spark_schema, namespace=namespace)
    check_declared(columns, iceberg_schema(spark_schema), statement="CREATE OR ALTER")
    defs.check_against_schema(definition, iceberg_schema(spark_schema))
    derived = iceberg_schema(spark_schema, identifier_fields=definition.primary_key)
    metadata = read_table_metadata(table.metadata_location)
    evolved = defs.evolve_schema(
        json.loads(metadata.schema().model_dump_json(by_alias=True)),
        derived,
        last_column_id=metadata.last_column_id,
        schema_id=max(s.schema_id for s in metadata.schemas) + 1,
    )
    with transaction.atomic():
        mt = _locked(mt)
        _refuse_while_pending(mt, "change its definition")
        if version_id is None:
            newest = mt.versions.order_by("-version_id").values_list("version_id", flat=True)
            version_id = (newest.first() or 0) + 1
            MaterializedTableVersion.objects.create(
                materialized_table=mt,
                version_id=version_id,
                query=query,
                default_namespace=namespace,
                sources=sources,
                declared_columns={
                    c.name: {"comment": c.comment or None, "not_null": c.not_null}
                    for c in columns
                    if c.type is not None
                },
                expectations=ex.as_json(expectations),
                created_by=_user(actor),
            )
        elif version_id == mt.current_version:
            raise InvalidInput(f"Version {version_id} is already current", field="version_id")
        run = RefreshRun.objects.create(
            materialized_table=mt,
            table_name=str(mt.table),
            trigger=RefreshRun.Trigger.REBUILD,
            action=RefreshRun.Action.FULL,
            force=True,
            definition_version=version_id,
            requested_by=_user(actor),
        )
        MaterializedTableVersionLogEntry.objects.create(
            materialized_table=mt,
            version_id=version_id,
            operation=operation,
            actor=_user(actor),
            outcome=MaterializedTableVersionLogEntry.Outcome.PENDING,
            run=run,
        )
        changes = ", ".join(
            f"{label}: {', '.join(names)}"
            for label, names in (
                ("added", evolved.added),
                ("replaced", evolved.replaced),
                ("dropped", evolved.dropped),
            )
            if names
        )
        _record(
            mt,
            actor=actor,
            action=f"{operation}_materialized_table_definition",
            message=f"version {version_id} asked for; rebuilt by run {run.pk}"
            + (f" ({changes})" if changes else ""),
        )
    if mt.refresh_mode != RefreshMode.CONTINUOUS:
        # CONTINUOUS: the streaming process stops the table's query, rebuilds, restarts.
        try:
            dispatch(run)
        except Unavailable as error:
            fail_rebuild(run, error=error.message)
            raise
    return run


def _user(actor: Any) -> Any:
    return actor if getattr(actor, "pk", None) else None


def rebuild_of(run: RefreshRun) -> tuple[defs.Definition, dict[str, str]]:
    """What a rebuild run builds: the definition of its version, and the table properties
    its commit sets (the definition, the state, the version)."""
    mt = run.materialized_table
    version = mt.versions.get(version_id=run.definition_version)
    definition = dataclasses.replace(
        _definition(mt), query=version.query, default_namespace=version.default_namespace
    )
    properties = defs.table_properties(definition, state=mt.state, version=version.version_id)
    return definition, properties


def apply_rebuild(
    run: RefreshRun, *, stream: Mapping[str, Any] | None = None, **results: Any
) -> RefreshRun:
    """The rebuild committed: the version becomes current here too (its query, sources, the
    schema it has), the log entry APPLIED, the run SUCCEEDED; for a CONTINUOUS table the new
    stream's checkpoint and pins (`stream`). Then the primary key's identifier fields, which
    REPLACE TABLE cannot carry, are set again (a schema-only commit; the rows stay)."""
    with transaction.atomic():
        mt = _locked(run.materialized_table)
        entry = mt.version_log.get(run=run)
        version = mt.versions.get(version_id=run.definition_version)
        mt.query, mt.sources, mt.current_version = (
            version.query,
            version.sources,
            version.version_id,
        )
        mt.default_namespace, mt.expectations = version.default_namespace, version.expectations
        fields = [
            "query", "sources", "current_version", "default_namespace", "expectations",
            "updated_at",
        ]  # fmt: skip
        if stream is not None:
            mt.stream_checkpoint, mt.stream_start = stream["checkpoint"], stream["start"]
            fields += ["stream_checkpoint", "stream_start"]
        mt.save(update_fields=fields)
        mt.table.refresh_from_db()
        _set_identifier_fields(mt, declared=version.declared_columns, actor=run.requested_by)
        if version.schema_id is None:
            version.schema_id = mt.table.current_schema_id
            version.save(update_fields=["schema_id"])
        entry.outcome = MaterializedTableVersionLogEntry.Outcome.APPLIED
        entry.save(update_fields=["outcome"])
        _record(
            mt,
            actor=run.requested_by,
            action=f"{entry.operation}_materialized_table_definition_applied",
            message=f"version {version.version_id} is current (run {run.pk})",
        )
        finish(run, state=RefreshRun.State.SUCCEEDED, **results)
    return run


def fail_rebuild(
    run: RefreshRun,
    *,
    error: str,
    state: str = RefreshRun.State.FAILED,
    expectations: Mapping[str, int] | None = None,
) -> RefreshRun:
    """The rebuild failed (or was cancelled: `state`) before its commit: the table, its
    definition and its state stay as they were; the run and the version log say why the
    change did not take effect. Not counted toward the automatic suspension: the table's
    refreshes are not failing."""
    with transaction.atomic():
        done = RefreshRun.objects.filter(pk=run.pk, state__in=RefreshRun.ACTIVE).update(
            state=state,
            finished_at=timezone.now(),
            error=error[:10_000],
            expectations=dict(expectations or {}),
        )
        run.refresh_from_db()
        if done == 1:
            observe_finished(run)
        entry = MaterializedTableVersionLogEntry.objects.filter(run=run).first()
        if entry is not None and run.materialized_table_id is not None:
            entry.outcome = MaterializedTableVersionLogEntry.Outcome.FAILED
            entry.error = error[:10_000]
            entry.save(update_fields=["outcome", "error"])
            _record(
                run.materialized_table,
                actor=run.requested_by,
                action=f"{entry.operation}_materialized_table_definition_failed",
                message=f"version {entry.version_id} did not take effect: {error[:2000]}",
            )
    return run


def _set_identifier_fields(
    mt: MaterializedTable, *, declared: Mapping[str, Mapping[str, Any]], actor: Any
) -> None:
    """What REPLACE TABLE cannot carry, set again on the rebuilt schema (one schema-only
    commit, when anything is missing): the primary key as identifier fields; NOT NULL and
    comments as the version's schema part declared them (`declared`); and each other
    column's comment, which a column keeps across a redefinition (taken from the newest
    earlier schema that has a column of that name)."""
    from catalog.core.tables import read_table_metadata

    metadata = read_table_metadata(mt.table.metadata_location)
    schema = json.loads(metadata.schema().model_dump_json(by_alias=True, exclude_none=True))
    changed = False
    if mt.primary_key:
        ids = {f["name"]: f["id"] for f in schema["fields"]}
        wanted = sorted(ids[name] for name in mt.primary_key if name in ids)
        if sorted(schema.get("identifier-field-ids") or []) != wanted:
            for field in schema["fields"]:
                if field["id"] in wanted:
                    field["required"] = True
            schema["identifier-field-ids"] = wanted
            changed = True
    earlier = sorted(
        (s for s in metadata.schemas if s.schema_id != metadata.current_schema_id),
        key=lambda s: s.schema_id,
        reverse=True,
    )
    for field in schema["fields"]:
        if field["name"] in declared:  # declared with this query: as declared
            column = declared[field["name"]]
            if column["not_null"] and not field.get("required"):
                # Spark's schema for the query had it NOT NULL too (checked at ALTER).
                field["required"], changed = True, True
            if (field.get("doc") or None) != column["comment"]:
                field.pop("doc", None)
                if column["comment"]:
                    field["doc"] = column["comment"]
                changed = True
            continue
        if field.get("doc"):
            continue
        for older in earlier:
            match = next((f for f in older.fields if f.name == field["name"]), None)
            if match is not None:
                if match.doc:
                    field["doc"], changed = match.doc, True
                break
    if changed:
        _commit_schema(mt, metadata, schema, actor=actor)


def drop_materialized_table(mt: MaterializedTable, *, actor: Any = None) -> None:
    """DROP: refused while views or materialized tables read the table; otherwise the
    schedule goes, queued runs are cancelled and the table is dropped with its files."""
    table = mt.table
    readers = readers_of(table.namespace.name, table.name)
    if readers:
        raise InvalidState(
            f"Materialized table {mt} cannot be dropped while these read it: " + ", ".join(readers),
            field="name",
        )
    with transaction.atomic():
        mt = _locked(mt)
        mt.runs.filter(state=RefreshRun.State.QUEUED).update(
            state=RefreshRun.State.CANCELLED,
            finished_at=timezone.now(),
            error="The materialized table was dropped",
        )
        schedules.remove(mt)
        _record(mt, actor=actor, action="drop_materialized_table")
        catalog_services.drop_table(
            namespace=table.namespace.name, name=table.name, purge=True, actor=actor
        )


def record_data_change(mt: MaterializedTable, *, kind: str, actor: Any = None) -> None:
    """An UPDATE or DELETE ran on the table (by Spark, from the console): kept in its
    history, since the next full refresh overwrites it."""
    _record(mt, actor=actor, action=f"{kind.lower()}_materialized_table")


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
        _record(mt, actor=actor, action="verify_materialized_table", message=message)
    return verification


# -- runs ----------------------------------------------------------------------------------


def enqueue(
    mt: MaterializedTable,
    *,
    trigger: str,
    schedule_time: datetime | None = None,
    partition: Mapping[str, str] | None = None,
    options: Mapping[str, str] | None = None,
    force: bool = False,
    full: bool = False,
    actor: Any = None,
) -> RefreshRun:
    """A QUEUED run (any state may be refreshed by hand, as in Flink). A second run for a
    planned tick that already has one raises AlreadyExists."""
    partition = {str(k): str(v) for k, v in (partition or {}).items()}
    unknown = sorted(set(partition) - set(mt.partitioned_by))
    if unknown:
        raise InvalidInput(
            f"{', '.join(unknown)} is not a partition column of {mt} "
            f"(partitioned by: {', '.join(mt.partitioned_by) or 'nothing'})",
            field="partition",
        )
    if partition:
        check_partition_values(
            partition,
            options=mt.options,
            column_types={f.name: f.type for f in mt.table.schema_fields()},
        )
    try:
        with transaction.atomic():
            return RefreshRun.objects.create(
                materialized_table=mt,
                table_name=str(mt.table),
                trigger=trigger,
                schedule_time=schedule_time,
                partition=partition,
                options=check_run_options(dict(options or {})),
                force=force,
                full=full,
                definition_version=mt.current_version,
                requested_by=actor if getattr(actor, "pk", None) else None,
            )
    except IntegrityError as error:
        raise AlreadyExists(
            f"The tick at {schedule_time} of {mt} already has a refresh run"
        ) from error


def dispatch(run: RefreshRun, *, countdown: float | None = None) -> None:
    """Send the run to a worker (Celery's task `refresh.run_refresh`, by name: services sit
    below the tasks that call them). A broker that cannot be reached is Unavailable."""
    try:
        broker.send_task("refresh.run_refresh", args=[run.pk], countdown=countdown)
    except Exception as error:  # kombu's OperationalError and friends: the broker is down
        raise Unavailable(f"The task queue cannot be reached: {error}") from error


def request_refresh(
    mt: MaterializedTable,
    *,
    trigger: str = RefreshRun.Trigger.MANUAL,
    partition: Mapping[str, str] | None = None,
    schedule_time: datetime | None = None,
    options: Mapping[str, str] | None = None,
    force: bool = True,
    full: bool = False,
    actor: Any = None,
) -> RefreshRun:
    """A one-time refresh (ALTER ... REFRESH, the page's buttons, the API), in any state:
    queued and sent to a worker. Returns the run (its id is the job id)."""
    with transaction.atomic():
        run = enqueue(
            mt,
            trigger=trigger,
            partition=partition,
            schedule_time=schedule_time,
            options=options,
            force=force,
            full=full,
            actor=actor,
        )
        _record(
            mt,
            actor=actor,
            action="refresh_materialized_table",
            message=f"run {run.pk}" + (f", partition {run.partition}" if run.partition else ""),
        )
    try:
        dispatch(run)
    except Unavailable as error:
        # Never left QUEUED with no message on its way: the run says why it did not happen.
        finish(run, state=RefreshRun.State.FAILED, error=error.message)
        raise
    return run


def claim(run_id: int, *, worker: str) -> RefreshRun | None:
    """QUEUED -> RUNNING for this worker, unless the run is taken, finished, or another run
    of its table is running; None then (the caller does nothing)."""
    with transaction.atomic():
        run = RefreshRun.objects.filter(pk=run_id).first()
        if run is None or run.materialized_table_id is None:
            return None
        MaterializedTable.objects.select_for_update().filter(pk=run.materialized_table_id).get()
        busy = RefreshRun.objects.filter(
            materialized_table_id=run.materialized_table_id, state=RefreshRun.State.RUNNING
        ).exists()
        if busy:
            return None
        now = timezone.now()
        taken = RefreshRun.objects.filter(pk=run_id, state=RefreshRun.State.QUEUED).update(
            state=RefreshRun.State.RUNNING, started_at=now, heartbeat_at=now, worker=worker
        )
        if taken != 1:
            return None
        run.state, run.started_at, run.heartbeat_at, run.worker = (
            RefreshRun.State.RUNNING,
            now,
            now,
            worker,
        )
        signals.run_started.send(RefreshRun, run=run)
    run.refresh_from_db()
    return run


def heartbeat(run: RefreshRun) -> None:
    RefreshRun.objects.filter(pk=run.pk, state=RefreshRun.State.RUNNING).update(
        heartbeat_at=timezone.now()
    )


def cancel_run(run: RefreshRun, *, actor: Any = None) -> RefreshRun:
    """Stop a refresh run of a worker. A QUEUED run ends CANCELLED at once (its message then
    finds nothing to claim). A RUNNING one is asked to stop: its worker cancels the run's
    Spark jobs at its next look (about a second) and ends it CANCELLED, its table as it was
    (Spark aborts the write, and an Iceberg commit is all or nothing), unless the commit
    had already landed: then the run SUCCEEDED. A continuous table's runs belong to its
    stream, which SUSPEND stops; a finished run is InvalidState (409)."""
    who = _user(actor)
    by = f" by {who.get_username()}" if who is not None else ""
    with transaction.atomic():
        # The table's row first, as claim() and finish() take it, then the run's: taken the
        # other way round, a cancel and a worker's claim of the same run deadlock.
        mt_id = (
            RefreshRun.objects.filter(pk=run.pk)
            .values_list("materialized_table_id", flat=True)
            .first()
        )
        if mt_id is not None:
            MaterializedTable.objects.select_for_update().filter(pk=mt_id).first()
        locked = RefreshRun.objects.select_for_update().filter(pk=run.pk).first()
        if locked is None:  # deleted since the caller found it (its table dropped)
            raise NotFound(f"Job does not exist: {run.pk}", field="job_id")
        if locked.state in RefreshRun.FINISHED:
            raise InvalidState(f"Refresh run {run.pk} already ended {locked.state}")
        mt = locked.materialized_table
        if locked.trigger == RefreshRun.Trigger.CONTINUOUS or (
            mt is not None and mt.refresh_mode == RefreshMode.CONTINUOUS
        ):
            raise InvalidState(
                f"Refresh run {run.pk} belongs to the stream of the continuous table "
                f"{locked.table_name}: SUSPEND stops it"
            )
        if locked.state == RefreshRun.State.QUEUED:
            message = f"Cancelled{by} before it started"
            if locked.trigger == RefreshRun.Trigger.REBUILD:
                fail_rebuild(locked, error=message, state=RefreshRun.State.CANCELLED)
            else:
                finish(locked, state=RefreshRun.State.CANCELLED, error=message)
        elif locked.cancel_requested_at is None:
            RefreshRun.objects.filter(pk=run.pk).update(
                cancel_requested_at=timezone.now(), cancel_requested_by=who
            )
        else:  # asked before: nothing changes, and the history says it once
            mt = None
        if mt is not None:
            _record(mt, actor=actor, action="cancel_refresh_run", message=f"run {run.pk}")
    run.refresh_from_db()
    return run


def cancel_asked(run: RefreshRun) -> bool:
    """Whether someone asked the running `run` to stop (cancel_run)."""
    return RefreshRun.objects.filter(pk=run.pk, cancel_requested_at__isnull=False).exists()


def finish(run: RefreshRun, *, state: str, error: str = "", **results: Any) -> RefreshRun:
    """RUNNING (or QUEUED, for a skip decided before starting) -> a finished state; counts
    failures toward the automatic suspension."""
    with transaction.atomic():
        # The table's row first, then the run's, in the order claim() and cancel_run() take
        # them: the other order deadlocks with a cancel of the same run on PostgreSQL.
        if run.materialized_table_id is not None:
            MaterializedTable.objects.select_for_update().filter(
                pk=run.materialized_table_id
            ).first()
        done = RefreshRun.objects.filter(
            pk=run.pk, state__in=[RefreshRun.State.RUNNING, RefreshRun.State.QUEUED]
        ).update(state=state, finished_at=timezone.now(), error=error[:10_000], **results)
        run.refresh_from_db()
        if done == 1 and run.materialized_table_id is not None:
            _count(run)
        if done == 1:
            observe_finished(run)
    return run


def record_stream_failure(
    mt: MaterializedTable, *, error: str, expectations: Mapping[str, int] | None = None
) -> RefreshRun | None:
    """A continuous table's stream stopped on an error of its own: the first failure of a
    spell becomes a failed run in the history, announced as any failed run is (a
    notification's "run failed"; its next micro-batch is the recovery). Later failures of
    the same spell (the stream retries every few seconds) add nothing. Not counted toward
    the automatic suspension: the stream retries by itself, and its micro-batches, which
    are recorded as they commit, do not reset that count. `expectations`: the failed
    micro-batch's counts, when a FAIL UPDATE expectation failed it."""
    with transaction.atomic():
        # One conditional update decides whether this failure starts a spell (an UPDATE
        # locks its row: no SELECT FOR UPDATE is needed before it).
        spell = MaterializedTable.objects.filter(pk=mt.pk).exclude(stream_status="FAILED")
        if not spell.update(stream_status="FAILED", stream_error=error[:2000]):
            MaterializedTable.objects.filter(pk=mt.pk).update(stream_error=error[:2000])
            return None
        now = timezone.now()
        run = RefreshRun.objects.create(
            materialized_table=mt,
            table_name=str(mt.table),
            trigger=RefreshRun.Trigger.CONTINUOUS,
            action=RefreshRun.Action.INCREMENTAL,
            state=RefreshRun.State.FAILED,
            queued_at=now,
            started_at=now,
            finished_at=now,
            error=error[:10_000],
            definition_version=mt.current_version,
            expectations=dict(expectations or {}),
        )
        observe_finished(run)
    return run


def observe_finished(run: RefreshRun) -> None:
    """The run counts in the app's metrics (webapp.metrics) once its end is committed, and
    its end is announced (signals.run_finished: notifications) in its transaction."""
    signals.run_finished.send(RefreshRun, run=run)
    seconds = (
        (run.finished_at - run.started_at).total_seconds()
        if run.started_at is not None and run.finished_at is not None
        else 0.0
    )
    labels = {
        "table": run.table_name,
        "trigger": run.trigger,
        "action": run.action,
        "outcome": run.state,
        "seconds": seconds,
    }
    transaction.on_commit(lambda: metrics.refresh_finished(**labels))


def _count(run: RefreshRun) -> None:
    mt = _locked(run.materialized_table)
    if run.state == RefreshRun.State.FAILED:
        mt.consecutive_failures += 1
        mt.save(update_fields=["consecutive_failures", "updated_at"])
        if (
            mt.consecutive_failures >= _failures_allowed()
            and mt.state == MaterializedTable.State.ACTIVATED
        ):
            reason = (
                f"Suspended after {mt.consecutive_failures} consecutive failed refreshes; "
                f"the last error: {run.error[:500]}"
            )
            suspend(mt, reason=reason)
    elif run.state in (RefreshRun.State.SUCCEEDED, RefreshRun.State.SKIPPED):
        if mt.consecutive_failures:
            mt.consecutive_failures = 0
            mt.save(update_fields=["consecutive_failures", "updated_at"])


def fail_abandoned(*, silent_for: timedelta) -> int:
    """Fail the RUNNING runs whose worker has not said it is alive for `silent_for` (it was
    killed); their tables stay at their last good snapshot, since a run commits once."""
    cutoff = timezone.now() - silent_for
    abandoned = RefreshRun.objects.filter(state=RefreshRun.State.RUNNING, heartbeat_at__lt=cutoff)
    count = 0
    for run in abandoned:
        if run.trigger == RefreshRun.Trigger.REBUILD:
            _settle_abandoned_rebuild(run)
            count += 1
            continue
        finish(
            run,
            state=RefreshRun.State.FAILED,
            error=f"The worker {run.worker or '?'} stopped (no heartbeat since "
            f"{run.heartbeat_at:%Y-%m-%d %H:%M:%S} UTC)",
        )
        count += 1
    return count


def resend_stranded(*, queued_for: timedelta) -> int:
    """Send the QUEUED runs no worker took for `queued_for` to a worker again; returns how
    many. A message a worker held (a run waiting for a free thread is sent again with a
    countdown, and the worker keeps that message until then) goes down with the worker
    when it is SIGKILLed, and Redis gives it back only after its visibility timeout, an
    hour: the run would say QUEUED all that time. Sending one again is safe, since a run
    is claimed once (`claim`): whichever message comes second finds it taken. Each run is
    sent again at most once per `queued_for` (a key in Redis), so a long queue behind busy
    workers is not flooded. Continuous tables' runs by hand wait for the streaming
    process, not for a worker, and are left alone."""
    stranded = RefreshRun.objects.filter(
        state=RefreshRun.State.QUEUED, queued_at__lt=timezone.now() - queued_for
    ).exclude(materialized_table__refresh_mode=RefreshMode.CONTINUOUS)
    sent = 0
    for run in stranded.only("pk"):
        if _first_resend(run.pk, seconds=queued_for.total_seconds()):
            logger.warning("Refresh run %s queued for over %s: sent again", run.pk, queued_for)
            dispatch(run)
            sent += 1
    return sent


def _first_resend(run_id: int, *, seconds: float) -> bool:
    """Whether this is the first resend of run `run_id` in `seconds` (a Redis key that
    expires); False when Redis cannot be reached (nor could the message be sent)."""
    import redis

    try:
        key = f"lakeview:resent-run:{run_id}"
        return bool(redis_client().set(key, "1", nx=True, ex=max(1, int(seconds))))
    except redis.RedisError:
        return False


def fold_skipped_runs(
    *, now: datetime | None = None, older_than: timedelta | None = None, periodic: bool = False
) -> int:
    """Fold the scheduled ticks skipped as NO_DATA (no source changed) that finished more
    than `older_than` ago (HISTORY_FOLD_SKIPPED_RUNS_AFTER_SECONDS) into one run per table
    and hour, as the streaming process folds micro-batches (refresh.streams.compact_history):
    the newest tick's run stays, with `batches` the ticks it stands for and its queued and
    start times the first tick's; its schedule time, reason, source snapshots and data
    timestamp (what lag is measured from) are the newest tick's. An idle table at one
    minute would otherwise keep 1,440 rows a day. Manual refreshes, failures and runs
    that did something are never folded. `periodic` (celery-beat's pass) reads only what
    the previous pass left (catalog.history.fold_per_hour). Returns how many runs were
    folded away."""
    if older_than is None:
        older_than = timedelta(seconds=settings.HISTORY_FOLD_SKIPPED_RUNS_AFTER_SECONDS)
    skipped = RefreshRun.objects.filter(
        trigger=RefreshRun.Trigger.SCHEDULED,
        state=RefreshRun.State.SKIPPED,
        action=RefreshRun.Action.NO_DATA,
    )
    return history.fold_per_hour(
        skipped,
        at="finished_at",
        before=(now or timezone.now()) - older_than,
        keys=("materialized_table_id", "table_name"),
        count="batches",
        earliest={"queued_at": ("queued_at",), "started_at": ("started_at",)},
        resume="NO_DATA ticks" if periodic else None,
    )


def _settle_abandoned_rebuild(run: RefreshRun) -> None:
    """A rebuild whose worker died: if its commit landed (the table's properties name its
    version), the version is current; otherwise nothing changed and the change failed."""
    mt = run.materialized_table
    if mt is None:
        fail_rebuild(run, error="The materialized table was dropped")
        return
    mt.table.refresh_from_db()
    committed = mt.table.properties.get(defs.VERSION_PROPERTY)
    if committed == str(run.definition_version) and mt.current_version != run.definition_version:
        apply_rebuild(run)
        return
    fail_rebuild(
        run,
        error=f"The worker {run.worker or '?'} stopped (no heartbeat since "
        f"{run.heartbeat_at:%Y-%m-%d %H:%M:%S} UTC) before the rebuild committed",
    )

"""A materialized table's definition versions: ALTER ... AS and rollbacks checked as CREATE
checks them (sources, Spark's schema, Flink's rules, the expectations), then written as a
version and a PENDING log entry with a rebuild run, which the table's writer runs
(`rebuild_of` says what it builds, `rebuild_plan` how a worker's run builds it) and which
ends in refresh.runs (apply_rebuild: the version becomes current; fail_rebuild: nothing
changed)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from django.db import transaction

from catalog.core.errors import InvalidInput, NoSuchVersion, SqlError, Unavailable
from refresh import analysis, rights, runs, table_state
from refresh.core import definition as defs
from refresh.core import expectations as ex
from refresh.core.columns import ColumnDefinition, check_declared
from refresh.core.freshness import RefreshMode
from refresh.core.incremental import full
from refresh.core.plan import RefreshPlan
from refresh.models import (
    MaterializedTable,
    MaterializedTableVersion,
    MaterializedTableVersionLogEntry,
    RefreshRun,
)
from refresh.sources import (
    check_streamable,
    parsed_or_none,
    query_sources,
    resolve_sources,
    source_snapshots,
)
from refresh.spark.schema import iceberg_schema


def new_version(
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
        created_by=table_state.user_of(actor),
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
    defs.check_against_schema(
        dataclasses.replace(table_state.definition_of(mt), query=query), schema
    )


def rollback_definition(mt: MaterializedTable, *, version_id: int, actor: Any = None) -> RefreshRun:
    """Make an earlier definition current again, by a rebuild as ALTER ... AS does."""
    refuse_while_pending(mt, "change its definition")
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


def refuse_while_pending(mt: MaterializedTable, what: str) -> None:
    pending = pending_change(mt)
    if pending is not None:
        raise table_state.InvalidState(
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
    refuse_while_pending(mt, "change its definition")
    own = (table.namespace.name, table.name)
    sources = resolve_sources(query, namespace=namespace, own=own, actor=actor)
    definition = dataclasses.replace(table_state.definition_of(mt), query=query)
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
        mt = table_state.locked(mt)
        refuse_while_pending(mt, "change its definition")
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
                created_by=table_state.user_of(actor),
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
            requested_by=table_state.user_of(actor),
        )
        MaterializedTableVersionLogEntry.objects.create(
            materialized_table=mt,
            version_id=version_id,
            operation=operation,
            actor=table_state.user_of(actor),
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
        table_state.record(
            mt,
            actor=actor,
            action=f"{operation}_materialized_table_definition",
            message=f"version {version_id} asked for; rebuilt by run {run.pk}"
            + (f" ({changes})" if changes else ""),
        )
    if mt.refresh_mode != RefreshMode.CONTINUOUS:
        # CONTINUOUS: the streaming process stops the table's query, rebuilds, restarts.
        try:
            runs.dispatch(run)
        except Unavailable as error:
            runs.fail_rebuild(run, error=error.message)
            raise
    return run


def rebuild_of(run: RefreshRun) -> tuple[defs.Definition, dict[str, str]]:
    """What a rebuild run builds: the definition of its version, and the table properties
    its commit sets (the definition, the state, the version)."""
    mt = run.materialized_table
    version = mt.versions.get(version_id=run.definition_version)
    definition = dataclasses.replace(
        table_state.definition_of(mt),
        query=version.query,
        default_namespace=version.default_namespace,
    )
    properties = defs.table_properties(definition, state=mt.state, version=version.version_id)
    return definition, properties


def rebuild_plan(run: RefreshRun) -> RefreshPlan:
    """A rebuild run's plan (refresh.core.plan): its version's definition and query, parsed
    once, every source table at its current snapshot (read at those, and recorded), and the
    table properties its commit sets. A rebuild always recomputes."""
    definition, properties = rebuild_of(run)
    version = run.materialized_table.versions.get(version_id=run.definition_version)
    parsed = parsed_or_none(definition.query)
    snapshots, _ = source_snapshots(
        query_sources(
            parsed if parsed is not None else definition.query, definition.default_namespace
        )
    )
    return RefreshPlan(
        version=run.definition_version,
        query=definition.query,
        namespace=definition.default_namespace,
        parsed=parsed,
        snapshots=snapshots,
        decision=full(f"version {run.definition_version} replaces the table"),
        expectations=ex.from_json(version.expectations),
        rebuild=definition,
        properties=properties,
        policies=tuple(rights.owner_policies(run.materialized_table)),
    )

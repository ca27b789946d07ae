"""A materialized table's row and its Iceberg table, kept in step: the row locked for a
change, the definition it holds, that definition and the state committed into the table's
properties (or a schema into its schema: what REPLACE TABLE cannot carry), SUSPEND (asked
for, or after repeated failed runs), and the change recorded in the catalog's history. The
table's lifecycle (refresh.services, refresh.definitions) and the run's (refresh.runs)
both write through these."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction

from catalog import history
from catalog import services as catalog_services
from catalog.core.errors import CommitConflict
from refresh import schedules
from refresh.core import definition as defs
from refresh.core.freshness import RefreshMode
from refresh.models import MaterializedTable


class InvalidState(CommitConflict):
    """The table's state forbids the operation (Flink's lifecycle rules); HTTP 409."""


def threshold() -> timedelta:
    return timedelta(seconds=settings.MT_FRESHNESS_THRESHOLD_SECONDS)


def locked(mt: MaterializedTable) -> MaterializedTable:
    return (
        MaterializedTable.objects.select_for_update(of=("self",))
        .select_related("table__namespace", "periodic_task")
        .get(pk=mt.pk)
    )


def record(mt: MaterializedTable, *, actor: Any, action: str, message: str = "") -> None:
    history.record_change(mt.table, actor=actor, action=action, message=message)


def definition_of(mt: MaterializedTable) -> defs.Definition:
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


def commit_properties(mt: MaterializedTable, *, actor: Any, removals: Sequence[str] = ()) -> None:
    """Write the definition and state into the table's properties (one catalog commit)."""
    updates: list[dict[str, Any]] = [
        {
            "action": "set-properties",
            "updates": defs.table_properties(
                definition_of(mt), state=mt.state, version=mt.current_version
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


def suspend(mt: MaterializedTable, *, actor: Any = None, reason: str = "") -> MaterializedTable:
    with transaction.atomic():
        mt = locked(mt)
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
        record(mt, actor=actor, action="suspend_materialized_table", message=reason)
        commit_properties(mt, actor=actor)
    return mt


def commit_schema(mt: MaterializedTable, metadata: Any, schema: dict, *, actor: Any) -> None:
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


def user_of(actor: Any) -> Any:
    return actor if getattr(actor, "pk", None) else None


def set_identifier_fields(
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
        commit_schema(mt, metadata, schema, actor=actor)

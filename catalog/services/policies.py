"""Row filters and column masks: set (replacing the one there was) and drop, one
transaction each, each recorded in the table's history (a CatalogEvent, which the audit
lists under object changes).

Who may: a table's policies are its managers' (`manage` on it; its owner holds it). A table
the actor may not see answers as a missing one; one it sees without manage is a 403. The
expression is checked against the table's current schema (catalog.core.policies), the
exempt groups must exist, and a mask's column must be one of the table's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.contrib.auth.models import Group
from django.db import transaction
from django.utils import timezone

from catalog import access, access_events, history, selectors
from catalog.core import policies as core
from catalog.core.access import MANAGE, READ_METADATA
from catalog.core.errors import Forbidden, InvalidInput, NotFound
from catalog.models import CatalogObject, ColumnMask, RowFilter, Table

SET_ROW_FILTER, DROP_ROW_FILTER = "set_row_filter", "drop_row_filter"
SET_COLUMN_MASK, DROP_COLUMN_MASK = "set_column_mask", "drop_column_mask"
#: Every action a policy's change records (catalog.audit lists them as object changes).
ACTIONS = (SET_ROW_FILTER, DROP_ROW_FILTER, SET_COLUMN_MASK, DROP_COLUMN_MASK)


def _managed_table(namespace: str, name: str, actor: Any) -> Table:
    """The table, once the actor may manage it: missing when it may not see it (or it is
    no table), a 403 when it sees it without manage."""
    who = access.Principal(actor)
    table = (
        Table.objects.select_related("namespace")
        .filter(namespace__name=namespace, name=name)
        .first()
    )
    if table is None:
        other = CatalogObject.objects.filter(namespace__name=namespace, name=name).first()
        if other is not None and access.may(who, READ_METADATA, access.of_object(other)):
            raise InvalidInput(
                f"{namespace}.{name} is a {other.kind}: row filters and column masks are set "
                "on tables",
                field="name",
            )
        raise selectors.no_such_table(namespace, name)
    held = who.privileges(access.of_object(table))
    if READ_METADATA not in held:
        raise access_events.hidden(selectors.no_such_table(namespace, name))
    if MANAGE not in held:
        user = getattr(actor, "username", "?")
        raise Forbidden(f"Forbidden: {user} lacks the manage privilege on table {table}")
    return table


def _columns(table: Table) -> dict[str, str]:
    return dict(table.schema_fields().values_list("name", "type"))


def _groups(names: Sequence[str]) -> list[Group]:
    if isinstance(names, str):
        names = [names]
    wanted = sorted({str(name).strip() for name in names if str(name).strip()})
    found = {group.name: group for group in Group.objects.filter(name__in=wanted)}
    missing = [name for name in wanted if name not in found]
    if missing:
        raise InvalidInput(
            f"No group named {', '.join(repr(n) for n in missing)}", field="exempt_groups"
        )
    return [found[name] for name in wanted]


def _column(table: Table, columns: dict[str, str], column: str) -> str:
    if column in columns:
        return column
    by_case = [name for name in columns if name.lower() == str(column).lower()]
    if len(by_case) == 1:
        return by_case[0]
    raise InvalidInput(f"Table {table} has no column {column!r}", field="column")


def _summary(expression: str, groups: list[Group]) -> str:
    exempt = ", ".join(group.name for group in groups) or "none"
    return f"{expression} (exempt groups: {exempt})"


def _save(policy: RowFilter | ColumnMask, groups: list[Group], actor: Any) -> None:
    user = actor if getattr(actor, "pk", None) else None
    now = timezone.now()
    if policy.pk is None:
        policy.created_at, policy.created_by = now, user
    policy.updated_at, policy.updated_by = now, user
    policy.save()
    policy.exempt_groups.set(groups)


def _recorded(table: Table, actor: Any, action: str) -> Any:
    return history.failures_recorded(
        actor=actor,
        action=action,
        object_type=table.kind,
        object_name=str(table),
        object_uuid=table.uuid,
    )


def set_row_filter(
    *,
    namespace: str,
    name: str,
    expression: str,
    exempt_groups: Sequence[str] = (),
    actor: Any,
) -> RowFilter:
    """Set the table's row filter (replacing the one there was)."""
    table = _managed_table(namespace, name, actor)
    with _recorded(table, actor, SET_ROW_FILTER):
        kept = core.check_expression(expression, columns=_columns(table), kind=core.ROW_FILTER)
        groups = _groups(exempt_groups)
        with transaction.atomic():
            policy = RowFilter.objects.select_for_update().filter(table=table).first()
            policy = policy or RowFilter(table=table)
            policy.expression = kept
            _save(policy, groups, actor)
            history.record_change(
                table, actor=actor, action=SET_ROW_FILTER, message=_summary(kept, groups)
            )
    return policy


def drop_row_filter(*, namespace: str, name: str, actor: Any) -> None:
    """Remove the table's row filter; NotFound when it has none."""
    table = _managed_table(namespace, name, actor)
    with _recorded(table, actor, DROP_ROW_FILTER), transaction.atomic():
        deleted, _ = RowFilter.objects.filter(table=table).delete()
        if not deleted:
            raise NotFound(f"Table {table} has no row filter", field="name")
        history.record_change(table, actor=actor, action=DROP_ROW_FILTER)


def set_column_mask(
    *,
    namespace: str,
    name: str,
    column: str,
    expression: str,
    exempt_groups: Sequence[str] = (),
    actor: Any,
) -> ColumnMask:
    """Set the mask of one of the table's columns (replacing the one there was)."""
    table = _managed_table(namespace, name, actor)
    with _recorded(table, actor, SET_COLUMN_MASK):
        columns = _columns(table)
        column = _column(table, columns, column)
        kept = core.check_expression(expression, columns=columns, kind=core.MASK, column=column)
        groups = _groups(exempt_groups)
        with transaction.atomic():
            policy = ColumnMask.objects.select_for_update().filter(table=table, column=column)
            policy = policy.first() or ColumnMask(table=table, column=column)
            policy.expression = kept
            _save(policy, groups, actor)
            history.record_change(
                table,
                actor=actor,
                action=SET_COLUMN_MASK,
                message=f"{column}: {_summary(kept, groups)}",
            )
    return policy


def drop_column_mask(*, namespace: str, name: str, column: str, actor: Any) -> None:
    """Remove a column's mask; NotFound when the column has none."""
    table = _managed_table(namespace, name, actor)
    with _recorded(table, actor, DROP_COLUMN_MASK), transaction.atomic():
        masks = ColumnMask.objects.filter(table=table)
        found = masks.filter(column=column)
        if not found.exists() and masks.filter(column__iexact=column).count() == 1:
            found = masks.filter(column__iexact=column)  # as set_column_mask matches it
        deleted, _ = found.delete()
        if not deleted:
            raise NotFound(f"Column {column!r} of table {table} has no mask", field="column")
        history.record_change(table, actor=actor, action=DROP_COLUMN_MASK, message=column)

"""Row filters and column masks in the console (the page, POST /api/statements/ and
apply_sql alike): the table a statement names resolved as the console's other statements
resolve names, then `catalog.services.policies` called, which checks (`manage` on the
table, the expression against its columns), writes and records the change. Nothing here
decides who may do what. SHOW POLICIES reads the table's policies for whoever may see the
table (read_metadata; one they may not see answers as missing).

The service module is imported when a statement runs, not with this module: the console
loads without it, and tests may stand a fake in for it (`catalog.services.policies`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from django.conf import settings

from catalog import access
from catalog.core.errors import InvalidInput, SqlError
from catalog.core.inputs import check_name, check_namespace_name
from catalog.services import grants
from refresh import console_grants
from refresh.core import policy_statements as ps

#: SHOW POLICIES' columns.
COLUMNS = ["kind", "column", "expression", "exempt_groups", "set_by", "set_at"]
ROW_FILTER, MASK = "row filter", "mask"


def run(
    statement: ps.PolicyStatement,
    *,
    namespace: str | None,
    actor: Any,
    result: Any,
    planning: bool = False,
) -> Any:
    """Run one statement; `result` (a console StatementResult) gets its message and rows.
    `planning`: the message says what it would do (the caller rolls it back)."""
    ns, name = table_name(statement.name, namespace)
    label = f"{ns}.{name}"
    if isinstance(statement, ps.ShowPolicies):
        return _show(ns, name, actor=actor, result=result)
    from catalog.services import policies

    where = {"namespace": ns, "name": name, "actor": actor}
    setting = isinstance(statement, ps.SetRowFilter | ps.SetColumnMask)
    with placed(statement):
        if isinstance(statement, ps.SetRowFilter):
            policies.set_row_filter(
                expression=statement.expression, exempt_groups=statement.exempt_groups, **where
            )
        elif isinstance(statement, ps.DropRowFilter):
            policies.drop_row_filter(**where)
        elif isinstance(statement, ps.SetColumnMask):
            policies.set_column_mask(
                column=statement.column,
                expression=statement.expression,
                exempt_groups=statement.exempt_groups,
                **where,
            )
        else:
            policies.drop_column_mask(column=statement.column, **where)
    column = getattr(statement, "column", None)
    what = f"the mask of column {column}" if column is not None else "the row filter"
    exempt = getattr(statement, "exempt_groups", ())
    verb = ("Would set" if planning else "Set") if setting else (
        "Would drop" if planning else "Dropped"
    )  # fmt: skip
    result.message = f"{verb} {what} of {label}" + (
        f" (exempt: {', '.join(exempt)})" if exempt else ""
    )
    result.table = label
    return result


def plan(statement: ps.PolicyStatement, *, namespace: str | None, actor: Any) -> list[str]:
    """What the statement would do, with every check it would meet, nothing kept: it runs
    in a transaction that is rolled back. Refusals are CatalogErrors."""
    if isinstance(statement, ps.ShowPolicies):
        return ["reads only"]
    return [console_grants.rolled_back(run, statement, namespace=namespace, actor=actor)]


def table_name(name: ps.Name, namespace: str | None) -> tuple[str, str]:
    """(namespace, name) of `[catalog.]namespace[.level...].name`, or of a name alone in
    the console's namespace, every level checked as the catalog checks names."""
    parts = list(name)
    if len(parts) >= 3 and parts[0] == settings.CATALOG_NAME:
        parts = parts[1:]
    table = check_name(parts[-1], field="name")
    if len(parts) > 1:
        return check_namespace_name(parts[:-1], field="name"), table
    if not namespace:
        raise InvalidInput(
            f"No namespace for {table[:100]!r}: qualify the name (namespace.name) or choose a "
            "namespace",
            field="namespace",
        )
    return namespace, table


@contextlib.contextmanager
def placed(statement: ps.PolicyStatement) -> Iterator[None]:
    """The service's refusal of an expression (field "expression") placed where the
    expression starts in the script: a SqlError at the expression's own line and column
    is moved there, another refusal of it gets the expression's start."""
    at = getattr(statement, "expression_at", None)
    try:
        yield
    except InvalidInput as error:
        if at is None or error.field != "expression":
            raise
        line, column = at
        if isinstance(error, SqlError) and error.line is not None:
            # Its first line starts where the expression does; the next ones are the script's.
            moved = error.column + column - 1 if error.line == 1 and error.column else error.column
            raise SqlError(
                error.base_message, line=error.line + line - 1, column=moved, field=error.field
            ) from None
        raise SqlError(error.message, line=line, column=column, field=error.field) from None


# -- SHOW POLICIES -----------------------------------------------------------------------


def _show(ns: str, name: str, *, actor: Any, result: Any) -> Any:
    target = grants.find_securable(
        securable_type="object", namespace=ns, name=name, who=access.for_user(actor)
    )
    if target.obj.kind == "view":
        raise InvalidInput(
            f"{ns}.{name} is a view: row filters and masks are set on tables", field="name"
        )
    result.columns = list(COLUMNS)
    result.rows = policy_rows(target.obj)
    result.table = f"{ns}.{name}"
    count = len(result.rows)
    result.message = f"{count} polic{'y' if count == 1 else 'ies'} on {ns}.{name}"
    return result


def policy_rows(table: Any) -> list[list[Any]]:
    """SHOW POLICIES' rows for a table (a catalog.models.CatalogObject): its row filter,
    then its masks by column. The one place that reads the policy models."""
    from catalog.models import ColumnMask, RowFilter

    found: list[tuple[str, str, Any]] = [
        (ROW_FILTER, "", policy)
        for policy in RowFilter.objects.filter(table=table).select_related("updated_by")
    ]
    masks = ColumnMask.objects.filter(table=table).select_related("updated_by")
    found += [(MASK, mask.column, mask) for mask in masks.order_by("column")]
    return [
        [
            kind,
            column,
            policy.expression,
            ", ".join(sorted(group.name for group in policy.exempt_groups.all())),
            policy.updated_by.get_username() if policy.updated_by is not None else "",
            policy.updated_at.isoformat(timespec="seconds"),
        ]
        for kind, column, policy in found
    ]

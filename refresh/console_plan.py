"""A dry run of a console script: what each statement would do (refresh.pipelines.plan for
materialized tables and views, refresh.console_grants.plan for grants,
refresh.console_policies.plan for row filters and masks), every statement
planned even after a refusal, nothing written and no Spark asked. The console's Plan
button, `POST /api/statements/` with `plan`, and `manage.py apply_sql` use it."""

from __future__ import annotations

from typing import Any

from catalog.core.errors import CatalogError, InvalidInput, SqlError
from refresh import console, console_grants, console_policies, pipelines, table_state
from refresh.core import grant_statements
from refresh.core import policy_statements as ps
from refresh.core import statements as st


def plan(
    sql: str, *, namespace: str | None = None, actor: Any = None
) -> list[console.StatementResult]:
    """A dry run of a script: what each statement would do (refresh.pipelines.plan), every
    statement planned even after a refusal, nothing written and no Spark asked. A statement
    counts the tables the statements before it would create as there."""
    if not isinstance(sql, str) or not sql.strip():
        raise InvalidInput("Write at least one statement", field="sql")
    try:
        located = st.located_statements(sql)
    except SqlError as error:
        return [console.failed(sql.strip()[:200], 1, 1, error, refused=True)]
    if not located:
        raise InvalidInput("Write at least one statement", field="sql")
    if len(located) > console.MAX_STATEMENTS:
        raise InvalidInput(
            f"A script runs at most {console.MAX_STATEMENTS} statements; "
            f"this one has {len(located)}",
            field="sql",
        )
    planned: set[str] = set()
    return [
        plan_statement(sql, offset, padded, namespace=namespace, actor=actor, planned=planned)
        for offset, padded in located
    ]


def plan_statement(
    script: str,
    offset: int,
    padded: str,
    *,
    namespace: str | None,
    actor: Any,
    planned: set[str],
) -> console.StatementResult:
    """The plan of the statement at `offset` of `script` (`padded`: the statement with what
    precedes it blanked, as `st.located_statements` gives it), a refusal at its line and
    column in the script; `planned` is shared by the statements of one plan."""
    text = padded[offset:].strip()
    line, column = st.position(
        script, offset + (len(padded[offset:]) - len(padded[offset:].lstrip()))
    )
    try:
        statement = st.parse_statement(padded, threshold=table_state.threshold())
        console.check_viewer(actor, statement)
        if isinstance(statement, console.GRANT_STATEMENTS):
            planned_one = _plan_grant(statement, namespace, actor, planned)
        elif isinstance(statement, console.POLICY_STATEMENTS):
            planned_one = _plan_policy(statement, namespace, actor, planned)
        else:
            try:
                planned_one = pipelines.plan(
                    statement, namespace=namespace, actor=actor, planned=planned
                )
            except SqlError as error:
                query = getattr(statement, "query", None)
                if error.field != "query" or not query:
                    raise
                raise console.in_script(error, padded, query) from None
    except CatalogError as error:
        return console.failed(text, line, column, error, refused=True)
    result = console.StatementResult(text, line, column, kind=type(statement).__name__)
    result.table, result.plan = planned_one.table, planned_one.as_dict()
    shown = "; ".join(change for change in planned_one.changes if change)
    result.message = planned_one.action + (f": {shown}" if shown else "")
    return result


def _plan_grant(
    statement: Any, namespace: str | None, actor: Any, planned: set[str]
) -> pipelines.Plan:
    """A grant statement's plan: its own verb and what it would do, checked as it would be
    (console_grants.plan rolls its writes back); on a table an earlier statement of the
    plan makes, only that it comes after it."""
    verb = {
        grant_statements.GrantPrivileges: "grant",
        grant_statements.RevokePrivileges: "revoke",
    }.get(type(statement), "read")
    securable = statement.securable
    if securable is not None and securable.kind not in ("catalog", "namespace"):
        qualified = ".".join(console.resolve(securable.name, namespace))
        if qualified in planned:
            return pipelines.Plan(verb, qualified, ["after an earlier statement makes it"])
    changes = console_grants.plan(statement, namespace=namespace, actor=actor)
    return pipelines.Plan(verb, None, changes)


def _plan_policy(
    statement: ps.PolicyStatement, namespace: str | None, actor: Any, planned: set[str]
) -> pipelines.Plan:
    """A row filter's or a mask's plan, checked as it would run (console_policies.plan
    rolls its writes back); on a table an earlier statement of the plan makes, only that it
    comes after it."""
    verb = "read" if isinstance(statement, ps.ShowPolicies) else (
        "set" if isinstance(statement, ps.SetRowFilter | ps.SetColumnMask) else "drop"
    )  # fmt: skip
    qualified = ".".join(console_policies.table_name(statement.name, namespace))
    if qualified in planned:
        return pipelines.Plan(verb, qualified, ["after an earlier statement makes it"])
    changes = console_policies.plan(statement, namespace=namespace, actor=actor)
    return pipelines.Plan(verb, qualified, changes)

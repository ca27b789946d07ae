"""Expectations on a materialized table's rows: Databricks' `CONSTRAINT name EXPECT
(condition) [ON VIOLATION DROP ROW | FAIL UPDATE]`. Django-free.

A row meets an expectation when its condition is TRUE; FALSE and NULL both violate it
(Databricks: the condition "must evaluate to true or false for each record", and a record
that does not pass it triggers the expectation; NULL is not a pass, as for Delta's CHECK
constraints). Without ON VIOLATION the row is kept and counted; DROP ROW leaves it out of
the table; FAIL UPDATE aborts the refresh, nothing committed, when any row violates it.

A condition is one row-level expression over the query's output columns: no subquery (it
would read a table the refresh neither pins nor checks the owner's rights on), no
aggregate or window. It reaches Spark only inside a query that goes through the sandbox
(`flagged_query`, `kept_query`), rendered by sqlglot from its parsed form, never spliced
as written."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from catalog.core.errors import InvalidInput

DROP_ROW = "DROP ROW"
FAIL_UPDATE = "FAIL UPDATE"
ACTIONS = (DROP_ROW, FAIL_UPDATE)
#: The flag column of the expectation at index i in `flagged_query` (TRUE: the row violates
#: it); a name no query gives.
FLAG = "__lakeview_violates_{}"


@dataclass(frozen=True)
class Expectation:
    name: str
    #: The condition as written (SHOW CREATE gives it back so).
    condition: str
    #: DROP_ROW, FAIL_UPDATE, or None: the row is kept and counted.
    on_violation: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "condition": self.condition, "on_violation": self.on_violation}

    @property
    def clause(self) -> str:
        """`CONSTRAINT name EXPECT (condition) [ON VIOLATION ...]`, the name quoted."""
        name = "`" + self.name.replace("`", "``") + "`"
        text = f"CONSTRAINT {name} EXPECT ({self.condition})"
        return text + (f" ON VIOLATION {self.on_violation}" if self.on_violation else "")


def from_json(rows: Iterable[Mapping[str, Any]] | None) -> tuple[Expectation, ...]:
    return tuple(
        Expectation(row["name"], row["condition"], row.get("on_violation") or None)
        for row in rows or ()
    )


def as_json(expectations: Iterable[Expectation]) -> list[dict[str, Any]]:
    return [expectation.as_json() for expectation in expectations]


class ExpectationFailed(Exception):
    """A FAIL UPDATE expectation that some rows violate: the refresh is aborted before its
    commit."""

    def __init__(self, name: str, count: int) -> None:
        self.name, self.count = name, count
        rows = "row" if count == 1 else "rows"
        self.message = (
            f"Expectation {name!r} (ON VIOLATION FAIL UPDATE) failed: {count} {rows} violate "
            "it. The refresh was aborted and the table is unchanged"
        )
        super().__init__(self.message)


def parse_condition(text: str) -> exp.Expression:
    """The condition as sqlglot reads it in Spark's dialect; InvalidInput (its message says
    what is wrong) when it is not one row-level expression."""
    if not text.strip():
        raise InvalidInput("An expectation needs a condition", field="expectations")
    try:
        node = sqlglot.parse_one(text, read="spark")
    except (SqlglotError, RecursionError, LookupError, ValueError, TypeError, AttributeError):
        raise InvalidInput(
            "The condition does not parse as a Spark SQL expression", field="expectations"
        ) from None
    if not isinstance(node, exp.Condition):
        raise InvalidInput(
            f"The condition must be one expression, not {node.key.upper()}", field="expectations"
        )
    if node.find(exp.Query, exp.Subquery) is not None:
        raise InvalidInput(
            "A condition may not contain a subquery: it is checked on each row of the "
            "query's result",
            field="expectations",
        )
    if node.find(exp.AggFunc, exp.Window) is not None:
        raise InvalidInput(
            "A condition may not use an aggregate or window function: it is checked on each "
            "row of the query's result",
            field="expectations",
        )
    return node


def rendered(expectation: Expectation) -> str:
    """The condition as Spark SQL text, rendered from its parsed form."""
    return parse_condition(expectation.condition).sql(dialect="spark", comments=False)


def check_columns(expectations: Sequence[Expectation], columns: Sequence[str]) -> None:
    """Every column a condition names is one of the query's output columns (Spark's names
    are case-insensitive)."""
    known = {column.lower() for column in columns}
    for expectation in expectations:
        for column in parse_condition(expectation.condition).find_all(exp.Column):
            if column.table or column.name.lower() not in known:
                raise InvalidInput(
                    f"Expectation {expectation.name!r} names {column.sql(dialect='spark')}, "
                    f"which is not a column of the query's result ({', '.join(columns)})",
                    field="expectations",
                )


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def flagged_query(query: str, expectations: Sequence[Expectation]) -> str:
    """`query` with one more column per expectation (`FLAG`), TRUE where the row violates
    it (its condition is FALSE or NULL)."""
    flags = ", ".join(
        f"NOT coalesce(({rendered(e)}), false) AS {_quote(FLAG.format(i))}"
        for i, e in enumerate(expectations)
    )
    return f"SELECT __lakeview_q.*, {flags} FROM (\n{query}\n) AS __lakeview_q"


def kept_query(query: str, expectations: Sequence[Expectation]) -> str:
    """`query` without the rows a DROP ROW expectation drops: what the table holds after a
    refresh (the verifier recomputes this)."""
    dropping = [e for e in expectations if e.on_violation == DROP_ROW]
    if not dropping:
        return query
    condition = " AND ".join(f"coalesce(({rendered(e)}), false)" for e in dropping)
    return f"SELECT __lakeview_q.* FROM (\n{query}\n) AS __lakeview_q WHERE {condition}"


def first_failure(
    expectations: Sequence[Expectation], counts: Mapping[str, int]
) -> ExpectationFailed | None:
    """The error of the first FAIL UPDATE expectation some rows violate, else None."""
    for expectation in expectations:
        if expectation.on_violation == FAIL_UPDATE and counts.get(expectation.name, 0) > 0:
            return ExpectationFailed(expectation.name, counts[expectation.name])
    return None


def changed(old: Sequence[Expectation], new: Sequence[Expectation]) -> bool:
    """Whether two lists of expectations differ (conditions compared as sqlglot reads
    them: case and spacing do not make a new definition)."""
    if len(old) != len(new):
        return True
    for first, second in zip(old, new, strict=True):
        if (first.name, first.on_violation) != (second.name, second.on_violation):
            return True
        if first.condition.strip() != second.condition.strip():
            try:
                if rendered(first) != rendered(second):
                    return True
            except InvalidInput:
                return True
    return False

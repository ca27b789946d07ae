"""Row filters and column masks as the readers' engine applies them. Django-free.

A table's policies are kept by the catalog (catalog.policy_models) as SQL written by its
managers: a row filter is a boolean expression over the table's columns (a reader sees the
rows where it is TRUE), a column mask an expression that gives the value a reader sees in
place of the column's own. Both may call `current_user()` and `is_member('group')`, which
mean the reader, not the worker that runs the query; and each names the groups exempt
from it.

`TablePolicy` is what reaches Spark for one reader and one table: the policies that apply
to that reader (an exempt reader gets none), *bound*: `current_user()` and `is_member()`
already replaced by the reader's name and memberships, so that what Spark evaluates is
plain SQL over the table's columns. runtime.spark.policies puts them into the analyzed
plan below everything the reader wrote."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, SqlglotError, TokenError
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify

from catalog.core.errors import InvalidInput, SqlError
from catalog.core.spark_functions import (
    AGGREGATE_FUNCTIONS,
    ALLOWED_FUNCTIONS,
    GENERATOR_FUNCTIONS,
    WINDOW_FUNCTIONS,
)


@dataclass(frozen=True)
class TablePolicy:
    """The bound policies one reader meets on one table of the app's catalog.

    `table` is the table's identifier in the catalog: its namespace's levels, then its name.
    `row_filter` (None: every row) is Spark SQL over the table's columns; a row is seen
    where it is TRUE (FALSE and NULL hide it). `masks` pairs a column's name with the Spark
    SQL whose value the reader sees instead of the column's (cast to the column's type).
    `names` says which policies these are, for messages: e.g. "row filter of sales.orders"."""

    table: tuple[str, ...]
    row_filter: str | None = None
    masks: tuple[tuple[str, str], ...] = ()

    @property
    def label(self) -> str:
        return ".".join(self.table)

    def describe(self) -> str:
        """The policies by kind, for a refusal: "the row filter and the mask of email"."""
        parts = ["the row filter"] if self.row_filter is not None else []
        if self.masks:
            columns = ", ".join(column for column, _ in self.masks)
            parts.append(f"the mask{'s' if len(self.masks) > 1 else ''} of {columns}")
        return " and ".join(parts) + f" on {self.label}"


# -- checking and binding the SQL of a policy ------------------------------------------------

#: What a policy's SQL is called in messages, by kind.
ROW_FILTER, MASK = "row filter", "mask"
KINDS = (ROW_FILTER, MASK)
#: Longest expression accepted: a policy is typed by a person.
MAX_EXPRESSION_LENGTH = 4000

#: Functions of the sandbox's list that a policy may not call. A policy is evaluated row by
#: row inside every reader's plan: no aggregate or window function (which would see other
#: rows), no generator (which would add rows), nothing whose value differs from one
#: evaluation to the next or tells where the data lies (random values, file names,
#: partition ids), no error raised with a value in its message, and not `user()` (in
#: Spark, the worker's account, never the reader: `current_user()` means the reader).
_NOT_IN_POLICIES_NAMES = """
    range sql_keywords session_window window window_time
    rand randn random shuffle uuid monotonically_increasing_id spark_partition_id
    input_file_name input_file_block_length input_file_block_start
    raise_error assert_true user current_catalog current_database current_schema version
"""
NOT_IN_POLICIES: frozenset[str] = (
    frozenset(_NOT_IN_POLICIES_NAMES.split())
    | AGGREGATE_FUNCTIONS
    | WINDOW_FUNCTIONS
    | GENERATOR_FUNCTIONS
)
#: `is_member('group')`: whether the reader belongs to the group (bound by `bind`).
IS_MEMBER = "is_member"
POLICY_FUNCTIONS: frozenset[str] = (ALLOWED_FUNCTIONS - NOT_IN_POLICIES) | {IS_MEMBER}

#: sqlglot's nodes that are never part of a policy, with what to call them.
_REFUSED_NODES: tuple[tuple[type[exp.Expression], str], ...] = (
    (exp.Subquery, "a subquery"),
    (exp.Query, "a query"),
    (exp.Table, "a table reference"),
    (exp.Window, "a window function"),
    (exp.AggFunc, "an aggregate function"),
    (exp.Star, "*"),
    (exp.Alias, "an alias"),
    (exp.Placeholder, "a parameter"),
    (exp.Parameter, "a parameter"),
    (exp.SessionParameter, "a session variable"),
    (exp.Command, "a command"),
)
_CALLED = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _where(sql: str, node: exp.Expression) -> tuple[int | None, int | None]:
    """1-based line and column of `node`: of its first token sqlglot kept a position of,
    else of the first word it starts with (a subquery's SELECT, a call's name)."""
    start = None
    for part in node.walk():
        start = (part.meta or {}).get("start")
        if start is not None:
            break
    if start is None:
        word = _WORD.search(node.sql(dialect="spark", comments=False))
        found = re.search(rf"\b{word.group(0)}\b", sql, re.IGNORECASE) if word else None
        start = found.start() if found else None
    if start is None:
        return None, None
    before = sql[:start]
    return before.count("\n") + 1, start - (before.rfind("\n") + 1) + 1


def _refuse(message: str, sql: str, node: exp.Expression | None, field: str) -> SqlError:
    line, column = _where(sql, node) if node is not None else (None, None)
    return SqlError(message, line=line, column=column, field=field)


def _parse(sql: str, field: str) -> exp.Expression:
    """One expression of Spark SQL, else a SqlError naming where it went wrong."""
    if not isinstance(sql, str) or not sql.strip():
        raise SqlError("The expression is empty", field=field)
    if len(sql) > MAX_EXPRESSION_LENGTH:
        raise SqlError(
            f"The expression is too long ({len(sql)} characters, at most {MAX_EXPRESSION_LENGTH})",
            field=field,
        )
    if "\x00" in sql:
        raise SqlError("The expression contains a NUL character", field=field)
    try:
        parsed = [tree for tree in sqlglot.parse(sql, read="spark") if tree is not None]
    except ParseError as error:
        first = error.errors[0] if error.errors else {}
        message = (first.get("description") or "Cannot parse the expression")[:200]
        raise SqlError(
            message, line=first.get("line"), column=first.get("col"), field=field
        ) from None
    except TokenError as error:
        raise SqlError(f"Cannot read the expression: {str(error)[:200]}", field=field) from None
    except (SqlglotError, RecursionError, LookupError, ValueError, TypeError, AttributeError):
        raise SqlError("Cannot parse the expression as Spark SQL", field=field) from None
    if len(parsed) != 1:
        line = column = None
        if len(parsed) > 1 and ";" in sql:
            # Where the second statement begins: past the first semicolon and its spaces.
            after = sql.index(";") + 1
            start = after + len(sql[after:]) - len(sql[after:].lstrip())
            line = sql[:start].count("\n") + 1
            column = start - (sql[:start].rfind("\n") + 1) + 1
        raise SqlError(
            f"A policy is one expression, not {len(parsed)} statements",
            line=line,
            column=column,
            field=field,
        )
    return parsed[0]


def _function_name(node: exp.Func) -> str | None:
    """The Spark function a node calls, as Spark reads the SQL `bind` writes; None for
    syntax that calls none (AND, CASE, RLIKE, a lambda)."""
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    if isinstance(node, exp.Connector | exp.Binary | exp.Unary | exp.Case | exp.Lambda):
        return None
    called = _CALLED.match(node.sql(dialect="spark", comments=False))
    return called.group(1).lower() if called else None


def check_expression(
    sql: str, *, columns: Mapping[str, str], kind: str, column: str | None = None
) -> str:
    """The policy's SQL as it is kept (the text as written, stripped), once it is one Spark
    SQL expression over the table's `columns` (name -> type) that a policy may be: no
    subquery, table, aggregate, window or generator, only the functions of
    `POLICY_FUNCTIONS` (the sandbox's, less those above) with `current_user()` and
    `is_member('<group>')`. A row filter is boolean; a mask (of `column`) may read the
    table's other columns too. SqlError (field "expression") says what and where."""
    field = "expression"
    if kind not in KINDS:
        raise InvalidInput(f"kind must be one of {', '.join(KINDS)}", field="kind")
    tree = _parse(sql, field)
    lambdas = {
        str(variable.name).lower()
        for found in tree.find_all(exp.Lambda)
        for variable in found.expressions
    }
    known = {name.lower(): name for name in columns}
    for node in tree.walk():
        for node_type, what in _REFUSED_NODES:
            if isinstance(node, node_type):
                raise _refuse(f"A {kind} may not use {what}", sql, node, field)
        if isinstance(node, exp.Column):
            parts = [str(part.name) for part in node.parts]
            first = parts[0] if parts else ""
            if first.lower() in lambdas and len(parts) == 1:
                continue
            if first not in columns and first.lower() not in known:
                raise _refuse(f"Unknown column {first!r} in the {kind}", sql, node, field)
        elif isinstance(node, exp.Func):
            name = _function_name(node)
            if name is None or name in POLICY_FUNCTIONS:
                if name == IS_MEMBER:
                    _check_is_member(node, sql, kind, field)
                continue
            why = (
                f"is not allowed in a {kind}"
                if name in ALLOWED_FUNCTIONS
                else "is not among the functions the sandbox allows"
            )
            raise _refuse(f"The function {name}() {why}", sql, node, field)
    if kind == ROW_FILTER:
        _check_boolean(tree, sql, columns)
    elif column is not None and column not in columns:
        raise InvalidInput(f"The table has no column {column!r}", field="column")
    return sql.strip().rstrip(";").strip()


def _check_is_member(node: exp.Func, sql: str, kind: str, field: str) -> None:
    arguments = node.expressions if isinstance(node, exp.Anonymous) else []
    if len(arguments) != 1 or not (
        isinstance(arguments[0], exp.Literal) and arguments[0].is_string
    ):
        raise _refuse(
            f"is_member() in a {kind} takes one group's name, as a string literal",
            sql,
            node,
            field,
        )


def _check_boolean(tree: exp.Expression, sql: str, columns: Mapping[str, str]) -> None:
    """A row filter's value must be a boolean: refused when sqlglot can tell it is not
    (typed as a query over a made-up table with the table's columns)."""
    schema = {}
    for name, kind in columns.items():
        try:
            schema[name] = exp.DataType.build(str(kind), dialect="spark").sql(dialect="spark")
        except (SqlglotError, ValueError, TypeError):
            continue  # an Iceberg type sqlglot does not know (fixed[16]): left untyped
    query = exp.select(tree.copy().as_("v")).from_("t")
    try:
        typed = qualify(
            query, schema={"t": schema}, dialect="spark", validate_qualify_columns=False
        )
        data_type = annotate_types(typed, schema={"t": schema}, dialect="spark").selects[0].type
    except Exception:  # noqa: BLE001 - typing is a courtesy; Spark decides at the read
        return
    if data_type is None or data_type.this in (
        exp.DataType.Type.UNKNOWN,
        exp.DataType.Type.NULL,
        exp.DataType.Type.BOOLEAN,
    ):
        return
    shown = data_type.sql(dialect="spark").lower()
    raise _refuse(f"A row filter is a boolean expression, not {shown}", sql, tree, "expression")


def bind(sql: str, *, user: str, groups: set[str] | frozenset[str]) -> str:
    """A policy's SQL as Spark evaluates it for one reader: `current_user()` replaced by the
    reader's name (a string literal), `is_member('g')` by TRUE or FALSE, comments dropped
    (so that nothing the manager wrote can run on into the SQL around it)."""
    tree = _parse(sql, "expression")

    def replace(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.CurrentUser):
            return exp.Literal.string(user)
        if isinstance(node, exp.Anonymous) and str(node.name).lower() == IS_MEMBER:
            arguments = node.expressions
            if len(arguments) == 1 and isinstance(arguments[0], exp.Literal):
                return exp.Boolean(this=arguments[0].name in groups)
            raise SqlError("is_member() takes one group's name", field="expression")
        return node

    return tree.transform(replace).sql(dialect="spark", comments=False)

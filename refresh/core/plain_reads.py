"""Which queries are plain reads of one table, answered by the in-process reader the previews
use (catalog.core.preview) instead of Spark. Django-free.

A plain read is `SELECT * | columns FROM table [WHERE condition] [LIMIT n]`: one table named
as written (no alias, no time travel, no join, subquery, grouping, ordering, DISTINCT,
hint or sample), plain column names (no expressions, aliases, repeats or paths), and a
condition of AND, OR and parentheses over `column <op> literal` (=, <>, !=, <, <=, >, >=),
`column [NOT] IN (literals)` without NOT, and `column IS [NOT] NULL`. Anything else is not
one (`recognize` gives None) and goes to Spark, which has the last word on what SQL means.

The condition becomes the previews' row filter (pyiceberg's expression language) only when
each literal's type is the column's own kind (a whole number for int and long, a whole
number or a decimal of no more scale for a decimal, text for a string, TRUE / FALSE for a
boolean), where comparing in pyiceberg and in Spark is the same comparison: SQL's rules for
NULL (a comparison with NULL is not true) hold in both. Floating-point columns (NaN compares
differently), dates and timestamps (text is cast by Spark's rules) and every other type are
left to Spark."""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

#: Names pyiceberg's filter parser reads as words of its own.
_KEYWORDS = frozenset({"and", "or", "not", "is", "in", "null", "nan", "like", "between",
                       "true", "false", "starts_with", "not_starts_with"})  # fmt: skip
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_COMPARISONS = {exp.EQ: "=", exp.NEQ: "!=", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}
_FLIPPED = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_LONG = (-(2**63), 2**63 - 1)
_INT = (-(2**31), 2**31 - 1)

Value = int | Decimal | str | bool


@dataclass(frozen=True)
class Comparison:
    column: str
    op: str
    value: Value


@dataclass(frozen=True)
class Among:
    column: str
    values: tuple[Value, ...]


@dataclass(frozen=True)
class NullCheck:
    column: str
    is_null: bool


@dataclass(frozen=True)
class Both:
    left: Condition
    right: Condition
    word: str  # "and" or "or"


Condition = Comparison | Among | NullCheck | Both


@dataclass(frozen=True)
class PlainRead:
    #: The table's name as written: name, namespace.name or catalog.namespace.name.
    table: tuple[str, ...]
    #: The columns asked for, in order; None for `*`.
    columns: tuple[str, ...] | None
    condition: Condition | None
    limit: int | None


class _NotPlain(Exception):  # noqa: N818 - a signal inside this module
    pass


def recognize(sql: str) -> PlainRead | None:
    """The plain read `sql` is, or None (see the module)."""
    try:
        parsed = [node for node in sqlglot.parse(sql, read="spark") if node is not None]
    except (SqlglotError, RecursionError, LookupError, ValueError, TypeError, AttributeError):
        return None
    if len(parsed) != 1 or type(parsed[0]) is not exp.Select:
        return None
    try:
        return _select(parsed[0])
    except _NotPlain:
        return None


def _only(node: exp.Expression, allowed: set[str]) -> None:
    for key, value in node.args.items():
        if key not in allowed and value not in (None, False, [], ""):
            raise _NotPlain(key)


def _select(select: exp.Select) -> PlainRead:
    _only(select, {"expressions", "from", "where", "limit"})
    source = select.args["from"].this if select.args.get("from") else None
    if type(source) is not exp.Table:
        raise _NotPlain("from")
    _only(source, {"this", "db", "catalog"})
    table = tuple(
        _name(part) for part in (source.args.get("catalog"), source.args.get("db"), source.this)
        if part is not None
    )  # fmt: skip
    columns: tuple[str, ...] | None
    if len(select.expressions) == 1 and type(select.expressions[0]) is exp.Star:
        columns = None
    else:
        columns = tuple(_column(node, table) for node in select.expressions)
        if len(set(columns)) != len(columns):
            raise _NotPlain("repeated column")
    where = select.args.get("where")
    condition = _condition(where.this, table) if where is not None else None
    limit = None
    if select.args.get("limit") is not None:
        limit_node = select.args["limit"]
        _only(limit_node, {"expression"})
        value = _literal(limit_node.expression)
        if type(value) is not int or value < 0:
            raise _NotPlain("limit")
        limit = value
    return PlainRead(table, columns, condition, limit)


def _name(node: exp.Expression) -> str:
    if type(node) is not exp.Identifier or not isinstance(node.this, str):
        raise _NotPlain("name")
    return node.this


def _column(node: exp.Expression, table: tuple[str, ...]) -> str:
    if type(node) is not exp.Column:
        raise _NotPlain("not a column")
    _only(node, {"this", "table"})
    if node.args.get("table") is not None and _name(node.args["table"]) != table[-1]:
        raise _NotPlain("qualified")
    name = _name(node.this)
    if not _NAME.match(name) or name.lower() in _KEYWORDS:
        raise _NotPlain("column name")
    return name


def _condition(node: exp.Expression, table: tuple[str, ...]) -> Condition:
    kind = type(node)
    if kind is exp.Paren:
        return _condition(node.this, table)
    if kind in (exp.And, exp.Or):
        word = "and" if kind is exp.And else "or"
        return Both(_condition(node.this, table), _condition(node.expression, table), word)
    if kind in _COMPARISONS:
        op = _COMPARISONS[kind]
        if type(node.this) is exp.Column:
            return Comparison(_column(node.this, table), op, _literal(node.expression))
        if type(node.expression) is exp.Column:
            return Comparison(_column(node.expression, table), _FLIPPED[op],
                              _literal(node.this))  # fmt: skip
        raise _NotPlain("comparison")
    if kind is exp.In:
        _only(node, {"this", "expressions"})
        values = tuple(_literal(value) for value in node.expressions)
        if not values:
            raise _NotPlain("in")
        return Among(_column(node.this, table), values)
    if kind is exp.Is and type(node.expression) is exp.Null:
        return NullCheck(_column(node.this, table), True)
    if kind is exp.Not and type(node.this) is exp.Is and type(node.this.expression) is exp.Null:
        return NullCheck(_column(node.this.this, table), False)
    raise _NotPlain(kind.__name__)


def _literal(node: exp.Expression) -> Value:
    negative = False
    if type(node) is exp.Neg:
        negative, node = True, node.this
    if type(node) is exp.Boolean and not negative:
        return bool(node.this)
    if type(node) is not exp.Literal:
        raise _NotPlain("not a literal")
    text = node.this
    if node.is_string:
        # Spark reads backslash escapes in a literal; pyiceberg's filter does not.
        if negative or not isinstance(text, str) or any(c in text for c in "\\\n\r\x00"):
            raise _NotPlain("string")
        return text
    if re.fullmatch(r"[0-9]+", text):
        value = int(text)
        value = -value if negative else value
        if not _LONG[0] <= value <= _LONG[1]:
            raise _NotPlain("out of range")
        return value
    if re.fullmatch(r"[0-9]*\.[0-9]+|[0-9]+\.[0-9]*", text):
        try:
            value = Decimal(text)
        except InvalidOperation:
            raise _NotPlain("number") from None
        return -value if negative else value
    raise _NotPlain("number")  # exponents, suffixes (1L, 1D, 1BD): Spark's own types


# -- the row filter ---------------------------------------------------------------------------


def row_filter(condition: Condition, types: dict[str, str]) -> str | None:
    """`condition` in pyiceberg's filter language, when each of its columns is in `types`
    (name -> Iceberg type, as pyiceberg prints it) and each literal fits its column's type
    as the module says; else None."""
    try:
        return _render(condition, types)
    except _NotPlain:
        return None


def _render(condition: Condition, types: dict[str, str]) -> str:
    if isinstance(condition, Both):
        return f"({_render(condition.left, types)}) {condition.word} " + (
            f"({_render(condition.right, types)})"
        )
    kind = types.get(condition.column)
    if kind is None:
        raise _NotPlain("unknown column")
    if isinstance(condition, NullCheck):
        return f"{condition.column} is {'null' if condition.is_null else 'not null'}"
    if isinstance(condition, Among):
        values = ", ".join(_value(value, kind) for value in condition.values)
        return f"{condition.column} in ({values})"
    if kind == "boolean" and condition.op not in ("=", "!="):
        raise _NotPlain("an ordering of booleans")
    return f"{condition.column} {condition.op} {_value(condition.value, kind)}"


def _value(value: Value, kind: str) -> str:
    if kind in ("int", "long"):
        bounds = _INT if kind == "int" else _LONG
        if type(value) is not int or not bounds[0] <= value <= bounds[1]:
            raise _NotPlain("not a whole number")
        return str(value)
    if kind.startswith("decimal("):
        precision, scale = (int(part) for part in kind[8:-1].split(","))
        if type(value) is int:
            value = Decimal(value)
        if type(value) is not Decimal:
            raise _NotPlain("not a number")
        exponent = value.as_tuple().exponent
        if not isinstance(exponent, int) or -exponent > scale:
            raise _NotPlain("more scale than the column")
        integral = len(str(abs(int(value)))) if abs(value) >= 1 else 0
        if integral > precision - scale:
            raise _NotPlain("more digits than the column")  # Spark widens; pyiceberg cannot
        # pyiceberg takes a decimal literal of the column's own scale only (exactly so).
        return format(value.quantize(Decimal(1).scaleb(-scale)), "f") if scale else str(value)
    if kind == "string":
        if type(value) is not str:
            raise _NotPlain("not text")
        return "'" + value.replace("'", "''") + "'"
    if kind == "boolean":
        if type(value) is not bool:
            raise _NotPlain("not a boolean")
        return "true" if value else "false"
    raise _NotPlain(f"a {kind} column")


#: Iceberg's primitive types and the names Spark gives them.
SPARK_TYPES = {
    "boolean": "boolean",
    "int": "int",
    "long": "bigint",
    "float": "float",
    "double": "double",
    "date": "date",
    "timestamp": "timestamp_ntz",
    "timestamptz": "timestamp",
    "string": "string",
    "binary": "binary",
}


def spark_type(iceberg_type: str) -> str | None:
    """Spark's name of an Iceberg primitive type (None: one a plain read leaves to Spark)."""
    if iceberg_type.startswith("decimal("):
        return iceberg_type.replace(" ", "")
    return SPARK_TYPES.get(iceberg_type)

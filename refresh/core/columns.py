"""A materialized table's declared schema (FLIP-550: column names, types, comments and NOT NULL
in CREATE) checked against the schema Spark derives from its query, and Iceberg types
written back as Spark SQL types for SHOW CREATE MATERIALIZED TABLE.

Types are compared in Iceberg's terms: a declared type is read by sqlglot (Spark's dialect)
and mapped to the Iceberg type Spark would give such a column (INTEGER and INT are `int`,
VARCHAR and STRING are `string`, TIMESTAMP is `timestamptz` as Spark 3.5 means it). A type
written by `render_type` reads back as the same Iceberg type, so SHOW CREATE's output
declares exactly the table's schema. The refusals are Flink's words
(`MergeTableAsUtil`, `SqlCreateMaterializedTableConverter`). Django-free."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import SqlglotError, TokenError
from sqlglot.tokens import TokenType

from catalog.core.errors import InvalidInput
from catalog.core.types import (
    DECIMAL_TYPE,
    FIXED_TYPE,
    TO_ICEBERG,
    decimal_parameters,
    sqlglot_type_from_iceberg,
)

_T = exp.DataType.Type

#: sqlglot's Spark types -> the Iceberg primitive Spark writes for such a column: the
#: catalog's map for views, but for TIMESTAMP, and without TIME and UUID (Spark 3.5 has
#: neither type, so declaring one is refused as a type no query gives).
_PRIMITIVES: dict[exp.DataType.Type, str] = {
    **{kind: iceberg for kind, iceberg in TO_ICEBERG.items() if kind not in (_T.TIME, _T.UUID)},
    # Spark 3.5's TIMESTAMP is with the session's time zone: Iceberg's timestamptz (a view's
    # TIMESTAMP column is `timestamp`). sqlglot's Spark reader gives TIMESTAMPTZ for it
    # today; this keeps the meaning should a TIMESTAMP come through as sqlglot's own.
    _T.TIMESTAMP: "timestamptz",
}

#: The Iceberg primitives Spark 3.5 has a type for (it has no TIME nor nanosecond timestamps).
_SPARK_PRIMITIVES = (
    "boolean",
    "int",
    "long",
    "float",
    "double",
    "date",
    "timestamptz",
    "timestamp",
    "string",
    "uuid",
    "binary",
)
#: Iceberg primitives -> Spark SQL, as SHOW CREATE writes them: Spark's text for the type
#: the catalog reads each as (catalog.core.types), so that the two agree by construction.
_RENDERED: dict[str, str] = {
    name: exp.DataType.build(sqlglot_type_from_iceberg(name)).sql(dialect="spark")
    for name in _SPARK_PRIMITIVES
}


@dataclass(frozen=True)
class ColumnDefinition:
    """One column of a CREATE's schema part."""

    name: str
    #: The type as written, or None in a list of column names only.
    type: str | None = None
    not_null: bool = False
    comment: str | None = None


def quote_name(name: str) -> str:
    """`name` in backticks, a backtick inside doubled (Spark's and Flink's quoting)."""
    return "`" + name.replace("`", "``") + "`"


def quote_string(text: str) -> str:
    """A Spark string literal that reads back as `text` (backslash escapes)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


# -- types ---------------------------------------------------------------------------------


class NamesAsWritten(Spark.Tokenizer):
    """Spark's tokenizer with quoted names read as Spark reads them: as written, but for a
    doubled quote, which stands for one. sqlglot's Spark tokenizer also turns backslash
    sequences into what they mean in a string literal: `a\\rb` became a name with a
    carriage return, and SHOW CREATE's `a\\\\b` read back as a\\b."""

    def _scan_identifier(self, identifier_end: str) -> None:
        self._advance()
        text = ""
        while True:
            if self._char == identifier_end:
                if self._peek != identifier_end:
                    break
                if self._current + 1 >= self.size:  # a doubled quote ends the text
                    raise TokenError(f"Missing {identifier_end} from {self._line}:{self._start}")
                text += identifier_end
                self._advance(2)
                continue
            if self._end:
                raise TokenError(f"Missing {identifier_end} from {self._line}:{self._start}")
            text += self._char
            self._advance()
        self._add(TokenType.IDENTIFIER, text)


class _SparkTypes(Spark):
    """Spark's dialect reading struct field names in a type as written."""

    class Tokenizer(NamesAsWritten):
        pass


_TYPES_DIALECT = _SparkTypes()


def declared_type(text: str) -> object:
    """The canonical Iceberg form (see `canonical`) of a type as written in a CREATE, or
    InvalidInput naming it."""
    # sqlglot's parser reads the text as one type, all of it (DataType.build would ignore
    # what follows a type); the text is only read, never put into SQL.
    try:
        data_type = sqlglot.parse_one(text, read=_TYPES_DIALECT, into=exp.DataType)
    except (SqlglotError, ValueError, TypeError, AttributeError, RecursionError):
        raise InvalidInput(f"Unknown type {text!r}", field="columns") from None
    if not isinstance(data_type, exp.DataType):
        raise InvalidInput(f"Unknown type {text!r}", field="columns")
    return _from_sqlglot(data_type, text)


def _from_sqlglot(data_type: exp.DataType, text: str) -> object:
    kind = data_type.this
    if kind == _T.DECIMAL:
        params = [p.this.name for p in data_type.expressions if isinstance(p, exp.DataTypeParam)]
        if not params:
            return "decimal(10, 0)"  # Spark's DECIMAL
        precision, scale = decimal_parameters(params, written=text, field="columns")
        return f"decimal({precision}, {scale})"
    if kind in _PRIMITIVES:
        return _PRIMITIVES[kind]
    if kind == _T.ARRAY and len(data_type.expressions) == 1:
        return ("list", _from_sqlglot(data_type.expressions[0], text))
    if kind == _T.MAP and len(data_type.expressions) == 2:
        key, value = data_type.expressions
        return ("map", _from_sqlglot(key, text), _from_sqlglot(value, text))
    if kind == _T.STRUCT:
        fields = []
        for member in data_type.expressions:
            if not isinstance(member, exp.ColumnDef) or not isinstance(member.kind, exp.DataType):
                break
            fields.append((member.name, _from_sqlglot(member.kind, text)))
        else:
            return ("struct", tuple(fields))
    raise InvalidInput(
        f"Type {text!r} is not one a Spark query gives a column of a materialized table",
        field="columns",
    )


def canonical(iceberg_type: object) -> object:
    """An Iceberg type (REST JSON) without field ids or nested nullability: what a declared
    type is compared with."""
    if isinstance(iceberg_type, str):
        text = iceberg_type.strip().lower()
        match = DECIMAL_TYPE.match(text)
        if match:
            return f"decimal({int(match[1])}, {int(match[2])})"
        return "binary" if FIXED_TYPE.match(text) else text
    if not isinstance(iceberg_type, Mapping):
        return iceberg_type
    kind = iceberg_type.get("type")
    if kind == "list":
        return ("list", canonical(iceberg_type["element"]))
    if kind == "map":
        return ("map", canonical(iceberg_type["key"]), canonical(iceberg_type["value"]))
    return (
        "struct",
        tuple((f["name"], canonical(f["type"])) for f in iceberg_type.get("fields", [])),
    )


def render_type(iceberg_type: object) -> str:
    """An Iceberg type (REST JSON) as Spark SQL: `declared_type` reads it back as the same
    canonical type."""
    if isinstance(iceberg_type, str):
        text = iceberg_type.strip().lower()
        match = DECIMAL_TYPE.match(text)
        if match:
            return f"DECIMAL({int(match[1])}, {int(match[2])})"
        if FIXED_TYPE.match(text):
            return "BINARY"
        if text not in _RENDERED:
            raise InvalidInput(f"Iceberg type {iceberg_type!r} has no Spark SQL type")
        return _RENDERED[text]
    if not isinstance(iceberg_type, Mapping):
        raise InvalidInput(f"Iceberg type {iceberg_type!r} has no Spark SQL type")
    kind = iceberg_type.get("type")
    if kind == "list":
        return f"ARRAY<{render_type(iceberg_type['element'])}>"
    if kind == "map":
        return f"MAP<{render_type(iceberg_type['key'])}, {render_type(iceberg_type['value'])}>"
    members = ", ".join(
        f"{quote_name(f['name'])}: {render_type(f['type'])}" for f in iceberg_type["fields"]
    )
    return f"STRUCT<{members}>"


def shown(iceberg_type: object, required: bool) -> str:
    """A column's type as Flink's messages show it ('INT NOT NULL')."""
    return render_type(iceberg_type) + (" NOT NULL" if required else "")


# -- the schema part against the query's schema -----------------------------------------------


def check_declared(
    columns: Sequence[ColumnDefinition], schema: Mapping, *, statement: str = "CREATE"
) -> None:
    """Refuse a schema part the query's schema (Iceberg REST JSON, from Spark) does not
    satisfy, naming the column:

    - a list of names only must name the query's columns, all of them and in their order
      (Flink reorders the schema by it; here a table's columns are the query's, in order);
    - each typed column must be a column of the query, of the same type; NOT NULL declared
      over a column the query may leave null is refused; a nullable declaration over a
      non-null column is accepted (the column stays non-null, as Spark derives it).
    """
    if not columns:
        return
    fields = list(schema["fields"])
    names = [f["name"] for f in fields]
    if all(column.type is None for column in columns):
        if len(columns) != len(fields):
            raise InvalidInput(
                "The number of columns in the column list must match the number of columns "
                "in the source schema.",
                field="columns",
            )
        for index, column in enumerate(columns):
            if column.name not in names:
                raise InvalidInput(
                    f"Column '{column.name}' not found in the source schema.", field="columns"
                )
            if names[index] != column.name:
                raise InvalidInput(
                    f"Column '{column.name}' is column {names.index(column.name) + 1} of the "
                    f"query but column {index + 1} of the column list: reordering columns is "
                    "not supported, list them in the query's order.",
                    field="columns",
                )
        return
    by_name = {f["name"]: (index, f) for index, f in enumerate(fields)}
    for column in columns:
        if column.name not in by_name:
            raise InvalidInput(
                f"Failed to execute {statement} MATERIALIZED TABLE statement.\n"
                "Invalid schema. All persisted (physical and metadata) columns in the schema "
                "part need to be present in the query part.\n"
                f"However, physical column `{column.name}` could not be found in the query.",
                field="columns",
            )
        index, found = by_name[column.name]
        wanted = declared_type(column.type or "")
        required = bool(found.get("required"))
        if wanted != canonical(found["type"]) or (column.not_null and not required):
            target = (column.type or "").upper() + (" NOT NULL" if column.not_null else "")
            raise InvalidInput(
                f"Incompatible types for sink column '{column.name}' at position {index + 1}. "
                f"The source column has type '{shown(found['type'], required)}', while the "
                f"target column has type '{target}'.",
                field="columns",
            )


def with_comments(schema: Mapping, columns: Sequence[ColumnDefinition]) -> dict:
    """The schema with each declared comment as its column's doc (the others keep theirs)."""
    comments = {c.name: c.comment for c in columns if c.comment is not None}
    fields = []
    for f in schema["fields"]:
        if f["name"] in comments:
            f = {**f, "doc": comments[f["name"]]}
        fields.append(dict(f))
    return {**schema, "fields": fields}

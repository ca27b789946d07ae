"""Type names between sqlglot and Iceberg.

Iceberg types are written as the spec writes them in schemas ("long", "decimal(9,2)",
"timestamptz", ...). Only primitive types are derived for view columns: a nested result
(array, map, struct) is stored as string with a warning until nested ids are assigned."""

from __future__ import annotations

import re
from collections.abc import Sequence

from sqlglot import exp

from catalog.core.errors import InvalidInput
from catalog.core.inputs import whole_number

_T = exp.DataType.Type

#: sqlglot types -> Iceberg primitives, for view columns. refresh.core.columns derives the
#: map for materialized tables' declared columns from this one (TIMESTAMP differs there,
#: TIME and UUID are left out).
TO_ICEBERG: dict[exp.DataType.Type, str] = {
    _T.BOOLEAN: "boolean",
    _T.TINYINT: "int",
    _T.SMALLINT: "int",
    _T.INT: "int",
    _T.BIGINT: "long",
    _T.FLOAT: "float",
    _T.DOUBLE: "double",
    _T.DATE: "date",
    _T.TIME: "time",
    _T.TIMESTAMP: "timestamp",
    _T.DATETIME: "timestamp",
    _T.TIMESTAMPNTZ: "timestamp",
    _T.TIMESTAMPTZ: "timestamptz",
    _T.TIMESTAMPLTZ: "timestamptz",
    _T.VARCHAR: "string",
    _T.NVARCHAR: "string",
    _T.CHAR: "string",
    _T.NCHAR: "string",
    _T.TEXT: "string",
    _T.BINARY: "binary",
    _T.VARBINARY: "binary",
    _T.UUID: "uuid",
}

_FROM_ICEBERG: dict[str, str] = {
    "boolean": "BOOLEAN",
    "int": "INT",
    "long": "BIGINT",
    "float": "FLOAT",
    "double": "DOUBLE",
    "date": "DATE",
    "time": "TIME",
    "timestamp": "TIMESTAMPNTZ",
    "timestamptz": "TIMESTAMPTZ",
    "timestamp_ns": "TIMESTAMPNTZ",
    "timestamptz_ns": "TIMESTAMPTZ",
    "string": "TEXT",
    "uuid": "UUID",
    "binary": "BINARY",
}
#: Iceberg's parameterized primitives as type texts: decimal(P, S) and fixed[L].
DECIMAL_TYPE = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
FIXED_TYPE = re.compile(r"^fixed\[\s*(\d+)\s*\]$")


#: Iceberg's (and Spark's) largest decimal precision.
MAX_DECIMAL_PRECISION = 38


def decimal_parameters(params: Sequence[str], *, written: str, field: str) -> tuple[int, int]:
    """The precision and scale of a DECIMAL(p[, s]) as written (a missing scale is 0), or
    InvalidInput naming the type: each a plain number, 1 <= p <= 38, 0 <= s <= p. sqlglot
    reads DECIMAL(a, b), DECIMAL(1.5, 2) and 5,000-digit numbers as types; Iceberg (and
    int()) would fail on them later with an error of theirs."""
    texts = [str(param) for param in params]
    error = InvalidInput(
        f"Invalid type {written[:80]!r}: a DECIMAL's precision is a whole number from 1 to "
        f"{MAX_DECIMAL_PRECISION} and its scale one from 0 to the precision",
        field=field,
    )
    numbers = [whole_number(text, digits=3) for text in texts]
    if not 1 <= len(numbers) <= 2 or None in numbers:
        raise error
    precision, scale = numbers[0], numbers[1] if len(numbers) == 2 else 0
    if not (1 <= precision <= MAX_DECIMAL_PRECISION and 0 <= scale <= precision):
        raise error
    return precision, scale


def iceberg_type_from_sqlglot(data_type: exp.DataType | None) -> tuple[str, bool]:
    """(iceberg type, guessed): guessed is True when the type was unknown. InvalidInput
    (field "sql") for a DECIMAL no engine can hold (`decimal_parameters`)."""
    if data_type is None:
        return "string", True
    if data_type.this == _T.DECIMAL:
        params = [p.this.name for p in data_type.expressions if isinstance(p, exp.DataTypeParam)]
        if not params:
            return "decimal(38, 18)", False
        written = data_type.sql()
        precision, scale = decimal_parameters(params, written=written, field="sql")
        return f"decimal({precision}, {scale})", False
    mapped = TO_ICEBERG.get(data_type.this)
    if mapped is None:
        return "string", True
    return mapped, False


def sqlglot_type_from_iceberg(iceberg_type: str) -> str:
    """A sqlglot type text for an Iceberg primitive type; nested types become UNKNOWN."""
    text = iceberg_type.strip().lower()
    if text in _FROM_ICEBERG:
        return _FROM_ICEBERG[text]
    if match := DECIMAL_TYPE.match(text):
        return f"DECIMAL({match.group(1)}, {match.group(2)})"
    if FIXED_TYPE.match(text):
        return "BINARY"
    return "UNKNOWN"

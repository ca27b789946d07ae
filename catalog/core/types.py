"""Type names between sqlglot and Iceberg.

Iceberg types are written as the spec writes them in schemas ("long", "decimal(9,2)",
"timestamptz", ...). Only primitive types are derived for view columns: a nested result
(array, map, struct) is stored as string with a warning until nested ids are assigned."""

from __future__ import annotations

import re

from sqlglot import exp

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
_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
_FIXED = re.compile(r"^fixed\[\s*(\d+)\s*\]$")


def iceberg_type_from_sqlglot(data_type: exp.DataType | None) -> tuple[str, bool]:
    """(iceberg type, guessed): guessed is True when the type was unknown."""
    if data_type is None:
        return "string", True
    if data_type.this == _T.DECIMAL:
        params = [p.this.name for p in data_type.expressions if isinstance(p, exp.DataTypeParam)]
        precision, scale = (params + ["38", "18"])[:2] if params else ("38", "18")
        if len(params) == 1:
            scale = "0"
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
    if match := _DECIMAL.match(text):
        return f"DECIMAL({match.group(1)}, {match.group(2)})"
    if _FIXED.match(text):
        return "BINARY"
    return "UNKNOWN"

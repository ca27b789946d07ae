"""The values of rows read from a table, in two forms. `typed_rows` gives typed Python
values, for pages: ints, floats, `Decimal`, `str`, `bytes`, `uuid.UUID`,
`datetime.date`/`time`/`datetime`, timestamptz aware in UTC, structs as dicts by field
name, lists as lists, maps as dicts, or lists of (key, value) pairs when keys are not
hashable; nanosecond timestamps truncated to microseconds. `json_value` gives each the
value JSON can carry exactly: dates, times and timestamps as ISO 8601 strings (nanosecond
timestamps with all nine digits), decimals as strings in plain notation, binary and fixed
as base64, UUIDs in their canonical form, NaN and infinities as the strings "NaN",
"Infinity" and "-Infinity", map keys as strings (a non-string key as its JSON text),
integers as numbers. Previews, console query results and Spark's previews all give their
rows this way. Django-free."""

from __future__ import annotations

import base64
import datetime
import json
import math
import uuid
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc


def typed_rows(table: pa.Table, limit: int) -> tuple[tuple[Any, ...], ...]:
    """The first `limit` rows of an Arrow table as typed Python values, one tuple per row
    (see the module); `json_value` makes each JSON-safe."""
    table = table.slice(0, limit)
    columns = [_typed_values(column) for column in table.columns]
    return tuple(zip(*columns, strict=True)) if columns else ((),) * table.num_rows


def _typed_values(column: pa.ChunkedArray) -> list[Any]:
    kind = column.type
    if pa.types.is_timestamp(kind) and kind.unit == "ns":
        # Python's datetime holds microseconds: the nanoseconds are in json_rows().
        nanos = pc.cast(column, pa.int64()).to_pylist()
        return [_NanoTimestamp(value, kind.tz) if value is not None else None for value in nanos]
    try:
        return column.to_pylist(maps_as_pydicts="strict")
    except (TypeError, ValueError, KeyError):
        return column.to_pylist()  # maps with unhashable keys stay lists of pairs


class _NanoTimestamp(datetime.datetime):
    """A datetime (to the microsecond) that keeps its nanoseconds for JSON."""

    nanos: int

    def __new__(cls, nanos: int, tz: str | None) -> _NanoTimestamp:
        seconds, remainder = divmod(nanos, 1_000_000_000)
        moment = datetime.datetime(1970, 1, 1) + datetime.timedelta(
            seconds=seconds, microseconds=remainder // 1000
        )
        value = super().__new__(
            cls,
            moment.year,
            moment.month,
            moment.day,
            moment.hour,
            moment.minute,
            moment.second,
            moment.microsecond,
            tzinfo=datetime.UTC if tz else None,
        )
        value.nanos = remainder
        return value

    def iso(self) -> str:
        whole = datetime.datetime(
            self.year, self.month, self.day, self.hour, self.minute, self.second, tzinfo=self.tzinfo
        ).isoformat()  # "2024-01-02T03:04:05" and, with a zone, "+00:00"
        return f"{whole[:19]}.{self.nanos:09d}{whole[19:]}"


# -- JSON ---------------------------------------------------------------------------------


def json_value(value: Any) -> Any:
    """A typed value as JSON carries it exactly (see the module)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, _NanoTimestamp):
        return value.iso()
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, Mapping):
        return {_json_key(key): json_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        if value and all(isinstance(item, tuple) and len(item) == 2 for item in value):
            # A map pyarrow left as (key, value) pairs (unhashable keys).
            return {_json_key(key): json_value(item) for key, item in value}
        return [json_value(item) for item in value]
    return str(value)


def _json_key(key: Any) -> str:
    converted = json_value(key)
    return converted if isinstance(converted, str) else json.dumps(converted, sort_keys=True)

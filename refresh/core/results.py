"""A query's kept result: its first rows within the bounds, stored as Parquet parts in a
folder of its own, read back in pages of rows, and streamed as CSV or Parquet. Django-free.

The first part holds the first `FIRST_PART_ROWS` rows alone, so that it is stored (and
readable) a moment after Spark answers, however many rows follow; the others hold up to
`PART_ROWS` rows, in row groups of `ROW_GROUP_ROWS`, so that a page reads one or two row
groups rather than a whole part. Each part is written under a temporary name and renamed
into place: a reader sees whole parts only. Parquet keeps Spark's types as they were
(decimals, timestamps, nested values) for the Parquet download; pages and CSV turn them
into text the way previews do (`catalog.core.row_values.json_value`)."""

from __future__ import annotations

import base64
import io
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from catalog.core.row_values import json_value, typed_rows

FIRST_PART_ROWS = 100
PART_ROWS = 50_000
ROW_GROUP_ROWS = 1_000

#: Why a result holds fewer rows than the query gave.
CUT_ROWS = "rows"
CUT_BYTES = "bytes"


@dataclass(frozen=True)
class Bounded:
    table: pa.Table
    #: "" (whole), CUT_ROWS or CUT_BYTES.
    cut: str


def bound(table: pa.Table, *, max_rows: int, max_bytes: int) -> Bounded:
    """The first rows of `table` within both bounds (bytes as Arrow holds them); `cut` says
    which bound left rows out."""
    cut = ""
    if table.num_rows > max_rows:
        table, cut = table.slice(0, max_rows), CUT_ROWS
    if table.nbytes > max_bytes:
        # The most rows that fit: a slice's nbytes counts its own rows only.
        low, high = 0, table.num_rows
        while low < high:
            middle = (low + high + 1) // 2
            if table.slice(0, middle).nbytes <= max_bytes:
                low = middle
            else:
                high = middle - 1
        table, cut = table.slice(0, low), CUT_BYTES
    return Bounded(table, cut)


def split(table: pa.Table) -> list[pa.Table]:
    """The parts a result is stored in: the first page alone, then PART_ROWS at a time (an
    empty result is one empty part, which keeps the columns)."""
    parts = [table.slice(0, FIRST_PART_ROWS)]
    for start in range(FIRST_PART_ROWS, table.num_rows, PART_ROWS):
        parts.append(table.slice(start, PART_ROWS))
    return parts


def part_path(folder: Path, index: int) -> Path:
    return folder / f"part-{index:05d}.parquet"


def write_part(folder: Path, index: int, table: pa.Table) -> int:
    """Store one part (whole, or not at all: a temporary name renamed into place); its
    size in bytes."""
    folder.mkdir(parents=True, exist_ok=True)
    final = part_path(folder, index)
    temporary = final.with_suffix(".tmp")
    pq.write_table(table, temporary, row_group_size=ROW_GROUP_ROWS, compression="zstd")
    os.replace(temporary, final)
    return final.stat().st_size


def read_rows(folder: Path, parts: Sequence[int], offset: int, limit: int) -> pa.Table | None:
    """Rows `offset` to `offset + limit` of the stored parts (`parts`: each one's row count,
    in order), reading only the row groups that hold them; None when none is stored."""
    if not parts:
        return None
    pieces: list[pa.Table] = []
    start = 0
    end = offset + limit
    for index, count in enumerate(parts):
        stop = start + count
        if stop > offset and start < end:
            pieces.append(_rows_of_part(part_path(folder, index), offset - start, end - start))
        start = stop
        if start >= end:
            break
    if not pieces:  # past the end: the columns, no rows
        return pq.read_schema(part_path(folder, 0)).empty_table()
    return pa.concat_tables(pieces)


def _rows_of_part(path: Path, first: int, last: int) -> pa.Table:
    """Rows [first, last) of one part (clipped to it), by row group."""
    reader = pq.ParquetFile(path)
    first = max(first, 0)
    groups, group_start, skip = [], 0, None
    for group in range(reader.num_row_groups):
        rows = reader.metadata.row_group(group).num_rows
        if group_start + rows > first and group_start < last:
            if skip is None:
                skip = first - group_start
            groups.append(group)
        group_start += rows
    if not groups:
        return reader.schema_arrow.empty_table()
    table = reader.read_row_groups(groups)
    return table.slice(skip or 0, last - first)


def _read_part(folder: Path, index: int) -> pa.Table:
    return pq.ParquetFile(part_path(folder, index)).read()


def plain_types(table: pa.Table) -> pa.Table:
    """`table` with large strings and binaries as Spark's Arrow gives them (string, binary):
    the same query keeps the same Parquet types whoever read it."""
    swaps = {pa.large_string(): pa.string(), pa.large_binary(): pa.binary()}
    if not any(field.type in swaps for field in table.schema):
        return table
    return table.cast(
        pa.schema([field.with_type(swaps.get(field.type, field.type)) for field in table.schema])
    )


def json_rows(table: pa.Table) -> list[list[Any]]:
    """Rows with JSON-safe values, as previews give them."""
    return [[json_value(value) for value in row] for row in typed_rows(table, table.num_rows)]


def column_types(table: pa.Table) -> list[str]:
    return [str(field.type) for field in table.schema]


# -- downloads ----------------------------------------------------------------------------


def csv_chunks(folder: Path, parts: Sequence[int]) -> Iterator[bytes]:
    """The result as CSV (a header, then the rows), one part at a time. Values CSV has no
    form for (nested values, binary, intervals) are written as their JSON text."""
    for index in range(len(parts)):
        table = _csv_ready(_read_part(folder, index))
        sink = io.BytesIO()
        pacsv.write_csv(table, sink, pacsv.WriteOptions(include_header=index == 0))
        yield sink.getvalue()


def _csv_ready(table: pa.Table) -> pa.Table:
    columns = []
    for column in table.columns:
        if _csv_writes(column.type):
            columns.append(column)
        else:
            columns.append(pa.array([_text(v) for v in column.to_pylist()], pa.string()))
    # Positional: columns may share a name.
    return pa.Table.from_arrays(columns, names=table.column_names)


def _csv_writes(kind: pa.DataType) -> bool:
    return (
        pa.types.is_integer(kind)
        or pa.types.is_floating(kind)
        or pa.types.is_boolean(kind)
        or pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_decimal(kind)
        or pa.types.is_date(kind)
        or pa.types.is_timestamp(kind)
        or pa.types.is_null(kind)
    )


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode("ascii")
    converted = json_value(value)
    return converted if isinstance(converted, str) else json.dumps(converted)


class _Drain:
    """A file pyarrow's ParquetWriter writes into, emptied by whoever streams it."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.position = 0
        self.closed = False

    def write(self, data: bytes) -> int:
        self.chunks.append(bytes(data))
        self.position += len(data)
        return len(data)

    def tell(self) -> int:
        return self.position

    def flush(self) -> None:
        return None

    def close(self) -> None:
        self.closed = True

    def take(self) -> bytes:
        taken, self.chunks = b"".join(self.chunks), []
        return taken


def parquet_chunks(folder: Path, parts: Sequence[int]) -> Iterator[bytes]:
    """The result as one Parquet file, written as it streams (one part in memory at a time)."""
    schema = pq.read_schema(part_path(folder, 0))
    sink = _Drain()
    writer = pq.ParquetWriter(sink, schema, compression="zstd")
    for index in range(len(parts)):
        writer.write_table(_read_part(folder, index), row_group_size=ROW_GROUP_ROWS)
        chunk = sink.take()
        if chunk:
            yield chunk
    writer.close()
    yield sink.take()

"""Reading an uploaded file (CSV, Parquet or JSON lines) as rows for an Iceberg table.

The file is read in batches with pyarrow's streaming readers (`pyarrow.csv.open_csv`,
`ParquetFile.iter_batches`, `pyarrow.json.open_json`), never whole: column types are
inferred from the file's first block (or taken from the table an append goes into), and
every batch is converted to the types the table will have. Whatever is wrong with the file
is a `BadFile` naming the row (counted from 1, a CSV header is not a row) and the column
where one is at fault: pyarrow's own messages are kept where they say it, and the row is
found by reading the failing part again where they do not."""

from __future__ import annotations

import csv as pycsv
import io
import json
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json
import pyarrow.parquet as pq
from pyiceberg.schema import Schema

from catalog.core.errors import InvalidInput

FORMATS = ("csv", "parquet", "jsonl")
#: What a file name's extension says about its format (the name is used for nothing else).
EXTENSIONS = {
    ".csv": "csv",
    ".tsv": "csv",
    ".txt": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
}
#: Bytes of a text file read at a time: the first block is what column types are inferred
#: from (and what a preview reads).
BLOCK_BYTES = 4 * 1024 * 1024
#: Rows of a Parquet file read at a time.
PARQUET_BATCH_ROWS = 64 * 1024
PREVIEW_ROWS = 20
#: Candidates for a CSV file's delimiter, chosen by which the header line holds most of.
DELIMITERS = (",", ";", "\t", "|")
_SHOWN = 60


class BadFile(InvalidInput):
    """An uploaded file that cannot become rows of the table: the message says why and,
    where one is at fault, which row (from 1; a CSV header is not a row) and column."""

    def __init__(self, message: str, *, row: int | None = None, column: str | None = None):
        where = []
        if row is not None:
            where.append(f"row {row:,}")
        if column is not None:
            where.append(f"column {column!r}")
        prefix = (", ".join(where) + ": ") if where else ""
        super().__init__(prefix[:1].upper() + prefix[1:] + message if prefix else message)
        self.field = "file"
        self.row = row
        self.column_name = column


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return repr(text if len(text) <= _SHOWN else text[:_SHOWN] + "...")


# -- which format ----------------------------------------------------------------------------


def format_for(filename: str | None, declared: str | None) -> str | None:
    """The format asked for, else the one the file name's extension says, else None (the
    content decides)."""
    if declared:
        declared = declared.strip().lower()
        if declared in ("json", "ndjson"):
            declared = "jsonl"
        if declared not in FORMATS:
            raise InvalidInput(
                f"Unknown format {declared[:40]!r}: choose csv, parquet or jsonl", field="format"
            )
        return declared
    extension = os.path.splitext((filename or "").lower())[1]
    return EXTENSIONS.get(extension)


def _looks_like(head: bytes) -> str:
    if head[:4] == b"PAR1":
        return "a Parquet file"
    if b"\x00" in head:
        return "binary data"
    text = head.lstrip(b"\xef\xbb\xbf").lstrip()
    if text[:1] == b"{":
        return "JSON lines"
    return "CSV text"


@dataclass(frozen=True)
class Upload:
    """A file on disk and how to read it."""

    path: str
    format: str
    size: int
    delimiter: str = ","


def inspect(path: str, *, format: str | None) -> Upload:
    """Check that the file is what it claims to be (or, claiming nothing, decide what it is)
    before anything reads it as rows."""
    size = os.path.getsize(path)
    if size == 0:
        raise BadFile("The file is empty")
    with open(path, "rb") as stream:
        head = stream.read(64 * 1024)
        stream.seek(max(size - 4, 0))
        tail = stream.read(4)
    looks = _looks_like(head)
    if format is None:
        format = {"a Parquet file": "parquet", "JSON lines": "jsonl"}.get(looks, "csv")
    if format == "parquet":
        if head[:4] != b"PAR1" or tail != b"PAR1":
            raise BadFile(
                f"The file is not a Parquet file (those begin and end with PAR1): it looks "
                f"like {looks}"
            )
        return Upload(path, format, size)
    if looks in ("a Parquet file", "binary data"):
        kind = "CSV" if format == "csv" else "JSON lines"
        raise BadFile(f"The file is not {kind} text: it looks like {looks}")
    text = _utf8_head(head, size)
    if format == "jsonl":
        first = text.lstrip("\ufeff").lstrip()
        if not first.startswith("{"):
            raise BadFile(
                "The file is not JSON lines (one JSON object per line): row 1 does not begin "
                "with '{'"
            )
        return Upload(path, format, size)
    if looks == "JSON lines" and _first_line_is_json(text):
        raise BadFile("The file is not CSV: it looks like JSON lines (one JSON object per line)")
    return Upload(path, "csv", size, delimiter=_delimiter(text))


def _utf8_head(head: bytes, size: int) -> str:
    try:
        return head.decode("utf-8")
    except UnicodeDecodeError as error:
        # A character cut by the end of the block read is no error.
        if len(head) < size and error.start >= len(head) - 3:
            return head[: error.start].decode("utf-8")
        raise BadFile(
            f"The file is not UTF-8 text (byte {error.start + 1:,} cannot be read); save it "
            "as UTF-8"
        ) from None


def _first_line_is_json(text: str) -> bool:
    try:
        return isinstance(json.loads(text.lstrip("\ufeff").splitlines()[0]), dict)
    except (ValueError, IndexError):
        return False


def _delimiter(text: str) -> str:
    header = text.lstrip("\ufeff").split("\n", 1)[0]
    counts = {d: header.count(d) for d in DELIMITERS}
    best = max(DELIMITERS, key=lambda d: counts[d])
    return best if counts[best] else ","


# -- column names and types --------------------------------------------------------------------


def check_columns(names: Sequence[str]) -> None:
    """Names every engine can tell apart: none empty, none twice (Spark compares names
    without case), no control characters."""
    seen: dict[str, int] = {}
    for position, name in enumerate(names, start=1):
        if not name.strip():
            raise BadFile(f"Column {position} has no name: give every column a name")
        if any(ord(c) < 32 or ord(c) == 127 for c in name):
            raise BadFile(f"Column {position}'s name {_shown(name)} has control characters")
        key = name.casefold()
        if key in seen:
            raise BadFile(
                f"Columns {seen[key]} and {position} are both named {_shown(name)} (names "
                "are compared without case): give each column its own name"
            )
        seen[key] = position


def _writable(name: str, arrow_type: pa.DataType) -> pa.DataType:
    """The Arrow type a column is written with: what Iceberg can hold (an all-empty column
    in the first rows becomes text, times in microseconds, small ints int, unsigned ones the
    next signed size)."""
    t = arrow_type
    if pa.types.is_null(t):
        return pa.string()
    if pa.types.is_dictionary(t):
        return _writable(name, t.value_type)
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_uint8(t):
        return pa.int32()
    if pa.types.is_uint16(t):
        return pa.int32()
    if pa.types.is_uint32(t) or pa.types.is_uint64(t):
        return pa.int64()
    if pa.types.is_float16(t):
        return pa.float32()
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", tz="UTC" if t.tz else None)
    if pa.types.is_date64(t):
        return pa.date32()
    if pa.types.is_time(t):
        return pa.time64("us")
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_decimal(t):
        if t.precision > 38:
            raise BadFile(f"Decimal precision {t.precision} is over Iceberg's 38", column=name)
        return pa.decimal128(t.precision, t.scale)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return pa.list_(_writable(name, t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _writable(name, f.type)) for f in t])
    if pa.types.is_map(t):
        return pa.map_(_writable(name, t.key_type), _writable(name, t.item_type))
    if (
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_boolean(t)
        or pa.types.is_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_fixed_size_binary(t)
        or pa.types.is_date32(t)
    ):
        return t
    raise BadFile(f"Its type {t} cannot be stored in an Iceberg table", column=name)


def writable_schema(schema: pa.Schema) -> pa.Schema:
    check_columns(schema.names)
    return pa.schema([pa.field(f.name, _writable(f.name, f.type)) for f in schema])


def iceberg_schema(schema: pa.Schema) -> Schema:
    """The Iceberg schema a new table gets from these Arrow columns (pyiceberg's mapping)."""
    from pyiceberg.io.pyarrow import _ConvertToIcebergWithoutIDs, visit_pyarrow
    from pyiceberg.schema import assign_fresh_schema_ids

    return assign_fresh_schema_ids(visit_pyarrow(schema, _ConvertToIcebergWithoutIDs()))


def type_name(arrow_type: pa.DataType) -> str:
    """A column type in Iceberg's words (long, decimal(10, 2), timestamptz...)."""
    schema = iceberg_schema(pa.schema([pa.field("c", arrow_type)]))
    return str(schema.fields[0].field_type)


# -- reading rows ------------------------------------------------------------------------------


@dataclass
class Rows:
    """A file's rows as batches of `schema`, counted as they are read."""

    upload: Upload
    schema: pa.Schema
    #: For an append: the table's required columns, which may hold no empty value.
    required: frozenset[str] = frozenset()
    count: int = 0
    _csv_types: dict[str, pa.DataType] = field(default_factory=dict)

    def batches(self) -> Iterator[pa.RecordBatch]:
        """Every batch of the file, converted; BadFile on the first value that does not
        fit, and when the file has no rows at all."""
        reader = {"csv": self._csv, "parquet": self._parquet, "jsonl": self._json}
        for batch in reader[self.upload.format]():
            self._check_required(batch)
            self.count += batch.num_rows
            yield batch
        if self.count == 0:
            raise BadFile("The file has no rows")

    def _check_required(self, batch: pa.RecordBatch) -> None:
        for name in self.required:
            column = batch.column(name)
            if column.null_count:
                index = pc.index(pc.is_null(column), True).as_py()
                raise BadFile(
                    "empty, but the table's column is required (NOT NULL)",
                    row=self.count + index + 1,
                    column=name,
                )

    # CSV

    def _csv(self) -> Iterator[pa.RecordBatch]:
        return self._streamed(_open_csv(self.upload, self._csv_types), self._csv_error)

    def _csv_error(self, message: str) -> BadFile:
        ragged = re.search(r"Row #(\d+): Expected (\d+) columns, got (\d+)", message)
        if ragged:
            row, expected, got = (int(n) for n in ragged.groups())
            return _ragged(row, expected, got)
        if "In CSV column #" in message:
            found = _locate_csv_value(self.upload, self._csv_types, self.count)
            if found is not None:
                return found
        return BadFile(f"The file cannot be read as CSV after row {self.count:,}: {message}")

    # Parquet

    def _parquet(self) -> Iterator[pa.RecordBatch]:
        try:
            file = pq.ParquetFile(self.upload.path)
            batches = file.iter_batches(batch_size=PARQUET_BATCH_ROWS, columns=self.schema.names)
            for batch in batches:
                yield _cast(batch, self.schema, self.count)
        except pa.ArrowException as error:
            raise BadFile(
                f"The Parquet file cannot be read after row {self.count:,}: {error}"
            ) from None

    # JSON lines

    def _json(self) -> Iterator[pa.RecordBatch]:
        return self._streamed(
            _open_json(self.upload, self.schema),
            lambda message: _json_error(self.upload, self.schema, message, self.count),
        )

    def _streamed(self, reader: Any, error: Callable[[str], BadFile]) -> Iterator[pa.RecordBatch]:
        """The batches of a CSV or JSON reader (Arrow's streaming readers), with the
        table's columns in its order; Arrow's refusal becomes `error(message)`."""
        while True:
            try:
                batch = reader.read_next_batch()
            except StopIteration:
                return
            except pa.ArrowInvalid as failure:
                raise error(str(failure)) from None
            yield _cast(batch.select(self.schema.names), self.schema, self.count)


def _csv_options(
    upload: Upload, column_types: dict[str, pa.DataType] | None = None, *, skip: int = 0
) -> dict[str, Any]:
    return {
        "read_options": pa_csv.ReadOptions(
            block_size=BLOCK_BYTES, use_threads=False, skip_rows_after_names=skip
        ),
        # Quoted values may span lines; rows are counted as CSV rows, not lines.
        "parse_options": pa_csv.ParseOptions(delimiter=upload.delimiter, newlines_in_values=True),
        "convert_options": pa_csv.ConvertOptions(column_types=column_types or {}),
    }


def _open_csv(upload: Upload, column_types: dict[str, pa.DataType] | None = None) -> Any:
    try:
        return pa_csv.open_csv(upload.path, **_csv_options(upload, column_types))
    except pa.ArrowInvalid as error:
        message = str(error)
        ragged = re.search(r"Row #(\d+): Expected (\d+) columns, got (\d+)", message)
        if ragged:
            row, expected, got = (int(n) for n in ragged.groups())
            raise _ragged(row, expected, got) from None
        if "Empty CSV file" in message:
            raise BadFile("The file is empty") from None
        if "In CSV column #" in message and column_types:
            found = _locate_csv_value(upload, column_types, 0)
            if found is not None:
                raise found from None
        raise BadFile(f"The file cannot be read as CSV: {message}") from None


def _ragged(row: int, expected: int, got: int) -> BadFile:
    # pyarrow counts the header as row 1.
    fields = "1 field" if got == 1 else f"{got} fields"
    return BadFile(f"it has {fields}, the header has {expected}", row=row - 1)


def _csv_converts(values: Sequence[str], arrow_type: pa.DataType) -> bool:
    """Whether the CSV reader converts these raw values to `arrow_type` (read back as a
    one-column CSV, so the rules are exactly the reader's own)."""
    text = io.StringIO()
    writer = pycsv.writer(text, quoting=pycsv.QUOTE_ALL, lineterminator="\n")
    writer.writerow(["v"])
    writer.writerows([value] for value in values)
    try:
        pa_csv.read_csv(
            io.BytesIO(text.getvalue().encode()),
            parse_options=pa_csv.ParseOptions(newlines_in_values=True),
            convert_options=pa_csv.ConvertOptions(column_types={"v": arrow_type}),
        )
    except pa.ArrowInvalid:
        return False
    return True


def _first_failing(values: list[str], arrow_type: pa.DataType) -> int | None:
    """The index of the first value the CSV reader cannot convert, by halving."""
    if _csv_converts(values, arrow_type):
        return None
    low, high = 0, len(values)  # the failing value is in values[low:high]
    while high - low > 1:
        middle = (low + high) // 2
        if _csv_converts(values[low:middle], arrow_type):
            low = middle
        else:
            high = middle
    return low


def _locate_csv_value(
    upload: Upload, column_types: dict[str, pa.DataType], rows_done: int
) -> BadFile | None:
    """The first value after `rows_done` rows that does not convert to its column's type:
    the rows are read again as text from there, and each column's values tried."""
    typed = {name: t for name, t in column_types.items() if not pa.types.is_string(t)}
    try:
        reader = pa_csv.open_csv(
            upload.path,
            **_csv_options(upload, {name: pa.string() for name in column_types}, skip=rows_done),
        )
        done = rows_done
        for batch in reader:
            found: tuple[int, str] | None = None
            for name, arrow_type in typed.items():
                values = batch.column(name).to_pylist()
                index = _first_failing([v or "" for v in values], arrow_type)
                if index is not None and (found is None or index < found[0]):
                    found = (index, name)
            if found is not None:
                index, name = found
                value = batch.column(name)[index].as_py()
                return BadFile(
                    f"{_shown(value)} is not a {type_name(typed[name])}",
                    row=done + index + 1,
                    column=name,
                )
            done += batch.num_rows
    except (pa.ArrowException, KeyError):
        return None
    return None


def _open_json(upload: Upload, schema: pa.Schema | None) -> Any:
    options = {"read_options": pa_json.ReadOptions(block_size=BLOCK_BYTES, use_threads=False)}
    if schema is not None:
        options["parse_options"] = pa_json.ParseOptions(
            explicit_schema=schema, unexpected_field_behavior="error"
        )
    try:
        return pa_json.open_json(upload.path, **options)
    except pa.ArrowInvalid as error:
        raise _json_error(upload, schema, str(error), 0) from None


def _json_error(upload: Upload, schema: pa.Schema | None, message: str, rows_done: int) -> BadFile:
    changed = re.search(r"Column\((/[^)]*)\) changed from (\w+) to (\w+) in row (\d+)", message)
    if changed:
        pointer, before, after, row = changed.groups()
        return BadFile(
            f"a {after} where the column holds {before}s",
            row=rows_done + int(row) + 1,
            column=pointer[1:].replace("/", "."),
        )
    located = re.search(r"in row (\d+)", message)
    if located:
        reason = message.split(":", 1)[-1].rsplit(" in row", 1)[0].strip()
        return BadFile(
            f"it is not a JSON object ({reason})", row=rows_done + int(located.group(1)) + 1
        )
    if "unexpected field" in message and schema is not None:
        found = _locate_json_field(upload, schema, rows_done)
        if found is not None:
            return found
    return BadFile(f"The file cannot be read as JSON lines after row {rows_done:,}: {message}")


def _locate_json_field(upload: Upload, schema: pa.Schema, rows_done: int) -> BadFile | None:
    """The first row after `rows_done` with a field the columns do not have."""
    known = set(schema.names)
    row = 0
    with open(upload.path, encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if not line.strip():
                continue
            row += 1
            if row <= rows_done:
                continue
            try:
                document = json.loads(line)
            except ValueError:
                return BadFile("it is not a JSON object", row=row)
            extra = sorted(set(document) - known) if isinstance(document, dict) else []
            if extra:
                return BadFile(
                    f"it has a field {_shown(extra[0])} that is not a column "
                    f"(columns: {', '.join(schema.names)})",
                    row=row,
                )
    return None


def _cast(batch: pa.RecordBatch, schema: pa.Schema, rows_done: int) -> pa.RecordBatch:
    """`batch` as `schema`'s types; BadFile naming the first value that does not fit (an
    overflow, lost precision)."""
    if batch.schema.equals(schema):
        return batch
    columns = []
    for target in schema:
        column = batch.column(target.name)
        if column.type != target.type:
            try:
                column = column.cast(target.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                index = _first_failing_cast(column, target.type)
                value = column[index].as_py() if index is not None else None
                raise BadFile(
                    f"{_shown(value)} does not fit the column's type {type_name(target.type)}",
                    row=rows_done + (index or 0) + 1,
                    column=target.name,
                ) from None
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _first_failing_cast(array: pa.Array, arrow_type: pa.DataType) -> int | None:
    def casts(part: pa.Array) -> bool:
        try:
            part.cast(arrow_type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return False
        return True

    if casts(array):
        return None
    low, high = 0, len(array)
    while high - low > 1:
        middle = (low + high) // 2
        if casts(array.slice(low, middle - low)):
            low = middle
        else:
            high = middle
    return low


# -- a file's columns, for a new table or an existing one --------------------------------------


def rows_for_new_table(upload: Upload) -> Rows:
    """The file's rows with the types inferred from its first block."""
    schema = writable_schema(_inferred(upload))
    rows = Rows(upload, schema)
    if upload.format == "csv":
        rows._csv_types = dict(zip(schema.names, schema.types, strict=True))
    return rows


def _inferred(upload: Upload) -> pa.Schema:
    if upload.format == "parquet":
        try:
            return pq.ParquetFile(upload.path).schema_arrow
        except pa.ArrowException as error:
            raise BadFile(f"The Parquet file cannot be read: {error}") from None
    if upload.format == "csv":
        return _open_csv(upload).schema
    return _open_json(upload, None).schema


def rows_for_table(upload: Upload, table_schema: Schema) -> Rows:
    """The file's rows read into an existing table's columns: the same columns by name, of
    types the table's can hold (Iceberg's promotions: int into long, float into double, a
    narrower decimal into a wider one); a CSV file is read straight into the table's
    types."""
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    target = pa.schema(
        [pa.field(f.name, f.type) for f in schema_to_pyarrow(table_schema, include_field_ids=False)]
    )
    names = _file_columns(upload)
    missing = [name for name in target.names if name not in names]
    extra = [name for name in names if name not in target.names]
    if missing or extra:
        parts = []
        if extra:
            parts.append(f"the file has {_names(extra)}, which the table has not")
        if missing:
            parts.append(f"the table has {_names(missing)}, which the file has not")
        raise BadFile(
            "The file's columns are not the table's: " + "; ".join(parts) + ". Columns "
            "are matched by name."
        )
    required = frozenset(f.name for f in table_schema.fields if f.required)
    if upload.format == "parquet":
        _check_promotable(upload, table_schema)
    rows = Rows(upload, target, required=required)
    if upload.format == "csv":
        for f in target:
            if pa.types.is_nested(f.type):
                raise BadFile(
                    f"The table's column is {type_name(f.type)}, which a CSV file cannot hold",
                    column=f.name,
                )
        rows._csv_types = dict(zip(target.names, target.types, strict=True))
    return rows


def _names(names: list[str]) -> str:
    shown = ", ".join(repr(n) for n in names[:10])
    return ("column " if len(names) == 1 else "columns ") + shown


def _file_columns(upload: Upload) -> list[str]:
    if upload.format == "jsonl":
        # A JSON lines file's columns are its first block's keys.
        return _open_json(upload, None).schema.names
    return list(_inferred(upload).names)


def _check_promotable(upload: Upload, table_schema: Schema) -> None:
    from pyiceberg.exceptions import ResolveError
    from pyiceberg.schema import promote

    file_schema = iceberg_schema(writable_schema(_inferred(upload)))
    for column in table_schema.fields:
        file_type = file_schema.find_field(column.name).field_type
        if file_type == column.field_type:
            continue
        try:
            promote(file_type, column.field_type)
        except ResolveError:
            raise BadFile(
                f"The file's column is {file_type}, the table's is {column.field_type}: it "
                "cannot be written into it",
                column=column.name,
            ) from None


# -- a preview -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Preview:
    """What a file would become, from its first block: its columns and first rows."""

    format: str
    columns: list[tuple[str, str]]
    rows: list[list[str]]

    def as_dict(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "columns": [{"name": name, "type": kind} for name, kind in self.columns],
            "rows": self.rows,
        }


def preview(rows: Rows, *, limit: int = PREVIEW_ROWS) -> Preview:
    """The first rows (as text) and the columns the table has or would have; reading stops
    after the first batch, so a preview costs one block of the file."""
    shown: list[list[str]] = []
    batches = rows.batches()
    try:
        first = next(batches)
    except StopIteration:  # pragma: no cover - batches() raises BadFile on no rows
        first = None
    finally:
        batches.close()
    if first is not None:
        for record in first.slice(0, limit).to_pylist():
            shown.append(["" if v is None else str(v) for v in record.values()])
    return Preview(
        rows.upload.format,
        [(f.name, type_name(f.type)) for f in rows.schema],
        shown,
    )

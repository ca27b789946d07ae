"""Reading uploaded files as rows (catalog.core.uploads), without a database: formats by
content, delimiters, types Iceberg can hold, and errors that name the row and column."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from catalog.core import uploads


def write(tmp_path: Path, name: str, content: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(content)
    return str(path)


def rows_of(path: str, format: str | None = None) -> list[dict]:
    upload = uploads.inspect(path, format=format)
    rows = uploads.rows_for_new_table(upload)
    return [row for batch in rows.batches() for row in batch.to_pylist()]


@pytest.mark.parametrize("delimiter", [",", ";", "\t", "|"])
def test_a_csv_files_delimiter_is_read_from_its_header(tmp_path, delimiter):
    content = f"id{delimiter}name\n1{delimiter}a\n".encode()
    assert rows_of(write(tmp_path, "f.csv", content)) == [{"id": 1, "name": "a"}]


def test_the_content_decides_when_no_format_is_claimed(tmp_path):
    path = write(tmp_path, "f", b"")
    pq.write_table(pa.table({"a": [1]}), path)
    assert uploads.inspect(path, format=None).format == "parquet"
    assert uploads.inspect(write(tmp_path, "g", b'{"a": 1}\n'), format=None).format == "jsonl"
    assert uploads.inspect(write(tmp_path, "h", b"a\n1\n"), format=None).format == "csv"


def test_a_format_comes_from_the_declared_one_or_the_extension():
    assert uploads.format_for("x.CSV", None) == "csv"
    assert uploads.format_for("x.ndjson", None) == "jsonl"
    assert uploads.format_for("x.csv", "parquet") == "parquet"
    assert uploads.format_for("x.xlsx", None) is None
    with pytest.raises(uploads.InvalidInput, match="Unknown format"):
        uploads.format_for("x.csv", "xlsx")


def test_types_iceberg_cannot_hold_become_ones_it_can(tmp_path):
    path = write(tmp_path, "f.parquet", b"")
    table = pa.table(
        {
            "small": pa.array([1], pa.int8()),
            "unsigned": pa.array([1], pa.uint32()),
            "nothing": pa.array([None], pa.null()),
            "at": pa.array([1], pa.timestamp("ns")),
        }
    )
    pq.write_table(table, path)
    rows = uploads.rows_for_new_table(uploads.inspect(path, format="parquet"))
    assert [uploads.type_name(t) for t in rows.schema.types] == [
        "int",
        "long",
        "string",
        "timestamp",
    ]


def test_a_json_field_that_appears_late_is_named_with_its_row(tmp_path, monkeypatch):
    monkeypatch.setattr(uploads, "BLOCK_BYTES", 1024)
    lines = b"".join(b'{"a": %d}\n' % i for i in range(1, 500)) + b'{"a": 500, "b": 1}\n'
    with pytest.raises(uploads.BadFile) as raised:
        rows_of(write(tmp_path, "f.jsonl", lines))
    assert raised.value.row == 500
    assert "'b' that is not a column" in raised.value.message


def test_a_quoted_value_may_span_lines_and_rows_are_counted_as_rows(tmp_path):
    content = b'id,text\n1,"two\nlines"\n2,x\n3\n'
    with pytest.raises(uploads.BadFile) as raised:
        rows_of(write(tmp_path, "f.csv", content))
    assert raised.value.row == 3

"""A query's kept result (refresh.core.results): cut to its bounds in rows and bytes, stored
as Parquet parts (the first page alone), read back in pages from any offset, and streamed
as CSV and Parquet that give back the same rows and types."""

from __future__ import annotations

import datetime
import io
from decimal import Decimal

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from refresh.core import results


def numbers(count: int) -> pa.Table:
    return pa.table(
        {"id": pa.array(range(count), pa.int64()), "label": [f"row-{i}" for i in range(count)]}
    )


def stored(folder, table: pa.Table) -> list[int]:
    parts = []
    for index, part in enumerate(results.split(table)):
        results.write_part(folder, index, part)
        parts.append(part.num_rows)
    return parts


def test_a_result_within_its_bounds_is_kept_whole():
    bounded = results.bound(numbers(10), max_rows=10, max_bytes=1 << 20)
    assert (bounded.table.num_rows, bounded.cut) == (10, "")


def test_a_result_over_its_rows_is_cut_there_and_says_so():
    bounded = results.bound(numbers(11), max_rows=10, max_bytes=1 << 20)
    assert (bounded.table.num_rows, bounded.cut) == (10, "rows")
    assert bounded.table.column("id").to_pylist() == list(range(10))


def test_a_result_over_its_bytes_keeps_the_most_rows_that_fit():
    table = numbers(1000)
    limit = table.slice(0, 300).nbytes
    bounded = results.bound(table, max_rows=100_000, max_bytes=limit)
    assert bounded.cut == "bytes"
    assert bounded.table.nbytes <= limit < table.slice(0, bounded.table.num_rows + 1).nbytes
    assert bounded.table.column("id").to_pylist() == list(range(bounded.table.num_rows))


def test_the_first_page_is_a_part_of_its_own_and_the_rest_follow_in_large_parts():
    sizes = [part.num_rows for part in results.split(numbers(120_150))]
    assert sizes == [100, 50_000, 50_000, 20_050]
    assert [part.num_rows for part in results.split(numbers(0))] == [0]


@pytest.mark.parametrize(
    ("offset", "limit"),
    [(0, 100), (0, 1), (99, 2), (100, 100), (1_995, 10), (50_050, 100), (50_099, 3), (60_145, 100)],
)
def test_a_page_from_any_offset_gives_those_rows_across_parts_and_row_groups(
    tmp_path, offset, limit
):
    table = numbers(60_150)
    parts = stored(tmp_path, table)
    page = results.read_rows(tmp_path, parts, offset, limit)
    expected = list(range(offset, min(offset + limit, 60_150)))
    assert page.column("id").to_pylist() == expected
    assert page.column("label").to_pylist() == [f"row-{i}" for i in expected]


def test_a_page_past_the_end_has_the_columns_and_no_rows(tmp_path):
    parts = stored(tmp_path, numbers(5))
    page = results.read_rows(tmp_path, parts, 10, 100)
    assert page.num_rows == 0 and page.column_names == ["id", "label"]
    assert results.read_rows(tmp_path, [], 0, 100) is None


def test_parts_appear_whole_under_their_own_name_only(tmp_path):
    folder = tmp_path / "result"
    results.write_part(folder, 0, numbers(3))
    assert sorted(path.name for path in folder.iterdir()) == ["part-00000.parquet"]


def rich() -> pa.Table:
    """Types Spark gives that JSON, CSV and Parquet each hold differently; two columns share
    a name, as a join's two ids do."""
    return pa.Table.from_arrays(
        [
            pa.array([1, None], pa.int64()),
            pa.array([Decimal("12.50"), Decimal("-0.01")], pa.decimal128(10, 2)),
            pa.array(
                [datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.UTC), None],
                pa.timestamp("us", tz="UTC"),
            ),
            pa.array([datetime.date(2024, 2, 29), None], pa.date32()),
            pa.array(
                [{"a": 1, "b": "x"}, None], pa.struct([("a", pa.int32()), ("b", pa.string())])
            ),
            pa.array([[1, 2], []], pa.list_(pa.int32())),
            pa.array([[("k", 1.5)], None], pa.map_(pa.string(), pa.float64())),
            pa.array([b"\x00\xff", None], pa.binary()),
            pa.array([float("nan"), 2.5], pa.float64()),
            pa.array([2, 3], pa.int64()),
        ],
        names=["id", "amount", "at", "day", "s", "l", "m", "b", "f", "id"],
    )


def test_pages_give_json_values_as_previews_do(tmp_path):
    parts = stored(tmp_path, rich())
    assert results.json_rows(results.read_rows(tmp_path, parts, 0, 10)) == [
        [1, "12.50", "2024-01-02T03:04:05+00:00", "2024-02-29", {"a": 1, "b": "x"}, [1, 2],
         {"k": 1.5}, "AP8=", "NaN", 2],
        [None, "-0.01", None, None, None, [], None, None, 2.5, 3],
    ]  # fmt: skip


def test_the_csv_download_has_one_header_and_every_row_with_nested_values_as_json(tmp_path):
    table = pa.concat_tables([rich()] * 60)  # two parts
    parts = stored(tmp_path, table)
    assert len(parts) == 2
    text = b"".join(results.csv_chunks(tmp_path, parts)).decode()
    lines = text.splitlines()
    assert lines[0] == '"id","amount","at","day","s","l","m","b","f","id"'
    assert len(lines) == 1 + 120
    assert lines[1].startswith("1,12.50,2024-01-02 03:04:05.000000Z,2024-02-29,")
    assert '"{""a"": 1, ""b"": ""x""}"' in lines[1] and '"AP8="' in lines[1]
    read = pacsv.read_csv(io.BytesIO(text.encode()))
    assert read.num_rows == 120


def test_the_parquet_download_streams_one_file_with_the_rows_and_types_kept(tmp_path):
    table = pa.concat_tables([rich()] * 60)
    parts = stored(tmp_path, table)
    chunks = list(results.parquet_chunks(tmp_path, parts))
    assert len(chunks) > 1  # streamed as each part is written, not in one piece
    read = pq.ParquetFile(io.BytesIO(b"".join(chunks))).read()
    assert read.schema.equals(table.schema)
    assert results.json_rows(read) == results.json_rows(table)  # NaN == NaN here


def test_an_empty_result_keeps_its_columns_for_every_download(tmp_path):
    table = numbers(0)
    parts = stored(tmp_path, table)
    assert parts == [0]
    assert b"".join(results.csv_chunks(tmp_path, parts)).decode().strip() == '"id","label"'
    read = pq.ParquetFile(io.BytesIO(b"".join(results.parquet_chunks(tmp_path, parts)))).read()
    assert read.schema.equals(table.schema) and read.num_rows == 0

"""Queries through the whole stack (the app under gunicorn, a Celery worker with its Spark,
celery-beat, Redis): a SELECT posted to /api/statements/ is a job whose URL gives its rows
in pages, downloaded as CSV and Parquet equal to the table; DESCRIBE, EXPLAIN and time
travel answer; a result over its bound is cut; and a long query is really stopped, by a
cancel and by the statement timeout: its Spark job group is cancelled, so the worker's
cores are free for the next query at once."""

from __future__ import annotations

import io
import time
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.rest import RestCatalog

from tests.refresh_stack import RefreshStack, refresh_stack
from tests.waiting import PATIENCE

NS = "qs"
ROWS = 300
#: Days of Spark's time on two cores: the query nobody meant. Not stopped in Spark, it would
#: hold the worker's cores far longer than any test waits.
LONG = "SELECT sum(id % 7) AS spun FROM range(1000000000000000)"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefreshStack]:
    env = {"QUERY_TIMEOUT_SECONDS": "15", "QUERY_RESULT_MAX_ROWS": "1000", "QUERIES_PER_USER": "4"}
    with refresh_stack(tmp_path_factory.mktemp("query-stack"), extra_env=env) as running:
        catalog = RestCatalog(
            "lv", uri=running.server.iceberg_uri, credential=running.server.credential
        )
        catalog.create_namespace(NS)
        schema = pa.schema([pa.field("id", pa.int64()), pa.field("label", pa.string())])
        table = catalog.create_table(f"{NS}.t", schema=schema)
        table.append(pa.table({"id": [-1], "label": ["first"]}, schema=schema))
        table.append(
            pa.table(
                {"id": list(range(ROWS)), "label": [f"row-{i}" for i in range(ROWS)]},
                schema=schema,
            )
        )
        # The worker's Spark meets its first query cold (the catalog, the table's metadata,
        # the JIT): warmed here, so that no test's query spends its 15 s timeout on that on a
        # loaded machine. Its outcome is not what any test asserts.
        finished(running, post(running, "SELECT label, count(*) FROM t GROUP BY label")["job"])
        yield running


def post(stack: RefreshStack, sql: str) -> dict:
    response = stack.api.post(
        f"{stack.server.base_url}/api/statements/", json={"sql": sql, "namespace": NS}, timeout=60
    )
    assert response.status_code == 202, response.text
    return response.json()


def rows_of(stack: RefreshStack, job: dict, **params) -> dict:
    response = stack.api.get(f"{stack.server.base_url}{job['url']}rows", params=params, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def finished(stack: RefreshStack, job: dict, timeout: float = 240) -> dict:
    return stack.wait_for(
        lambda: (lambda page: page if page["complete"] else None)(rows_of(stack, job)),
        timeout=timeout,
        what=f"job {job['id']}'s query",
        every=0.2,
    )


def test_a_query_gives_its_rows_in_pages_and_downloads_them_whole(stack: RefreshStack):
    base = stack.server.base_url
    body = post(stack, "SELECT id, label FROM t WHERE id >= 0 ORDER BY id")
    page = finished(stack, body["job"])
    assert page["state"] == "SUCCEEDED", page.get("error") or page
    assert page["columns"] == [
        {"name": "id", "type": "bigint"},
        {"name": "label", "type": "string"},
    ]
    assert page["row_count"] == ROWS and page["cut"] is None
    middle = rows_of(stack, body["job"], offset=150, limit=60)["rows"]
    assert middle == [[i, f"row-{i}"] for i in range(150, 210)]
    query = stack.api.get(f"{base}/api/queries/{page['query']}/", timeout=30).json()
    expected = pa.table({"id": list(range(ROWS)), "label": [f"row-{i}" for i in range(ROWS)]})
    csv = stack.api.get(f"{base}{query['csv_url']}", timeout=60)
    assert pacsv.read_csv(io.BytesIO(csv.content)).equals(expected)
    parquet = stack.api.get(f"{base}{query['parquet_url']}", timeout=60)
    assert pq.read_table(io.BytesIO(parquet.content)).equals(expected)


def test_describe_explain_time_travel_and_a_cut_answer_through_the_worker(stack: RefreshStack):
    catalog = RestCatalog("lv", uri=stack.server.iceberg_uri, credential=stack.server.credential)
    first = catalog.load_table(f"{NS}.t").history()[0].snapshot_id
    cases = [
        ("DESCRIBE t", [["id", "bigint", None], ["label", "string", None]]),
        (f"SELECT label FROM t FOR VERSION AS OF {first}", [["first"]]),
        ("SHOW COLUMNS FROM t", [["id"], ["label"]]),
    ]
    for sql, expected in cases:
        page = finished(stack, post(stack, sql)["job"])
        assert (page["state"], page["rows"]) == ("SUCCEEDED", expected), sql
    plan = finished(stack, post(stack, "EXPLAIN SELECT * FROM t WHERE id = 7")["job"])
    assert plan["kind"] == "EXPLAIN" and "BatchScan" in plan["rows"][0][0]
    cut = finished(stack, post(stack, "SELECT id FROM range(5000)")["job"])
    assert (cut["row_count"], cut["cut"]) == (1000, "rows")


def assert_a_quick_query_answers(stack: RefreshStack) -> None:
    """A small query gives its rows, which it cannot while a Spark job of an earlier query
    still holds the worker's two cores: Spark's scheduler is FIFO, so its tasks would wait
    behind LONG's (for days), and it would end in its statement timeout instead."""
    page = finished(stack, post(stack, "SELECT count(*) AS n FROM t")["job"], timeout=PATIENCE)
    assert page["rows"] == [[ROWS + 1]], page


def test_a_cancelled_query_is_stopped_in_spark_not_only_on_its_job(stack: RefreshStack):
    base = stack.server.base_url
    job = post(stack, LONG)["job"]
    stack.wait_for(
        lambda: rows_of(stack, job)["state"] == "RUNNING", timeout=PATIENCE, what="RUNNING"
    )
    # Most likely its Spark tasks hold both cores by now. Nothing is asserted on that: a
    # cancel that came before them is made again at each of the watch's looks.
    time.sleep(3)
    assert stack.api.post(f"{base}{job['cancel_url']}", timeout=30).status_code == 200
    page = finished(stack, job, timeout=PATIENCE)
    assert page["state"] == "CANCELLED", page
    assert_a_quick_query_answers(stack)
    assert "cancelled" in stack.log("worker", 400).lower()


def test_a_query_past_the_statement_timeout_is_stopped_with_a_400(stack: RefreshStack):
    job = post(stack, LONG)["job"]
    page = finished(stack, job, timeout=PATIENCE)
    assert page["state"] == "FAILED" and page["error"]["type"] == "StatementTimeout", page
    # The query's row ends first, its job a moment later: the job once it has finished.
    answer = stack.job(job["url"], timeout=PATIENCE)
    assert answer["status"] == 400 and "QUERY_TIMEOUT_SECONDS" in answer["error"]["message"]
    assert_a_quick_query_answers(stack)

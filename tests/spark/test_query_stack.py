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


# -- a user with grants and policies, not a superuser (issue 51) --------------------------

POLICY_NS = "pol"
#: id, region, email: two EU rows and one US row.
ORDERS = [(1, "EU", "ann@eu.example"), (2, "US", "bob@us.example"), (3, "EU", "cy@eu.example")]
MASKED = [[1, "EU", "***@eu.example"], [3, "EU", "***@eu.example"]]

USERS = """
from django.contrib.auth.models import Group, User
analysts, _ = Group.objects.get_or_create(name="analysts")
finance, _ = Group.objects.get_or_create(name="finance")
for name, group in (("ana", analysts), ("fin", finance)):
    user = User.objects.create_user(username=name, password=name + "-password-1")
    user.groups.add(group)
"""


class Reader:
    """A non-superuser of the stack: their API session and their engine credential."""

    def __init__(self, stack: RefreshStack, username: str) -> None:
        import requests

        base = stack.server.base_url
        token = requests.post(
            f"{base}/api/token/",
            data={"username": username, "password": f"{username}-password-1"},
            timeout=30,
        )
        token.raise_for_status()
        self.api = requests.Session()
        self.api.headers["Authorization"] = f"Token {token.json()['token']}"
        made = stack.server.manage("create_catalog_client", username, "--name", "engine")
        self.credential = made.strip().splitlines()[-1]
        self.stack = stack

    def query(self, sql: str) -> dict:
        response = self.api.post(
            f"{self.stack.server.base_url}/api/statements/",
            json={"sql": sql, "namespace": POLICY_NS},
            timeout=60,
        )
        assert response.status_code == 202, response.text
        job = response.json()["job"]
        return self.stack.wait_for(
            lambda: (lambda page: page if page["complete"] else None)(
                self.api.get(f"{self.stack.server.base_url}{job['url']}rows", timeout=30).json()
            ),
            timeout=240,
            what=f"{sql!r}",
            every=0.2,
        )


@pytest.fixture(scope="module")
def readers(stack: RefreshStack) -> dict[str, Reader]:
    """pol.orders with a row filter (EU rows) and a mask of email, finance exempt from both;
    ana (analysts: read_data and create on pol) and fin (finance: read_data on pol)."""
    base = stack.server.base_url
    catalog = RestCatalog("lv", uri=stack.server.iceberg_uri, credential=stack.server.credential)
    catalog.create_namespace(POLICY_NS)
    schema = pa.schema(
        [
            pa.field("id", pa.int64()),
            pa.field("region", pa.string()),
            pa.field("email", pa.string()),
        ]
    )
    table = catalog.create_table(f"{POLICY_NS}.orders", schema=schema)
    table.append(
        pa.Table.from_pylist([dict(zip(schema.names, row, strict=True)) for row in ORDERS], schema)
    )
    stack.server.manage("shell", "-c", USERS)
    for group, privilege in (
        ("analysts", "read_data"),
        ("analysts", "create"),
        ("finance", "read_data"),
    ):
        granted = stack.api.post(
            f"{base}/api/grants/",
            json={
                "privilege": privilege,
                "principal_type": "group",
                "principal": group,
                "securable_type": "namespace",
                "namespace": POLICY_NS,
            },
            timeout=30,
        )
        assert granted.status_code == 201, granted.text
    answer = stack.statements(
        "ALTER TABLE orders SET ROW FILTER region = 'EU' EXEMPT GROUPS finance;\n"
        "ALTER TABLE orders ALTER COLUMN email SET MASK concat('***@', split_part(email, '@', 2))"
        " EXEMPT GROUPS finance",
        namespace=POLICY_NS,
    )
    assert answer.status_code == 200, answer.text
    return {"ana": Reader(stack, "ana"), "fin": Reader(stack, "fin")}


def test_a_readers_console_query_sees_only_the_rows_and_values_their_policies_leave(
    stack: RefreshStack, readers: dict[str, Reader]
):
    ana, fin = readers["ana"], readers["fin"]
    seen = ana.query("SELECT id, region, email FROM orders ORDER BY id")
    assert (seen["state"], seen["rows"]) == ("SUCCEEDED", MASKED), seen
    # What a curious analyst tries: hidden rows' existence, a masked value's, the past, files.
    catalog = RestCatalog("lv", uri=stack.server.iceberg_uri, credential=stack.server.credential)
    first = catalog.load_table(f"{POLICY_NS}.orders").history()[0].snapshot_id
    for sql, rows in (
        ("SELECT count(*) FROM orders WHERE region = 'US'", [[0]]),
        ("SELECT count(*) FROM orders WHERE email = 'ann@eu.example'", [[0]]),
        (f"SELECT id FROM orders FOR VERSION AS OF {first} ORDER BY id", [[1], [3]]),
        ("SELECT o.id FROM orders o JOIN orders p ON o.id = p.id ORDER BY 1", [[1], [3]]),
    ):
        page = ana.query(sql)
        assert (page["state"], page["rows"]) == ("SUCCEEDED", rows), (sql, page)
    files = ana.query("SELECT file_path FROM pol.orders.files")
    assert files["state"] == "FAILED" and "row filter" in str(files["error"]), files
    # Finance is exempt from both: every row, as written.
    whole = fin.query("SELECT id, region, email FROM orders ORDER BY id")
    assert whole["rows"] == [list(row) for row in ORDERS], whole


def test_an_engine_a_policy_applies_to_gets_a_403_naming_it_and_an_exempt_one_loads(
    stack: RefreshStack, readers: dict[str, Reader]
):
    from pyiceberg.exceptions import ForbiddenError

    ana = RestCatalog("ana", uri=stack.server.iceberg_uri, credential=readers["ana"].credential)
    with pytest.raises(ForbiddenError, match="row filter"):
        ana.load_table(f"{POLICY_NS}.orders")
    preview = readers["ana"].api.get(
        f"{stack.server.base_url}/api/namespaces/{POLICY_NS}/tables/orders/preview", timeout=30
    )
    assert preview.status_code == 403 and "row filter" in preview.text
    assert not any(email in preview.text for _, _, email in ORDERS)
    fin = RestCatalog("fin", uri=stack.server.iceberg_uri, credential=readers["fin"].credential)
    assert fin.load_table(f"{POLICY_NS}.orders").scan().to_arrow().num_rows == len(ORDERS)


def test_a_materialized_table_holds_what_its_owner_may_see_of_a_protected_source(
    stack: RefreshStack, readers: dict[str, Reader]
):
    ana = readers["ana"]
    response = ana.api.post(
        f"{stack.server.base_url}/api/statements/",
        json={
            "sql": "CREATE MATERIALIZED TABLE by_region "
            "FRESHNESS = INTERVAL '1' HOUR REFRESH_MODE = FULL AS "
            "SELECT region, count(*) AS n FROM orders GROUP BY region",
            "namespace": POLICY_NS,
        },
        timeout=60,
    )
    assert response.status_code in (200, 202), response.text
    if response.status_code == 202:  # Spark derived the schema on a worker
        url = f"{stack.server.base_url}{response.json()['job']['url']}"
        job = stack.wait_for(
            lambda: (lambda j: j if j["state"] not in ("QUEUED", "RUNNING") else None)(
                ana.api.get(url, timeout=30).json()
            ),
            timeout=240,
            what="the create's job",
        )
        assert job["state"] == "SUCCEEDED", job
        created = job["result"]["results"][-1]
    else:
        created = response.json()["results"][-1]
    run_id = created["run_id"]
    stack.wait_for(
        lambda: stack.run(run_id)["state"] in ("SUCCEEDED", "FAILED"),
        timeout=240,
        what="the first refresh",
    )
    assert stack.run(run_id)["state"] == "SUCCEEDED", stack.run(run_id)
    # Read by the editor (a superuser, whom no policy of by_region narrows): the owner's view.
    page = finished(stack, post(stack, f"SELECT region, n FROM {POLICY_NS}.by_region")["job"])
    assert page["rows"] == [["EU", 2]], page

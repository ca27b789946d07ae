"""Abuse of the whole stack as deployed (the web and the engines' catalog services
under gunicorn with webapp/gunicorn.conf.py, a Celery worker with its Spark, celery-beat):

- a flood of requests that need Spark, from a viewer and an editor, with no worker and
  then with one busy worker: every answer within a second (202, 503 or 429), no 5xx, no
  gunicorn timeout, and engines' load-table p99 under 50 ms meanwhile;
- an attacker with an editor's account, a file the worker can read, and statements that try
  to read it from every position, through every door that takes SQL or Spark settings:
  every one is a 4xx, nothing is written, and the secret appears in no response, table,
  history row or log line."""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pytest
import requests
from pyiceberg.catalog.rest import RestCatalog
from pyspark.sql import SparkSession

from tests import flood
from tests.refresh_stack import Answer, RefreshStack, refresh_stack
from tests.spark.conftest import rest_catalog_conf

NS = "hx"
GOOD = (
    "CREATE MATERIALIZED TABLE good PARTITIONED BY (ds) "
    "WITH ('partition.fields.ds.date-formatter' = 'yyyy-MM-dd') "
    "FRESHNESS = INTERVAL '1' HOUR REFRESH_MODE = FULL "
    "AS SELECT ds, count(*) AS n, max(name) AS name FROM src GROUP BY ds"
)


@pytest.fixture(scope="module")
def secret(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """(path, text) of a file the worker can read, outside everything the stack writes."""
    text = f"LAKEVIEW-SECRET-{uuid.uuid4().hex}"
    path = tmp_path_factory.mktemp("not-the-warehouse") / "admin-password.txt"
    path.write_text(text + "\n")
    return str(path), text


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefreshStack]:
    """No worker at first (the flood's first half); a worker comes when a test needs it."""
    with refresh_stack(
        tmp_path_factory.mktemp("abuse-stack"),
        deployed=True,
        worker=False,
    ) as running:
        yield running


@pytest.fixture(scope="module")
def working(stack: RefreshStack) -> RefreshStack:
    """The stack with a worker, below the services' priority as on a shared machine."""
    if stack.worker is None:
        stack.start_worker(nice=10)
    return stack


def engine_session(spark: SparkSession, stack: RefreshStack, name: str) -> SparkSession:
    session = spark.newSession()
    for key, value in rest_catalog_conf(stack.server, name=name).items():
        session.conf.set(key, value)
    session.conf.set("spark.sql.defaultCatalog", name)
    return session


#: Each engine loads the table every 20 ms: two engines planning 50 queries a second each,
#: a hundred loads a second in all (Spark's own catalog cache would ask once in 30 s). At
#: every 10 ms, the harness's engines and the catalog answering them took half of the two
#: cores the stack and this test share, and the flood's answers measured that.
ENGINE_INTERVAL = 0.02

#: The quiet moment each flood measures before it: its load-table latencies are only shown
#: beside the flood's when the p99 is too high, so a second of them is enough.
QUIET_SECONDS = 1.0


def assert_answered_fast(measured: flood.Measured, allowed: set[int], what: str) -> None:
    statuses = sorted({shot.status for shot in measured.shots})
    slow = [shot for shot in measured.shots if shot.seconds >= 1.0]
    slowest = max(shot.seconds for shot in measured.shots)
    # Shown with a failure (pytest prints what a failed test printed).
    print(f"{what}: {len(measured.shots)} answers in {measured.flood_seconds:.2f} s", end=", ")
    print(f"slowest {slowest:.3f} s")
    assert set(statuses) <= allowed, f"{what}: {statuses} {measured.shots[:3]}"
    assert not slow, f"{what}: {len(slow)} answers took 1 s or more, e.g. {slow[0]}"
    p99 = flood.percentile(measured.during, 0.99)
    assert len(measured.during) >= 20, f"{what}: too few load-table samples"
    assert p99 < 0.050, (
        f"{what}: load-table p99 {p99 * 1000:.1f} ms during the flood "
        f"(quiet: {flood.percentile(measured.quiet, 0.99) * 1000:.1f} ms)"
    )


def test_a_flood_is_answered_within_a_second_and_engines_keep_loading_tables(
    stack: RefreshStack,
):
    scenario = flood.prepare(stack)
    sends = flood.abusive_sends(scenario)
    measured = flood.measure(
        sends,
        load_table_url=scenario.load_table_url,
        token=scenario.engine_token,
        engines=2,
        interval=ENGINE_INTERVAL,
        rounds=2,
        quiet_seconds=QUIET_SECONDS,
    )
    assert_answered_fast(measured, {503}, "no worker")
    assert "No refresh worker is running" in measured.shots[0].text

    # One busy worker: a long refresh holds its Spark. The rows go in through pyiceberg, so
    # that this process's own JVM is idle while the flood is timed: the answers measured are
    # the stack's, not this test's Spark compiling what it just ran.
    stack.start_worker(nice=10)
    catalog = RestCatalog("fx", uri=stack.server.iceberg_uri, credential=stack.server.credential)
    source = catalog.load_table("flood.t")
    source.append(
        pa.table(
            {"id": [1, 2], "ds": ["2024-01-01", "2024-01-02"]}, schema=source.schema().as_arrow()
        )
    )
    created = stack.statements(
        "CREATE MATERIALIZED TABLE slow FRESHNESS = INTERVAL '1' DAY REFRESH_MODE = FULL AS "
        "SELECT p.id, sum(r.id % 7) AS s FROM t p CROSS JOIN range(3000000000) r GROUP BY p.id",
        "flood",
    )
    assert created.status_code == 200, created.text
    refresh = created.json()["results"][0]["run_id"]
    stack.wait_for(
        lambda: stack.run(refresh)["state"] == "RUNNING", timeout=120, what="the long refresh"
    )
    measured = flood.measure(
        sends,
        load_table_url=scenario.load_table_url,
        token=scenario.engine_token,
        engines=2,
        interval=ENGINE_INTERVAL,
        rounds=2,
        quiet_seconds=QUIET_SECONDS,
    )
    assert_answered_fast(measured, {202, 429}, "a busy worker")
    accepted = [shot for shot in measured.shots if shot.status == 202]
    refused = [shot for shot in measured.shots if shot.status == 429]
    assert accepted and refused
    # Previews never wait behind the refresh: one finishes while it still runs. (The
    # editor's creates are cancelled first: they queue on the same job
    # thread, and each takes seconds beside the refresh.)
    for shot in accepted:
        if "create" in shot.what:
            stack.api.post(f"{scenario.base_url}{json.loads(shot.text)['job']['cancel_url']}")
    previews = [json.loads(shot.text)["job"]["url"] for shot in accepted if "preview" in shot.what]

    def a_finished_preview() -> dict | None:
        for url in previews:
            job = stack.api.get(f"{scenario.base_url}{url}", timeout=30).json()
            if job["state"] not in ("QUEUED", "RUNNING"):
                return job
        return None

    finished = stack.wait_for(a_finished_preview, timeout=120, what="a preview to finish")
    assert finished["state"] == "SUCCEEDED", finished
    run = stack.run(refresh)
    # Polled a moment later, the refresh may just have ended: the times decide.
    assert run["state"] == "RUNNING" or (
        run["state"] == "SUCCEEDED"
        and datetime.fromisoformat(run["finished_at"])
        > datetime.fromisoformat(finished["finished_at"])
    ), (run, finished)
    assert "WORKER TIMEOUT" not in stack.server.log_path.read_text(errors="replace")

    # The flood's jobs are cancelled (the running ones finish), then the long refresh,
    # leaving the worker free for the next test.
    for token in (scenario.viewer_token, scenario.editor_token):
        cancel_jobs(scenario.base_url, token)
        stack.wait_for(
            lambda token=token: not active_jobs(scenario.base_url, token),
            timeout=240,
            what="the flood's jobs to end",
        )
    stack.api.post(f"{scenario.base_url}/api/refresh-runs/{refresh}/cancel", timeout=30)
    stack.wait_for(
        lambda: stack.run(refresh)["state"] in ("CANCELLED", "SUCCEEDED"),
        timeout=120,
        what="the long refresh to end once cancelled",
    )


def active_jobs(base_url: str, token: str) -> list[dict]:
    """The user's Spark jobs waiting or running."""
    client = requests.Session()
    client.headers["Authorization"] = f"Token {token}"
    listed = client.get(f"{base_url}/api/jobs/?page_size=500", timeout=30).json()["results"]
    return [job for job in listed if job["state"] in ("QUEUED", "RUNNING")]


def cancel_jobs(base_url: str, token: str) -> None:
    """Cancel the user's Spark jobs (waiting ones end at once, running ones are asked)."""
    client = requests.Session()
    client.headers["Authorization"] = f"Token {token}"
    for job in active_jobs(base_url, token):
        client.post(f"{base_url}{job['cancel_url']}", timeout=30)


@pytest.fixture(scope="module")
def hx(spark: SparkSession, working: RefreshStack) -> SparkSession:
    """A source table and a materialized table over it, refreshed once."""
    stack = working
    session = spark.newSession()
    for key, value in rest_catalog_conf(stack.server, name="sx").items():
        session.conf.set(key, value)
    session.conf.set("spark.sql.defaultCatalog", "sx")
    session.sql(f"CREATE NAMESPACE IF NOT EXISTS sx.{NS}")
    session.sql(f"CREATE TABLE sx.{NS}.src (id BIGINT, ds STRING, name STRING)")
    session.sql(f"INSERT INTO sx.{NS}.src VALUES (1, '2024-01-01', 'a'), (2, '2024-01-02', 'b')")
    response = stack.statements(GOOD, namespace=NS)
    assert response.status_code == 200, response.text
    run_id = response.json()["results"][0]["run_id"]
    stack.wait_for(
        lambda: stack.run(run_id)["state"] == "SUCCEEDED", timeout=240, what="good's refresh"
    )
    return session


def queries(path: str) -> list[str]:
    """Queries that read the secret file from every position a query has."""
    return [
        f"SELECT value FROM text.`{path}`",
        f"SELECT id, (SELECT max(value) FROM text.`{path}`) AS s FROM src",
        f"SELECT * FROM src WHERE name IN (SELECT value FROM text.`{path}`)",
        f"SELECT * FROM src WHERE EXISTS (SELECT 1 FROM text.`{path}` WHERE value LIKE 'L%')",
        f"WITH s AS (SELECT value FROM text.`{path}`) SELECT * FROM s",
        f"SELECT src.id, s.value FROM src JOIN text.`{path}` s ON true",
        f"SELECT id, x FROM src LATERAL VIEW explode(split((SELECT max(value) FROM "
        f"text.`{path}`), '-')) e AS x",
        f"SELECT /*+ BROADCAST(s) */ s.value FROM src, text.`{path}` s",
        f"SELECT value FROM TEXT.`{path}`",
        f"SELECT value FROM text.`file://{path}`",
        "SELECT value FROM text.`/proc/self/environ`",
        f"SELECT * FROM csv.`{path}`",
        f"SELECT * FROM json.`{path}`",
        "SELECT reflect('java.lang.System', 'getProperty', 'user.dir') AS d FROM src",
        "SELECT java_method('java.lang.System', 'getenv', 'HOME') AS d FROM src",
        "SELECT * FROM spark_catalog.default.src",
        "SELECT * FROM other_catalog.hx.src",
        "SELECT * FROM leak_view",  # a view whose stored SQL reads the file (below)
        "SELECT * FROM reflect_view",  # a view whose stored SQL calls reflect (below)
    ]


def data_changes(path: str) -> list[str]:
    """Console data changes that try to reach outside the materialized table."""
    return [
        f"UPDATE good SET name = (SELECT max(value) FROM text.`{path}`)",
        f"UPDATE good SET name = (SELECT max(value) FROM TEXT.`file://{path}`) WHERE n > 0",
        "UPDATE good SET name = reflect('java.lang.System', 'getProperty', 'user.dir')",
        f"DELETE FROM good WHERE EXISTS (SELECT 1 FROM text.`{path}`)",
        f"MERGE INTO good USING (SELECT '2024-01-01' AS ds, value FROM text.`{path}`) s "
        "ON good.ds = s.ds WHEN MATCHED THEN UPDATE SET good.name = s.value",
        "MERGE INTO good USING leak_view s ON true WHEN MATCHED THEN UPDATE SET good.name = "
        "s.value",
        "UPDATE src SET name = 'changed'",
        "DELETE FROM src",
        "MERGE INTO src USING good ON src.ds = good.ds WHEN MATCHED THEN DELETE",
        "SET spark.sql.runSQLOnFiles=true",
        f"SET spark.sql.runSQLOnFiles=true; SELECT * FROM text.`{path}`",
        "ADD JAR /tmp/evil.jar",
        "CREATE TEMPORARY FUNCTION f AS 'java.lang.String'",
    ]


def iceberg_view(stack: RefreshStack, name: str, sql: str) -> None:
    """A view an engine stores through the Iceberg REST protocol, SQL as sent (the catalog
    is never stricter than engines)."""
    session = stack.server.iceberg_session()
    version = {
        "version-id": 1, "schema-id": 0, "timestamp-ms": 1, "summary": {},
        "representations": [{"type": "sql", "sql": sql, "dialect": "spark"}],
        "default-namespace": [NS],
    }  # fmt: skip
    schema = {
        "type": "struct", "schema-id": 0,
        "fields": [{"id": 0, "name": "value", "type": "string", "required": False}],
    }  # fmt: skip
    response = session.post(
        f"{stack.server.iceberg_uri}/v1/namespaces/{NS}/views",
        json={"name": name, "schema": schema, "view-version": version},
        timeout=30,
    )
    assert response.status_code == 200, response.text


def test_hostile_statements_are_all_refused_and_nothing_leaks(
    stack: RefreshStack, hx: SparkSession, secret: tuple[str, str]
):
    path, text = secret
    base = stack.server.base_url
    api = stack.api
    iceberg_view(stack, "leak_view", f"SELECT value FROM text.`{path}`")
    iceberg_view(stack, "reflect_view", "SELECT reflect('java.lang.System', 'getenv', 'HOME')")
    snapshots = sorted(
        r[0] for r in hx.sql(f"SELECT snapshot_id FROM sx.{NS}.good.snapshots").collect()
    )
    answers: list[tuple[str, requests.Response | Answer]] = []
    browser = stack.server.browser_session()

    def expect_4xx(what: str, response: requests.Response | Answer) -> None:
        """The final answer is a 4xx: a page or an API request that became a Spark job is
        followed to the job's end (and a page asked again then shows the failure)."""
        answers.append((what, response))
        if isinstance(response, requests.Response):
            job = re.search(r'data-job-url="([^"]+)"', response.text)
            if job is not None:  # a page that fills in the job's answer
                finished = stack.job(job.group(1))
                answers.append((what, Answer(200, json.dumps(finished))))
                if response.request.method == "GET":
                    response = browser.get(response.url, timeout=60)
                else:
                    response = Answer(finished["status"] or 500, json.dumps(finished))
                answers.append((what, response))
            elif response.status_code == 202:
                response = stack.follow(response)
                answers.append((what, response))
        assert 400 <= response.status_code < 500, f"{what}: {response.status_code} {response.text}"

    for query in queries(path):
        create = f"CREATE MATERIALIZED TABLE bad FRESHNESS = INTERVAL '1' HOUR AS {query}"
        expect_4xx(create, stack.statements(create, namespace=NS))
        alter = f"ALTER MATERIALIZED TABLE good AS {query}"
        expect_4xx(alter, stack.statements(alter, namespace=NS))
    for statement in data_changes(path):
        expect_4xx(statement, stack.statements(statement, namespace=NS))
        page = browser.post(
            f"{base}/console/",
            data={
                "sql": statement,
                "namespace": NS,
                "csrfmiddlewaretoken": browser.cookies["csrftoken"],
            },
            headers={"Referer": f"{base}/console/"},
            timeout=300,
        )
        expect_4xx(f"console page: {statement}", page)

    mt = f"{base}/api/namespaces/{NS}/materialized-tables/good"
    for config in (
        {"spark.sql.runSQLOnFiles": "true"},
        {"spark.sql.catalog.evil": "org.apache.iceberg.spark.SparkCatalog"},
        {"spark.sql.extensions": "evil.Extensions"},
        {"spark.jars": "/tmp/evil.jar"},
    ):
        expect_4xx(f"refresh config {config}", api.post(f"{mt}/refresh", json={"config": config}))
    for partition in ({"ds": "x'; DROP TABLE t; --"}, {"ds": "2024-13-45"}, {"name": "a"}):
        expect_4xx(
            f"refresh partition {partition}",
            api.post(f"{mt}/refresh", json={"partition": partition}),
        )
    expect_4xx(
        "REFRESH PARTITION",
        stack.statements(
            "ALTER MATERIALIZED TABLE good REFRESH PARTITION (ds = 'x; DROP TABLE t; --')", NS
        ),
    )
    assert stack.statements("ALTER MATERIALIZED TABLE good SUSPEND", NS).status_code == 200
    for options in (
        "'spark.sql.runSQLOnFiles' = 'true'",
        "'spark.sql.catalog.evil' = 'org.apache.iceberg.spark.SparkCatalog'",
    ):
        resume = f"ALTER MATERIALIZED TABLE good RESUME WITH ({options})"
        expect_4xx(resume, stack.statements(resume, NS))
        expect_4xx(f"resume API {options}", api.post(f"{mt}/resume", json={"options": dict(
            [tuple(part.strip().strip("'") for part in options.split("="))]
        )}))  # fmt: skip
    assert stack.statements("ALTER MATERIALIZED TABLE good RESUME", NS).status_code == 200

    views = f"{base}/api/namespaces/{NS}/views"
    expect_4xx(
        "a view over the file",
        api.post(f"{views}/", json={"name": "leak2", "sql": f"SELECT value FROM text.`{path}`"}),
    )
    for view in ("leak_view", "reflect_view"):
        expect_4xx(f"preview of {view}", api.get(f"{views}/{view}/preview", timeout=300))
        expect_4xx(
            f"preview page of {view}",
            browser.get(f"{base}/namespaces/{NS}/views/{view}/?preview=1", timeout=300),
        )
    tables = f"{base}/api/namespaces/{NS}/tables"
    for row_filter in (
        f"name in (SELECT value FROM text.`{path}`)",
        "id = 1) UNION SELECT value FROM text.`/proc/self/environ` --",
        "reflect('java.lang.System', 'getenv', 'HOME') = 'x'",
        "name = 'a'; SET spark.sql.runSQLOnFiles=true",
    ):
        for table in ("src", "good"):
            expect_4xx(
                f"filter {row_filter} on {table}",
                api.get(f"{tables}/{table}/preview", params={"filter": row_filter}),
            )

    # Nothing was written: good keeps its snapshots, src its rows, no new table exists.
    after = sorted(
        r[0] for r in hx.sql(f"SELECT snapshot_id FROM sx.{NS}.good.snapshots").collect()
    )
    assert after == snapshots
    assert sorted(tuple(r) for r in hx.sql(f"SELECT id, name FROM sx.{NS}.src").collect()) == [
        (1, "a"),
        (2, "b"),
    ]
    listed = api.get(f"{base}/api/namespaces/{NS}/materialized-tables/").json()
    assert [item["name"] for item in listed["results"]] == ["good"]

    # The secret is nowhere: answers, the warehouse (tables), the database (history rows
    # and everything else), the logs of the app, the worker and beat.
    needles = [text.encode(), base64.b64encode(text.encode())]
    for what, response in answers:
        assert text not in response.text, f"{what} answered the secret"
    for file in Path(stack.root).rglob("*"):
        if file.is_file():
            content = file.read_bytes()
            for needle in needles:
                assert needle not in content, f"the secret is in {file}"

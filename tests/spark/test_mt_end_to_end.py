"""Materialized tables end to end, as a deployment runs them: the app under gunicorn, a real
Redis, a real Celery worker (its own Spark, kept across refreshes) and a real celery-beat,
a FULL table with FRESHNESS = INTERVAL '10' SECOND over a source table (and tables with
shorter freshness where a test counts ticks: fewer seconds of waiting, the same ticks).

The tests run in order on one stack (a module fixture); each checks one behaviour users
rely on. What the stack did is read from its database (the refresh history) and from the
tables themselves, through Spark and pyiceberg.

Notifications go the same way: a webhook subscribed through the API is posted to by the
worker (the task named alerts.deliver, as the code sends it) and the lost one is sent
again by beat's sweep (alerts.sweep), to a receiver the test serves on its loopback."""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyspark.sql import SparkSession

from tests.live_server import free_port
from tests.refresh_stack import RefreshStack
from tests.spark.conftest import stack_fixture
from tests.webhook_receiver import Receiver

NS = "e2e"
DAILY_QUERY = "SELECT ds, sum(amount) AS total, count(*) AS n FROM orders GROUP BY ds"
TICK = 10  # seconds
#: The freshness of the tables whose tests count their ticks (skips, suspension, failures):
#: a FULL table may tick every few seconds, so those tests wait as many ticks, fewer seconds.
QUICK_TICK = 3
SLOW_TICK = 5


#: A run QUEUED this long is sent to a worker again (a message may have gone down with the
#: worker the kill test SIGKILLs).
STRANDED_AFTER = 20

#: A failed delivery's attempt is retried this many seconds later: time for the test that
#: loses the retry to kill the worker holding it before it is due.
RETRY_AFTER = 8
#: Notifications on the stack: webhooks may reach the test's receiver on 127.0.0.1 (the
#: guard refuses loopback addresses unless ALERTS_ALLOWED_NETWORKS allows them, as in
#: development); beat's sweep runs every 2 s and sends again a delivery 2 s overdue.
ALERTS_ENV = {
    "ALERTS_ALLOWED_NETWORKS": "127.0.0.1/32",
    "ALERTS_SWEEP_SECONDS": "2",
    "ALERTS_RESEND_AFTER_SECONDS": "2",
    "ALERTS_RETRY_BASE_SECONDS": str(RETRY_AFTER),
}


@pytest.fixture(scope="module")
def lineage_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the stack's processes write their OpenLineage events (the client's file
    transport, configured as operators do: OPENLINEAGE_CONFIG names an openlineage.yml)."""
    folder = tmp_path_factory.mktemp("lineage")
    (folder / "openlineage.yml").write_text(
        f"transport:\n  type: file\n  log_file_path: {folder / 'events.jsonl'}\n  append: true\n"
    )
    return folder / "events.jsonl"


stack = stack_fixture(
    "refresh-stack",
    env=lambda request: {
        **ALERTS_ENV,
        "MT_STRANDED_AFTER_SECONDS": str(STRANDED_AFTER),
        "OPENLINEAGE_CONFIG": str(
            request.getfixturevalue("lineage_file").parent / "openlineage.yml"
        ),
    },
)


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    """The webhook receiver the stack's worker posts to. Its port is below the kernel's
    ephemeral range: it goes down and comes back on it, and an outgoing connection of a
    JVM could take an ephemeral one in between."""
    running = Receiver("127.0.0.1", free_port())
    yield running
    running.stop()


@pytest.fixture(scope="module")
def webhook(stack: RefreshStack, receiver: Receiver) -> dict:
    """The receiver subscribed to e2e.slow through the API (by the first test that asks):
    the answer, with the signing secret it shows once."""
    made = stack.api.post(
        f"{stack.server.base_url}/api/subscriptions/",
        json={"materialized_table": f"{NS}.slow", "webhook_url": receiver.url},
        timeout=30,
    )
    assert made.status_code == 201, made.text
    return made.json()


def deliveries(stack: RefreshStack, webhook: dict) -> list[dict]:
    """The subscription's deliveries, newest first, as its API lists them."""
    response = stack.api.get(
        f"{stack.server.base_url}/api/subscriptions/{webhook['id']}/deliveries/", timeout=30
    )
    response.raise_for_status()
    return response.json()["results"]


def runs(stack: RefreshStack, table: str) -> list[dict]:
    """The table's refresh history, oldest first, straight from the app's database."""
    connection = sqlite3.connect(f"file:{Path(stack.server.db_path)}?mode=ro", uri=True)
    connection.row_factory = sqlite3.Row
    try:
        rows = connection.execute(
            "SELECT * FROM refresh_refreshrun WHERE table_name = ? ORDER BY id", (table,)
        ).fetchall()
    finally:
        connection.close()
    parsed = []
    for row in rows:
        item = dict(row)
        for key in ("schedule_time", "queued_at", "started_at", "finished_at"):
            if item[key]:
                moment = datetime.fromisoformat(item[key])
                if moment.tzinfo is not None:  # naive UTC, like datetime.utcnow()
                    moment = moment.astimezone(UTC).replace(tzinfo=None)
                item[key] = moment
        parsed.append(item)
    return parsed


def mt_row(stack: RefreshStack, table: str) -> dict:
    ns, name = table.split(".")
    connection = sqlite3.connect(f"file:{Path(stack.server.db_path)}?mode=ro", uri=True)
    connection.row_factory = sqlite3.Row
    try:
        return dict(
            connection.execute(
                "SELECT mt.* FROM refresh_materializedtable mt "
                "JOIN catalog_catalogobject o ON o.id = mt.table_id "
                "JOIN catalog_namespace n ON n.id = o.namespace_id "
                "WHERE n.name = ? AND o.name = ?",
                (ns, name),
            ).fetchone()
        )
    finally:
        connection.close()


def ok(stack: RefreshStack, sql: str) -> list[dict]:
    response = stack.statements(sql, namespace=NS)
    assert response.status_code == 200, response.text
    return response.json()["results"]


def rows_of(spark: SparkSession, sql: str) -> list[tuple]:
    return sorted(tuple(row) for row in spark.sql(sql).collect())


def snapshot_ids(spark: SparkSession, table: str) -> list[int]:
    return [r[0] for r in spark.sql(f"SELECT snapshot_id FROM {table}.snapshots").collect()]


def current_summary(stack: RefreshStack, table: str) -> dict[str, str]:
    """The current snapshot's summary as an engine reads it through the catalog (pyiceberg)."""
    catalog = RestCatalog("st", uri=stack.server.iceberg_uri, credential=stack.server.credential)
    snapshot = catalog.load_table(table).current_snapshot()
    return snapshot.summary.additional_properties if snapshot else {}


def source_state(stack: RefreshStack, table: str) -> dict:
    """What a refresh-state records of a source read at its current snapshot."""
    catalog = RestCatalog("st", uri=stack.server.iceberg_uri, credential=stack.server.credential)
    loaded = catalog.load_table(table)
    *namespace, name = table.split(".")
    return {
        "type": "table",
        "namespace": namespace,
        "name": name,
        "uuid": str(loaded.metadata.table_uuid),
        "snapshot-id": loaded.current_snapshot().snapshot_id,
    }


def created_and_refreshed(stack: RefreshStack, statement: str) -> dict:
    """Run a CREATE MATERIALIZED TABLE through the console and wait for its first refresh,
    which must succeed (a failure ends the wait at once, with the run). The created row."""
    [created] = ok(stack, statement)
    assert created["run_id"] is not None, created
    stack.wait_for(
        lambda: stack.run(created["run_id"])["state"] in ("SUCCEEDED", "FAILED"),
        timeout=180,
        what="the first refresh",
    )
    run = stack.run(created["run_id"])
    assert run["state"] == "SUCCEEDED", run
    return created


def test_a_full_table_is_created_and_populated_by_its_first_refresh(stack, st):
    st.sql(f"CREATE NAMESPACE IF NOT EXISTS st.{NS}")
    st.sql(f"CREATE TABLE st.{NS}.orders (id BIGINT NOT NULL, ds STRING, amount DOUBLE)")
    st.sql(
        f"INSERT INTO st.{NS}.orders VALUES (1, 'a', 1.0), (2, 'a', 2.0), (3, 'b', 5.0), "
        "(4, 'c', 7.5)"
    )
    created = created_and_refreshed(
        stack,
        "CREATE MATERIALIZED TABLE daily PARTITIONED BY (ds) "
        f"FRESHNESS = INTERVAL '{TICK}' SECOND REFRESH_MODE = FULL AS {DAILY_QUERY}",
    )
    run = stack.run(created["run_id"])
    assert (run["trigger"], run["action"]) == ("CREATE", "FULL")
    assert run["rows_written"] == 3 and run["snapshot_id"] in snapshot_ids(st, "st.e2e.daily")
    assert rows_of(st, "SELECT * FROM st.e2e.daily") == rows_of(
        st, DAILY_QUERY.replace("FROM orders", "FROM st.e2e.orders")
    )
    assert mt_row(stack, "e2e.daily")["state"] == "ACTIVATED"
    # The snapshot says what it answers: the definition version and the source's snapshot.
    state = json.loads(current_summary(stack, "e2e.daily")["refresh-state"])
    assert state["view-version-id"] == 1
    assert state["source-states"] == [source_state(stack, "e2e.orders")]
    assert abs(state["refresh-start-timestamp-ms"] / 1000 - time.time()) < 300


def test_the_first_refresh_is_sent_as_openlineage_start_and_complete_events(
    stack, st, lineage_file
):
    [first] = [run for run in runs(stack, "e2e.daily") if run["trigger"] == "CREATE"]
    sources = json.loads(first["source_snapshots"])

    def events() -> list[dict]:
        lines = lineage_file.read_text().splitlines() if lineage_file.exists() else []
        return [e for e in map(json.loads, lines) if e["job"]["name"] == "e2e.daily"]

    def of_first() -> list[dict]:
        sent = events()
        [complete] = [
            e
            for e in sent
            if e["eventType"] == "COMPLETE"
            and e["outputs"][0]["facets"].get("version", {}).get("datasetVersion")
            == str(first["snapshot_id"])
        ] or [None]
        if complete is None:
            return []
        return [e for e in sent if e["run"]["runId"] == complete["run"]["runId"]]

    start, complete = stack.wait_for(of_first, timeout=30, what="the first refresh's events")
    assert (start["eventType"], complete["eventType"]) == ("START", "COMPLETE")
    assert complete["job"]["facets"]["sql"]["query"] == DAILY_QUERY
    [source] = complete["inputs"]
    assert source["name"] == "e2e.orders"
    assert source["facets"]["version"]["datasetVersion"] == str(sources["e2e.orders"])
    assert str(sources["e2e.orders"]) == str(snapshot_ids(st, "st.e2e.orders")[-1])
    [output] = complete["outputs"]
    assert [f["name"] for f in output["facets"]["schema"]["fields"]] == ["ds", "total", "n"]
    assert output["outputFacets"]["outputStatistics"]["rowCount"] == 3


def test_it_follows_appends_to_the_source_within_two_ticks(stack, st):
    st.sql(f"INSERT INTO st.{NS}.orders VALUES (5, 'a', 10.0), (6, 'd', 1.0)")
    appended_at = datetime.now(UTC).replace(tzinfo=None)

    def refreshed():
        return [
            r
            for r in runs(stack, "e2e.daily")
            if r["trigger"] == "SCHEDULED"
            and r["state"] == "SUCCEEDED"
            and r["queued_at"] >= appended_at
        ]

    [run, *_] = stack.wait_for(refreshed, timeout=3 * TICK + 60, what="a scheduled refresh")
    # Queued by one of the next two ticks; its schedule time is that tick's planned time.
    assert run["queued_at"] - appended_at <= timedelta(seconds=2 * TICK)
    assert run["schedule_time"] <= run["queued_at"]
    assert run["action"] == "FULL" and run["rows_written"] == 4
    assert rows_of(st, "SELECT * FROM st.e2e.daily") == rows_of(
        st, DAILY_QUERY.replace("FROM orders", "FROM st.e2e.orders")
    )


def test_ticks_with_no_change_are_skipped_without_a_spark_job(stack, st):
    # A table of its own that ticks every QUICK_TICK seconds (the next test uses it too).
    created_and_refreshed(
        stack,
        f"CREATE MATERIALIZED TABLE quick FRESHNESS = INTERVAL '{QUICK_TICK}' SECOND "
        f"REFRESH_MODE = FULL AS {DAILY_QUERY}",
    )
    before = snapshot_ids(st, "st.e2e.quick")
    assert before, "the first refresh committed"
    last = runs(stack, "e2e.quick")[-1]["id"]

    def skipped():
        later = [r for r in runs(stack, "e2e.quick") if r["id"] > last and r["finished_at"]]
        return later if len(later) >= 2 else None

    later = stack.wait_for(skipped, timeout=4 * QUICK_TICK + 30, what="two more ticks")
    assert all(r["trigger"] == "SCHEDULED" for r in later), later
    assert all(r["state"] == "SKIPPED" and r["action"] == "NO_DATA" for r in later), later
    assert all(r["snapshot_id"] is None for r in later)
    assert snapshot_ids(st, "st.e2e.quick") == before, "no job, no commit"


def test_after_suspend_no_run_happens_for_three_ticks_and_after_resume_runs_happen(stack):
    ok(stack, "ALTER MATERIALIZED TABLE quick SUSPEND")
    assert mt_row(stack, "e2e.quick")["state"] == "SUSPENDED"
    time.sleep(2)  # a tick already sent before the suspend may still finish
    last = runs(stack, "e2e.quick")[-1]["id"]
    time.sleep(3 * QUICK_TICK + 2)
    assert [r["id"] for r in runs(stack, "e2e.quick") if r["id"] > last] == []

    ok(stack, "ALTER MATERIALIZED TABLE quick RESUME")
    assert mt_row(stack, "e2e.quick")["state"] == "ACTIVATED"
    stack.wait_for(
        lambda: [r for r in runs(stack, "e2e.quick") if r["id"] > last],
        timeout=2 * QUICK_TICK + 30,
        what="a run after RESUME",
    )
    # Its ticks are done with: suspended again, it adds no load to the tests after.
    ok(stack, "ALTER MATERIALIZED TABLE quick SUSPEND")


def _files_by_partition(spark: SparkSession, table: str) -> dict[str, set[str]]:
    files: dict[str, set[str]] = {}
    for row in spark.sql(f"SELECT partition.ds AS ds, file_path FROM {table}.files").collect():
        files.setdefault(row["ds"], set()).add(row["file_path"])
    return files


def test_a_partition_refresh_rewrites_only_that_partition(stack, st):
    ok(stack, "ALTER MATERIALIZED TABLE daily SUSPEND")  # no tick races the manual refresh
    time.sleep(2)
    stack.wait_for(
        lambda: all(r["finished_at"] for r in runs(stack, "e2e.daily")),
        timeout=60,
        what="runs in flight to finish",
    )
    before_rows = dict((r[0], r[1:]) for r in rows_of(st, "SELECT * FROM st.e2e.daily"))
    before_files = _files_by_partition(st, "st.e2e.daily")
    st.sql(f"INSERT INTO st.{NS}.orders VALUES (7, 'a', 100.0), (8, 'b', 100.0)")

    [result] = ok(stack, "ALTER MATERIALIZED TABLE daily REFRESH PARTITION (ds = 'a')")
    stack.wait_for(
        lambda: stack.run(result["run_id"])["state"] in ("SUCCEEDED", "FAILED"),
        timeout=120,
        what="the partition refresh",
    )
    run = stack.run(result["run_id"])
    assert (run["state"], run["action"], run["partition"]) == (
        "SUCCEEDED",
        "PARTITION",
        {"ds": "a"},
    )

    after_rows = dict((r[0], r[1:]) for r in rows_of(st, "SELECT * FROM st.e2e.daily"))
    assert after_rows["a"] == (113.0, 4)
    assert after_rows["b"] == before_rows["b"], "b keeps its rows until its own refresh"
    after_files = _files_by_partition(st, "st.e2e.daily")
    assert after_files["b"] == before_files["b"] and after_files["c"] == before_files["c"]
    assert after_files["a"] != before_files["a"]
    ok(stack, "ALTER MATERIALIZED TABLE daily RESUME")


def test_spark_and_pyiceberg_read_the_same_rows_through_the_catalog(stack, st):
    catalog = RestCatalog("st", uri=stack.server.iceberg_uri, credential=stack.server.credential)
    arrow = catalog.load_table(f"{NS}.daily").scan().to_arrow()
    columns = [arrow.column(c).to_pylist() for c in ("ds", "total", "n")]
    by_pyiceberg = sorted(zip(*columns, strict=True))
    assert by_pyiceberg == rows_of(st, "SELECT ds, total, n FROM st.e2e.daily")
    properties = catalog.load_table(f"{NS}.daily").properties
    assert properties["lakeview.materialized-table.query"] == DAILY_QUERY
    assert properties["lakeview.materialized-table.freshness"] == f"INTERVAL '{TICK}' SECOND"


# A refresh that takes long enough to be killed in: Spark sums 600 million numbers per row
# of `pauses` (about 3 s a row on two cores; the sandbox allows no sleep by reflection).
SLOW_QUERY = (
    "SELECT p.id, sum(r.id % 7) AS slept FROM pauses p CROSS JOIN range(600000000) r GROUP BY p.id"
)


def test_killing_the_worker_mid_refresh_fails_the_run_and_the_next_tick_succeeds(stack, st):
    st.sql(f"CREATE TABLE st.{NS}.pauses (id BIGINT)")
    st.sql(f"INSERT INTO st.{NS}.pauses VALUES (1)")
    created_and_refreshed(
        stack,
        f"CREATE MATERIALIZED TABLE slow FRESHNESS = INTERVAL '{SLOW_TICK}' SECOND "
        f"REFRESH_MODE = FULL AS {SLOW_QUERY}",
    )
    good = snapshot_ids(st, "st.e2e.slow")
    inserting = datetime.now(UTC).replace(tzinfo=None)
    st.sql(f"INSERT INTO st.{NS}.pauses VALUES (2)")

    # A run started since the insert (not a tick with no change, RUNNING for an instant).
    running = stack.wait_for(
        lambda: [
            r
            for r in runs(stack, "e2e.slow")
            if r["state"] == "RUNNING" and r["started_at"] >= inserting
        ],
        timeout=3 * SLOW_TICK + 30,
        what="a running refresh",
        every=0.2,
    )[0]
    time.sleep(1.5)  # well inside the 6 s the job takes over two rows
    stack.kill_worker()
    assert snapshot_ids(st, "st.e2e.slow") == good, "the table stays at its last good snapshot"
    stack.start_worker()

    failed = stack.wait_for(
        lambda: next(
            (r for r in runs(stack, "e2e.slow") if r["id"] == running["id"] and r["finished_at"]),
            None,
        ),
        timeout=90,
        what="the abandoned run to be failed",
    )
    assert failed["state"] == "FAILED" and "stopped" in failed["error"]
    assert snapshot_ids(st, "st.e2e.slow") == good

    succeeded = stack.wait_for(
        lambda: [
            r
            for r in runs(stack, "e2e.slow")
            if r["id"] > running["id"] and r["state"] == "SUCCEEDED"
        ],
        timeout=4 * SLOW_TICK + 120,
        what="a tick after the kill to succeed",
    )
    assert succeeded[0]["trigger"] == "SCHEDULED"
    assert rows_of(st, "SELECT id FROM st.e2e.slow") == [(1,), (2,)]
    # A tick the killed worker held (waiting for a thread, its message with it) is sent
    # again once QUEUED for STRANDED_AFTER: none stays QUEUED until Redis gives it back.
    stack.wait_for(
        lambda: not [
            r
            for r in runs(stack, "e2e.slow")
            if r["state"] == "QUEUED" and r["id"] < succeeded[0]["id"]
        ],
        timeout=STRANDED_AFTER + 60,
        what="no run from before the kill left QUEUED",
    )


def test_a_failing_refresh_reaches_a_subscribed_webhook_signed_through_the_worker(
    stack, st, receiver, request
):
    # The source disappears under the table: every refresh started from now on fails.
    dropped_at = datetime.now(UTC).replace(tzinfo=None)
    st.sql(f"DROP TABLE st.{NS}.pauses")
    # Subscribed once no run that read the source before it went is left to succeed (its
    # success would be news: RECOVERED), and a run since has failed.
    stack.wait_for(
        lambda: not [
            r
            for r in runs(stack, "e2e.slow")
            if not r["finished_at"] and r["queued_at"] < dropped_at
        ]
        and [
            r
            for r in runs(stack, "e2e.slow")
            if r["state"] == "FAILED" and r["queued_at"] >= dropped_at
        ],
        timeout=3 * SLOW_TICK + 120,
        what="a failed run after the drop",
    )
    webhook = request.getfixturevalue("webhook")
    [posted] = stack.wait_for(
        lambda: receiver.requests[:1], timeout=3 * SLOW_TICK + 60, what="the FAILED message"
    )
    assert receiver.events(webhook["secret"]) == ["FAILED"]  # signed with its secret
    assert posted["path"] == "/hooks/lakeview"
    assert posted["headers"]["X-Lakeview-Event"] == "FAILED"
    body = json.loads(posted["body"])
    assert body["table"] == f"{NS}.slow"
    run = stack.run(body["run"]["id"])
    assert (run["namespace"], run["name"], run["state"]) == (NS, "slow", "FAILED")
    assert body["message"] == f"Refresh run {run['id']} of {NS}.slow failed"
    assert "pauses" in body["error"] and body["error"] == run["error"][:2000]
    listed = deliveries(stack, webhook)
    assert len(listed) == 1, listed
    [delivery] = listed
    assert str(delivery["id"]) == posted["headers"]["X-Lakeview-Delivery"]
    assert (delivery["status"], delivery["attempts"], delivery["response_code"]) == (
        "DELIVERED",
        1,
        200,
    )


def test_five_failing_refreshes_suspend_the_table_with_the_reason_shown(
    stack, st, receiver, webhook
):
    # The source disappeared under the table (above): every refresh fails.
    row = stack.wait_for(
        lambda: (lambda r: r if r["state"] == "SUSPENDED" else None)(mt_row(stack, "e2e.slow")),
        timeout=7 * SLOW_TICK + 120,
        what="the table to suspend itself",
    )
    failures = [r for r in runs(stack, "e2e.slow") if r["state"] == "FAILED"]
    assert len(failures) >= 5
    assert "5 consecutive failed refreshes" in row["suspended_reason"]
    assert "pauses" in row["suspended_reason"]
    page = stack.api.get(f"{stack.server.base_url}/api/namespaces/{NS}/materialized-tables/slow/")
    assert page.json()["state"] == "SUSPENDED"
    assert "consecutive failed refreshes" in page.json()["suspended_reason"]
    # One message for the spell of failures, one for the suspension.
    stack.wait_for(lambda: len(receiver.requests) >= 2, timeout=30, what="the SUSPENDED message")
    assert receiver.events(webhook["secret"]) == ["FAILED", "SUSPENDED"]
    assert receiver.bodies()[1]["message"] == row["suspended_reason"]


def test_a_message_lost_with_the_worker_holding_its_retry_is_sent_again_by_beats_sweep(
    stack, receiver, webhook
):
    receiver.stop()  # down: its connections are refused
    sent = stack.api.post(
        f"{stack.server.base_url}/api/subscriptions/{webhook['id']}/test", timeout=30
    )
    assert sent.status_code == 202, sent.text
    delivery_id = sent.json()["id"]

    def delivery() -> dict:
        return next(d for d in deliveries(stack, webhook) if d["id"] == delivery_id)

    failed = stack.wait_for(
        lambda: (lambda d: d if d["error"] else None)(delivery()),
        timeout=60,
        what="the first attempt to fail",
    )
    assert (failed["status"], failed["attempts"]) == ("PENDING", 1)
    assert "ConnectionRefusedError" in failed["error"]
    # The worker took the retry's message at once and holds it until it is due
    # (RETRY_AFTER s): killed, it takes the message with it (Redis gives an unacknowledged
    # message back only after an hour).
    time.sleep(1)
    stack.kill_worker()
    receiver.start()  # back, on the same port
    stack.start_worker()

    stack.wait_for(lambda: receiver.requests[2:], timeout=RETRY_AFTER + 90, what="the lost message")
    assert receiver.events(webhook["secret"]) == ["FAILED", "SUSPENDED", "TEST"]
    assert receiver.bodies()[2]["delivery"] == delivery_id
    done = delivery()
    assert (done["status"], done["attempts"]) == ("DELIVERED", 2)
    # By beat's sweep: its pass in the new worker says which deliveries it sent again.
    lost = re.compile(rf"deliveries whose task was lost: (\d+, )*{delivery_id}\b")
    assert lost.search(stack.log("worker", lines=20000)), stack.log("worker")


#: Hours of Spark's time over the four orders: a refresh nobody would wait for.
RUNAWAY_QUERY = (
    "SELECT o.ds, sum(r.id % 7) AS spun FROM orders o CROSS JOIN range(1000000000000) r "
    "GROUP BY o.ds"
)


def ended(stack: RefreshStack, run_id: int, *, timeout: float, what: str) -> dict:
    return stack.wait_for(
        lambda: (lambda run: run if run["finished_at"] else None)(stack.run(run_id)),
        timeout=timeout,
        what=what,
    )


def test_a_runaway_refresh_is_stopped_by_a_cancel_or_its_time_limit_and_writes_nothing(stack, st):
    [created] = ok(
        stack,
        "CREATE MATERIALIZED TABLE runaway FRESHNESS = INTERVAL '1' HOUR REFRESH_MODE = FULL "
        f"AS {RUNAWAY_QUERY}",
    )
    run_id = created["run_id"]
    stack.wait_for(
        lambda: stack.run(run_id)["state"] == "RUNNING", timeout=120, what="the refresh to start"
    )
    time.sleep(3)  # its Spark job under way
    asked = stack.api.post(f"{stack.server.base_url}/api/refresh-runs/{run_id}/cancel", timeout=30)
    assert asked.status_code == 200, asked.text
    assert asked.json()["cancel_requested_at"] and asked.json()["cancel_requested_by"]
    started = time.monotonic()
    cancelled = ended(stack, run_id, timeout=60, what="the cancelled run to end")
    print(f"cancelled run ended {time.monotonic() - started:.1f} s after the ask")
    assert cancelled["state"] == "CANCELLED", cancelled
    assert cancelled["error"].startswith("Cancelled by ") and "unchanged" in cancelled["error"]
    assert snapshot_ids(st, "st.e2e.runaway") == []

    # The same query under a table's own limit of 3 s: stopped there, failed, saying why.
    [bounded] = ok(
        stack,
        "CREATE MATERIALIZED TABLE bounded WITH ('refresh.timeout-seconds' = '3') "
        f"FRESHNESS = INTERVAL '1' HOUR REFRESH_MODE = FULL AS {RUNAWAY_QUERY}",
    )
    failed = ended(stack, bounded["run_id"], timeout=120, what="the run past its limit to end")
    assert failed["state"] == "FAILED", failed
    assert failed["error"].startswith("Timed out: stopped after 3 s"), failed["error"]
    assert failed["duration_seconds"] < 30
    assert snapshot_ids(st, "st.e2e.bounded") == []

    # The worker's threads are free: a refresh by hand of another table runs and succeeds.
    for name in ("runaway", "bounded"):
        ok(stack, f"DROP MATERIALIZED TABLE {name}")
    [refreshed] = ok(stack, "ALTER MATERIALIZED TABLE daily REFRESH")
    done = ended(stack, refreshed["run_id"], timeout=120, what="a refresh after the stops")
    assert done["state"] == "SUCCEEDED", done


def test_a_worker_whose_spark_jvm_died_starts_a_new_one_for_the_next_refresh(stack, st):
    # An OutOfMemoryError in any run ends the JVM every table's refreshes share; the worker
    # process lives on. Before, every later job failed ("Connection refused") until someone
    # restarted the worker, and each table suspended itself after five ticks.
    stack.kill_jvm(stack.worker)
    [refreshed] = ok(stack, "ALTER MATERIALIZED TABLE daily REFRESH")
    done = ended(stack, refreshed["run_id"], timeout=180, what="a refresh after the JVM died")
    assert done["state"] == "SUCCEEDED", done
    assert "Spark JVM has exited; starting a new one" in stack.log("worker", lines=2000)
    assert rows_of(st, "SELECT ds, n FROM st.e2e.daily") == rows_of(
        st, f"SELECT ds, count(*) FROM st.{NS}.orders GROUP BY ds"
    )


def test_view_columns_sqlglot_cannot_type_are_typed_by_the_workers_spark(stack):
    asked = stack.api.post(
        f"{stack.server.base_url}/api/namespaces/{NS}/views/",
        json={
            "name": "monthly",
            "sql": "SELECT date_trunc('MONTH', to_timestamp(ds)) AS m, map(ds, amount) AS mm, "
            "id FROM orders",
        },
        timeout=30,
    )
    # sqlglot cannot type m and mm: the create is a job a worker's Spark runs.
    assert asked.status_code == 202, asked.text
    response = stack.follow(asked)
    assert response.status_code == 201, response.text
    catalog = RestCatalog("st", uri=stack.server.iceberg_uri, credential=stack.server.credential)
    schema = catalog.load_view(f"{NS}.monthly").schema()
    types = {field.name: str(field.field_type) for field in schema.fields}
    assert types["m"] == "timestamptz" and types["mm"] == "map<string, double>"
    assert types["id"] == "long"


def test_a_views_decimal_sum_is_typed_by_spark_and_spark_reads_the_view(stack, st):
    """sqlglot would store SUM of a decimal(10, 2) as decimal(10, 2); Spark's is
    decimal(20, 2), and Spark refuses to read a view stored narrower ("Cannot up cast")."""
    total = "sum(CAST(amount AS DECIMAL(10, 2)))"
    sql = f"SELECT ds, {total} AS total FROM orders GROUP BY ds"
    asked = stack.api.post(
        f"{stack.server.base_url}/api/namespaces/{NS}/views/",
        json={"name": "decimal_totals", "sql": sql},
        timeout=30,
    )
    assert asked.status_code == 202, asked.text  # a job: the worker's Spark types it
    response = stack.follow(asked)
    assert response.status_code == 201, response.text
    with RestCatalog(
        "st", uri=stack.server.iceberg_uri, credential=stack.server.credential
    ) as catalog:
        schema = catalog.load_view(f"{NS}.decimal_totals").schema()
    types = [(field.name, str(field.field_type)) for field in schema.fields]
    assert types == [("ds", "string"), ("total", "decimal(20, 2)")]
    assert rows_of(st, f"SELECT * FROM st.{NS}.decimal_totals") == rows_of(
        st, f"SELECT ds, {total} FROM st.{NS}.orders GROUP BY ds"
    )


def test_a_views_preview_is_read_by_the_workers_spark_and_gives_sparks_rows(stack, st):
    asked = stack.api.get(
        f"{stack.server.base_url}/api/namespaces/{NS}/views/monthly/preview",
        params={"filter": "id > 2 and mm is not null", "columns": ["id", "m"]},
        timeout=30,
    )
    assert asked.status_code == 202, asked.text
    response = stack.follow(asked)

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["read_by"] == "spark" and body["pruning"] is None
    assert [c["name"] for c in body["columns"]] == ["id", "m"]
    expected = rows_of(st, "SELECT id FROM st.e2e.monthly WHERE id > 2")
    assert sorted(row[0] for row in body["rows"]) == [row[0] for row in expected]
    refused = stack.api.get(
        f"{stack.server.base_url}/api/namespaces/{NS}/views/monthly/preview",
        params={"filter": "nope = 1"},
        timeout=30,
    )
    assert refused.status_code == 400 and "nope" in refused.json()["error"]


def test_an_attached_table_with_equality_deletes_is_previewed_by_the_workers_spark(spark, stack):
    """pyiceberg cannot apply equality deletes: the preview goes to a worker's Spark, which
    reads the attached table through the app's REST catalog, and shows no deleted row."""
    from tests.spark import iceberg_tables

    writer = spark.newSession()  # its own catalogs: the shared session's stay as they are
    prefix = "spark.sql.catalog.outside"
    writer.conf.set(prefix, "org.apache.iceberg.spark.SparkCatalog")
    writer.conf.set(f"{prefix}.type", "hadoop")
    writer.conf.set(f"{prefix}.warehouse", str(stack.root / "external"))
    # Never the shared session's JDBC catalog: a second instance on its SQLite file would
    # hold it locked under the other tests' writes.
    writer.conf.set("spark.sql.defaultCatalog", "outside")
    writer.sql(
        "CREATE TABLE outside.db.events (id bigint, kind string) USING iceberg "
        "TBLPROPERTIES ('format-version'='2')"
    )
    writer.sql("INSERT INTO outside.db.events SELECT id, 'k' || (id % 3) FROM range(12)")
    iceberg_tables.add_equality_deletes(writer, "outside.db.events", "id", [2, 5, 11])
    base = stack.server.base_url
    attached = stack.api.post(
        f"{base}/api/namespaces/{NS}/tables/attach",
        json={"name": "events", "location": str(stack.root / "external" / "db" / "events")},
        timeout=60,
    )
    assert attached.status_code == 201, attached.text

    response = stack.follow(
        stack.api.get(
            f"{base}/api/namespaces/{NS}/tables/events/preview",
            params={"filter": "id < 8", "columns": ["id"]},
            timeout=30,
        )
    )

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["read_by"] == "spark" and "equality deletes" in body["note"]
    assert sorted(row[0] for row in body["rows"]) == [0, 1, 3, 4, 6, 7]
    # Engines load it through the catalog; writes to it are refused.
    from pyiceberg.exceptions import ForbiddenError

    catalog = RestCatalog("st", uri=stack.server.iceberg_uri, credential=stack.server.credential)
    loaded = catalog.load_table(f"{NS}.events")
    assert loaded.metadata_location.endswith("v3.metadata.json")
    with pytest.raises(ForbiddenError, match="attached read-only"):
        loaded.transaction().set_properties(owner="me").commit_transaction()


def test_the_console_runs_update_and_delete_on_a_materialized_table_with_spark(stack, st):
    [result] = ok(stack, "DELETE FROM daily WHERE ds = 'c'")
    assert "next full refresh overwrites" in result["message"]
    # A person's change, not a refresh: no refresh state, and who made it.
    summary = current_summary(stack, "e2e.daily")
    assert "refresh-state" not in summary
    assert summary["lakeview.change"] == "user" and summary["lakeview.changed-by"]
    assert "c" not in {row[0] for row in rows_of(st, "SELECT ds FROM st.e2e.daily")}
    # The table's preview (pyiceberg, deletes applied) gives exactly Spark's rows.
    preview = stack.api.get(
        f"{stack.server.base_url}/api/namespaces/{NS}/tables/daily/preview",
        params={"columns": ["ds", "total", "n"]},
        timeout=60,
    ).json()
    assert preview["read_by"] == "pyiceberg"
    assert sorted(tuple(row) for row in preview["rows"]) == rows_of(
        st, "SELECT ds, total, n FROM st.e2e.daily"
    )

    response = stack.statements("UPDATE daily SET total = 0 WHERE nosuchcolumn = 1", NS)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["line"] == 1 and "nosuchcolumn" in error["message"].lower()


def test_a_scheduled_run_refreshes_only_the_partition_its_tick_minus_freshness_falls_in(stack, st):
    created_and_refreshed(
        stack,
        "CREATE MATERIALIZED TABLE by_day PARTITIONED BY (ds) "
        "WITH ('partition.fields.ds.date-formatter' = 'yyyy-MM-dd') "
        f"FRESHNESS = INTERVAL '{TICK}' SECOND REFRESH_MODE = FULL AS {DAILY_QUERY}",
    )
    before = _files_by_partition(st, "st.e2e.by_day")
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    st.sql(f"INSERT INTO st.{NS}.orders VALUES (20, '{today}', 3.0), (21, 'a', 1000.0)")
    appended_at = datetime.now(UTC).replace(tzinfo=None)

    [run, *_] = stack.wait_for(
        lambda: [
            r
            for r in runs(stack, "e2e.by_day")
            if r["trigger"] == "SCHEDULED"
            and r["state"] == "SUCCEEDED"
            and r["queued_at"] >= appended_at
        ],
        timeout=3 * TICK + 60,
        what="a scheduled partition refresh",
    )
    expected = (run["schedule_time"] - timedelta(seconds=TICK)).strftime("%Y-%m-%d")
    assert run["action"] == "PARTITION" and f'"ds": "{expected}"' in run["partition"]
    rows = dict((r[0], r[1:]) for r in rows_of(st, "SELECT * FROM st.e2e.by_day"))
    if expected == today:  # not across midnight
        assert rows[today] == (3.0, 1)
    assert rows["a"][0] < 1000, "partition a is not this tick's: it keeps its rows"
    after = _files_by_partition(st, "st.e2e.by_day")
    assert after["a"] == before["a"] and after["b"] == before["b"]


# A primary key's columns are non-null: Spark derives that coalesce(...) is.
KEYED_QUERY = (
    "SELECT coalesce(ds, '-') AS day, sum(amount) AS total, count(*) AS n FROM orders "
    "GROUP BY coalesce(ds, '-')"
)


def _refresh(stack: RefreshStack, table: str, **body) -> dict:
    response = stack.api.post(
        f"{stack.server.base_url}/api/namespaces/{NS}/materialized-tables/{table}/refresh",
        json=body,
        timeout=30,
    )
    assert response.status_code == 202, response.text
    run_id = response.json()["jobId"]
    stack.wait_for(
        lambda: stack.run(run_id)["state"] in ("SUCCEEDED", "FAILED", "SKIPPED"),
        timeout=120,
        what=f"refresh {run_id} of {table}",
    )
    return stack.run(run_id)


def test_refreshes_apply_appends_incrementally_and_say_why_when_they_recompute(stack, st):
    created = created_and_refreshed(
        stack,
        "CREATE MATERIALIZED TABLE keyed (PRIMARY KEY (day) NOT ENFORCED) "
        f"FRESHNESS = INTERVAL '1' DAY REFRESH_MODE = FULL AS {KEYED_QUERY}",
    )
    assert stack.run(created["run_id"])["action"] == "FULL"
    expected_sql = KEYED_QUERY.replace("FROM orders", f"FROM st.{NS}.orders")

    st.sql(f"INSERT INTO st.{NS}.orders VALUES (30, 'a', 0.5), (31, 'zz', 2.0)")
    run = _refresh(stack, "keyed")
    assert (run["state"], run["action"]) == ("SUCCEEDED", "INCREMENTAL"), (
        run["reason"],
        run["error"],
    )
    assert run["reason"] == (
        f"incremental: 1 source snapshot appended 2 rows ({NS}.orders +2 in 1); 2 keys recomputed"
    )
    assert rows_of(st, f"SELECT * FROM st.{NS}.keyed") == rows_of(st, expected_sql)
    # The MERGE's snapshot records the source snapshot the incremental refresh read to.
    state = json.loads(current_summary(stack, f"{NS}.keyed")["refresh-state"])
    assert state["source-states"] == [source_state(stack, f"{NS}.orders")]

    # A change touching more than the share of the source the table allows is FULL
    # (adaptive: a full refresh is then the cheaper).
    ok(
        stack,
        "ALTER MATERIALIZED TABLE keyed SET ('refresh.incremental.max-change-ratio' = '0.01')",
    )
    st.sql(f"DELETE FROM st.{NS}.orders WHERE id = 31")
    run = _refresh(stack, "keyed")
    assert (run["state"], run["action"]) == ("SUCCEEDED", "FULL"), (run["reason"], run["error"])
    assert run["reason"].startswith(f"full: source {NS}.orders changed "), run
    assert "refresh.incremental.max-change-ratio (0.01)" in run["reason"]
    assert rows_of(st, f"SELECT * FROM st.{NS}.keyed") == rows_of(st, expected_sql)

    # Strict: no share is too large; a MERGE that updates and inserts is applied by key.
    ok(stack, "ALTER MATERIALIZED TABLE keyed SET ('refresh.incremental' = 'strict')")
    st.sql(
        f"MERGE INTO st.{NS}.orders t USING (SELECT * FROM VALUES (30L, 'b', 4.0D), "
        "(40L, 'zz', 1.5D) AS s(id, ds, amount)) s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET t.ds = s.ds, t.amount = s.amount "
        "WHEN NOT MATCHED THEN INSERT *"
    )
    merged = snapshot_ids(st, f"st.{NS}.orders")[-1]
    run = _refresh(stack, "keyed")
    assert (run["state"], run["action"]) == ("SUCCEEDED", "INCREMENTAL"), (
        run["reason"],
        run["error"],
    )
    # Order 30 moved from day 'a' to 'b', order 40 is new on 'zz': three days recomputed.
    assert run["reason"] == (
        f"incremental: {NS}.orders changed by an overwrite in snapshot {merged} "
        "(1 row deleted, 2 inserted); 3 keys recomputed"
    )
    assert rows_of(st, f"SELECT * FROM st.{NS}.keyed") == rows_of(st, expected_sql)

    st.sql(f"INSERT INTO st.{NS}.orders VALUES (32, 'a', 0.25)")
    run = _refresh(stack, "keyed", full=True)
    assert (run["action"], run["reason"]) == ("FULL", "full: a full refresh was asked for")

    ok(stack, "ALTER MATERIALIZED TABLE keyed SET ('refresh.incremental' = 'off')")
    st.sql(f"INSERT INTO st.{NS}.orders VALUES (33, 'a', 0.125)")
    run = _refresh(stack, "keyed")
    assert run["action"] == "FULL"
    assert run["reason"] == "full: incremental refreshes are off (refresh.incremental = 'off')"
    assert rows_of(st, f"SELECT * FROM st.{NS}.keyed") == rows_of(st, expected_sql)

    page = stack.api.get(
        f"{stack.server.base_url}/api/namespaces/{NS}/materialized-tables/keyed/runs/", timeout=30
    )
    assert page.status_code == 200, page.text
    reasons = [r["reason"] for r in page.json()["results"]]  # the history says why, each run
    assert any(reason.startswith("incremental: ") for reason in reasons)
    assert any(reason.startswith("full: source ") for reason in reasons)


def _view(stack: RefreshStack, name: str, sql: str, *, replace: bool = False) -> None:
    """Create (or replace) a view through the API, as a user does (the worker types it)."""
    url = f"{stack.server.base_url}/api/namespaces/{NS}/views/"
    if replace:
        asked = stack.api.put(f"{url}{name}/", json={"sql": sql}, timeout=30)
    else:
        asked = stack.api.post(url, json={"name": name, "sql": sql}, timeout=30)
    response = stack.follow(asked) if asked.status_code == 202 else asked
    assert response.status_code in (200, 201), response.text


def test_a_table_over_a_view_takes_a_merge_incrementally_and_recomputes_a_new_view(stack, st):
    _view(stack, "paid", "SELECT id, ds, amount FROM orders WHERE amount > 0.2")
    created_and_refreshed(
        stack,
        "CREATE MATERIALIZED TABLE paid_by_day (PRIMARY KEY (day) NOT ENFORCED) "
        "WITH ('refresh.incremental' = 'strict') "
        "FRESHNESS = INTERVAL '1' DAY REFRESH_MODE = FULL AS SELECT coalesce(ds, '-') AS day, "
        "count(*) AS n, sum(amount) AS total FROM paid GROUP BY coalesce(ds, '-')",
    )
    expected = (
        f"SELECT coalesce(ds, '-'), count(*), sum(amount) FROM st.{NS}.orders "
        "WHERE amount > 0.2 GROUP BY coalesce(ds, '-')"
    )
    st.sql(
        f"MERGE INTO st.{NS}.orders t USING (SELECT * FROM VALUES (1L, 'b', 9.0D), "
        "(50L, 'q', 3.0D) AS s(id, ds, amount)) s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET t.ds = s.ds, t.amount = s.amount "
        "WHEN NOT MATCHED THEN INSERT *"
    )
    run = _refresh(stack, "paid_by_day")
    assert (run["state"], run["action"]) == ("SUCCEEDED", "INCREMENTAL"), (
        run["reason"],
        run["error"],
    )
    assert run["reason"].startswith(f"incremental: {NS}.orders changed by an overwrite"), run
    assert rows_of(st, f"SELECT * FROM st.{NS}.paid_by_day") == rows_of(st, expected)
    # The refresh state names the view's version beside the table's snapshot.
    state = json.loads(current_summary(stack, f"{NS}.paid_by_day")["refresh-state"])
    kinds = {(s["type"], s["name"]): s for s in state["source-states"]}
    assert kinds[("view", "paid")]["version-id"] == 1
    assert kinds[("table", "orders")]["snapshot-id"] == snapshot_ids(st, f"st.{NS}.orders")[-1]

    # A new version of the view: its SQL is not the one the table answers, so FULL.
    _view(stack, "paid", "SELECT id, ds, amount FROM orders WHERE amount > 2", replace=True)
    run = _refresh(stack, "paid_by_day")
    assert (run["state"], run["action"]) == ("SUCCEEDED", "FULL"), (run["reason"], run["error"])
    assert run["reason"].startswith(f"full: the view {NS}.paid is at version 2"), run
    assert rows_of(st, f"SELECT * FROM st.{NS}.paid_by_day") == rows_of(
        st, expected.replace("> 0.2", "> 2")
    )


def verify(stack: RefreshStack, table: str, snapshots: int, namespace: str = NS) -> list[dict]:
    """The verdicts of a verification asked through the API (a Spark job), once it ran."""
    response = stack.api.post(
        f"{stack.server.base_url}/api/namespaces/{namespace}/materialized-tables/{table}/verify",
        json={"snapshots": snapshots},
        timeout=30,
    )
    job = stack.follow(response)
    assert job.status_code == 200, job.text
    return job.json()["verifications"]


def test_every_refreshed_snapshot_verifies_exact_and_a_forged_one_is_caught(stack, st):
    # keyed went through incremental (MERGE) and full refreshes above, and sources moved on
    # since: each snapshot is checked at the source snapshots it records (time travel).
    verdicts = verify(stack, "keyed", snapshots=4)
    assert len(verdicts) == 4
    assert {v["verdict"] for v in verdicts} == {"EXACT"}, verdicts

    # An engine's commit that claims the current refresh state but adds a row of its own.
    state = current_summary(stack, f"{NS}.keyed")["refresh-state"]
    forged = st.createDataFrame([("zz-forged", 1.0, 1)], "day STRING, total DOUBLE, n BIGINT")
    forged = forged.select(*[c for c in st.table(f"st.{NS}.keyed").columns])
    forged.writeTo(f"st.{NS}.keyed").option("snapshot-property.refresh-state", state).append()
    [verdict] = verify(stack, "keyed", snapshots=1)
    assert (verdict["verdict"], verdict["missing_rows"], verdict["extra_rows"]) == (
        "DIFFERS",
        0,
        1,
    )
    assert verdict["sample"]["extra"][0][0] == "zz-forged"


def test_a_table_over_another_materialized_table_records_and_verifies_against_its_snapshot(
    stack, st
):
    created_and_refreshed(
        stack,
        "CREATE MATERIALIZED TABLE rollup FRESHNESS = INTERVAL '1' DAY REFRESH_MODE = FULL "
        "AS SELECT count(*) AS days, sum(n) AS orders FROM keyed",
    )
    state = json.loads(current_summary(stack, f"{NS}.rollup")["refresh-state"])
    # The cascade's source is the materialized table, at the snapshot its reader read.
    assert state["source-states"] == [source_state(stack, f"{NS}.keyed")]
    [verdict] = verify(stack, "rollup", snapshots=1)
    assert verdict["verdict"] == "EXACT", verdict


def test_the_verify_command_runs_its_own_spark_and_exits_1_when_a_snapshot_differs(stack):
    import subprocess
    import sys

    command = [sys.executable, "manage.py", "verify_materialized_table"]
    root = Path(__file__).resolve().parents[2]
    exact = subprocess.run(
        [*command, f"{NS}.rollup"], env=stack.server.env, capture_output=True, text=True, cwd=root
    )
    assert exact.returncode == 0, exact.stderr[-2000:]
    assert ": EXACT" in exact.stdout.splitlines()[-1], exact.stdout
    # Its own words come last: Spark's start-up banner is not printed (refresh/spark/).
    assert "setLogLevel" not in exact.stderr
    # keyed's newest snapshot is the forged one (above).
    differs = subprocess.run(
        [*command, f"{NS}.keyed", "--snapshots", "2"],
        env=stack.server.env,
        cwd=root,
        capture_output=True,
        text=True,
    )
    assert differs.returncode == 1, differs.stderr[-2000:]
    assert "DIFFERS (0 rows missing, 1 extra)" in differs.stdout
    assert "1 of 2 snapshots differ" in differs.stderr

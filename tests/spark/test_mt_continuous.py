"""Continuous materialized tables end to end: the app, Redis, a Celery worker, celery-beat and
the streaming process (`manage.py run_streams`, its own Spark), with FRESHNESS = INTERVAL
'5' SECOND over an append-only source. A filter query (appended micro-batches) and an
aggregation with a primary key (MERGE INTO) follow appends, each checked against the same
query run by Spark over the source; a stream-static join catches up incrementally when its
static side moves on; a keyed table whose source takes MERGE INTO catches up incrementally
(one run in its history each time, never a recompute), one without a key is recomputed when
its source deletes rows; SUSPEND/RESUME and a SIGKILL of the streaming process
lose and duplicate nothing; SET FRESHNESS moves a table to a schedule and back; ALTER ... AS
and a rollback give the rows of the right definition. Every load and micro-batch commit
says what it answers (a refresh-state in its snapshot summary, read through the catalog).
A continuous table with expectations (in a namespace of its own) applies them to its load,
its micro-batches and its rebuild.

The tests run in order on one stack (a module fixture)."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path

from pyiceberg.catalog.rest import RestCatalog
from pyspark.sql import SparkSession

from refresh.core.definition import MERGE_ON_READ
from tests.refresh_stack import RefreshStack
from tests.spark.conftest import stack_fixture
from tests.spark.test_mt_end_to_end import current_summary, source_state, verify
from tests.waiting import PATIENCE

NS = "live"
FILTER = "SELECT id, k, v FROM events WHERE v > 0"
TOTALS = "SELECT k, sum(v) AS total, count(*) AS n FROM events GROUP BY k"
WIDER = "SELECT id, k, v, v * 2 AS doubled FROM events WHERE v > 0"


stack = stack_fixture("continuous-stack")


def ok(stack: RefreshStack, sql: str, namespace: str = NS) -> list[dict]:
    response = stack.statements(sql, namespace=namespace)
    assert response.status_code == 200, response.text
    return response.json()["results"]


def rows(spark: SparkSession, sql: str) -> list[tuple]:
    return sorted(tuple(row) for row in spark.sql(sql).collect())


def expected(spark: SparkSession, query: str) -> list[tuple]:
    return rows(spark, query.replace("FROM events", f"FROM st.{NS}.events"))


def follows(stack: RefreshStack, spark: SparkSession, table: str, query: str, what: str) -> None:
    """Wait until the table holds exactly what the query gives over the source now."""
    stack.wait_for(
        lambda: rows(spark, f"SELECT * FROM st.{NS}.{table}") == expected(spark, query),
        timeout=120,
        what=what,
        every=1.0,
    )


def mt_row(stack: RefreshStack, name: str) -> dict:
    connection = sqlite3.connect(f"file:{Path(stack.server.db_path)}?mode=ro", uri=True)
    connection.row_factory = sqlite3.Row
    try:
        return dict(
            connection.execute(
                "SELECT mt.*, o.name AS name FROM refresh_materializedtable mt "
                "JOIN catalog_catalogobject o ON o.id = mt.table_id WHERE o.name = ?",
                (name,),
            ).fetchone()
        )
    finally:
        connection.close()


def refresh_state(stack: RefreshStack, name: str) -> dict:
    """The refresh state the table's current snapshot records, as an engine reads it."""
    return json.loads(current_summary(stack, f"{NS}.{name}")["refresh-state"])


def newest_state(stack: RefreshStack, name: str) -> dict:
    """The refresh state of the table's newest snapshot that records one (a compaction's
    records none)."""
    catalog = RestCatalog("st", uri=stack.server.iceberg_uri, credential=stack.server.credential)
    snapshots = catalog.load_table(f"{NS}.{name}").snapshots()
    for snapshot in sorted(snapshots, key=lambda s: s.timestamp_ms, reverse=True):
        recorded = snapshot.summary.additional_properties.get("refresh-state")
        if recorded:
            return json.loads(recorded)
    return {}


def batches(stack: RefreshStack, name: str) -> list[dict]:
    connection = sqlite3.connect(f"file:{Path(stack.server.db_path)}?mode=ro", uri=True)
    connection.row_factory = sqlite3.Row
    try:
        return [
            dict(row)
            for row in connection.execute(
                "SELECT * FROM refresh_refreshrun WHERE table_name = ? AND trigger = 'CONTINUOUS' "
                "AND action = 'INCREMENTAL' ORDER BY id",
                (f"{NS}.{name}",),
            )
        ]
    finally:
        connection.close()


_next_id = [0]


def append(spark: SparkSession, count: int = 4) -> None:
    values = []
    for _ in range(count):
        _next_id[0] += 1
        i = _next_id[0]
        values.append(f"({i}, 'k{i % 3}', {(i % 5) - 1}.5)")
    spark.sql(f"INSERT INTO st.{NS}.events VALUES {', '.join(values)}")


def test_continuous_tables_are_loaded_then_follow_appends(stack, st):
    st.sql(f"CREATE NAMESPACE IF NOT EXISTS st.{NS}")
    st.sql(f"CREATE TABLE st.{NS}.events (id BIGINT NOT NULL, k STRING NOT NULL, v DOUBLE)")
    append(st, 6)
    ok(stack, f"CREATE MATERIALIZED TABLE filtered FRESHNESS = INTERVAL '5' SECOND AS {FILTER}")
    ok(
        stack,
        "CREATE MATERIALIZED TABLE totals (PRIMARY KEY (k) NOT ENFORCED) "
        f"FRESHNESS = INTERVAL '5' SECOND AS {TOTALS}",
    )
    assert mt_row(stack, "filtered")["refresh_mode"] == "CONTINUOUS"
    follows(stack, st, "filtered", FILTER, "the initial load of filtered")
    follows(stack, st, "totals", TOTALS, "the initial load of totals")
    # Each load says what it answers: definition 1 over the snapshot of the source it pinned.
    loaded = source_state(stack, f"{NS}.events")
    for table in ("filtered", "totals"):
        state = refresh_state(stack, table)
        assert (state["view-version-id"], state["source-states"]) == (1, [loaded]), table

    for _ in range(3):
        append(st, 5)
        time.sleep(1)
    follows(stack, st, "filtered", FILTER, "filtered to follow appends")
    follows(stack, st, "totals", TOTALS, "totals to follow appends (MERGE INTO)")
    # So does each micro-batch, an append and a MERGE alike: the source snapshot its end
    # offset reads through, here the last append (no other commit to the source since).
    events = source_state(stack, f"{NS}.events")
    assert events["snapshot-id"] != loaded["snapshot-id"]
    assert "lakeview.stream-batch" in current_summary(stack, f"{NS}.filtered")
    for table in ("filtered", "totals"):
        state = refresh_state(stack, table)
        assert (state["view-version-id"], state["source-states"]) == (1, [events]), table
    stack.wait_for(
        lambda: [json.loads(b["source_snapshots"]) for b in batches(stack, "totals")][-1:]
        == [{f"{NS}.events": events["snapshot-id"]}],
        timeout=30,
        what="the last micro-batch's row to name the snapshot it read",
    )
    assert batches(stack, "filtered"), "micro-batches are in the history"
    assert all(
        b["state"] == "SUCCEEDED" and b["batch_id"] is not None for b in batches(stack, "totals")
    )
    assert mt_row(stack, "totals")["stream_status"] == "RUNNING"


#: The compaction test's feed (seconds) and when its maintenance rounds start (seconds in).
FEED_SECONDS = 38
MAINTAIN_AT = (0, 15, 31)


def test_compaction_and_expiry_while_fed_lose_and_duplicate_nothing(stack, st):
    """Maintenance on both tables and on their source while rows keep coming: compaction
    commits `replace` snapshots the stream skips, a MERGE that meets one is run again, and
    expiry keeps what the streams still read."""
    base = f"{stack.server.base_url}/api/namespaces/{NS}/tables"
    policy = {
        "enabled": True,
        "properties": {
            "history.expire.max-snapshot-age-ms": "30000",
            "history.expire.min-snapshots-to-keep": "2",
            "lakeview.maintenance.compaction.min-input-files": "2",
        },
    }
    tables = ("events", "filtered", "totals")
    for table in tables:
        response = stack.api.patch(f"{base}/{table}/maintenance", json=policy, timeout=30)
        assert response.status_code == 200, response.text
    started: list[int] = []
    # Rows come every second for FEED_SECONDS; maintenance starts at each of MAINTAIN_AT
    # (seconds in). The last is past the 30 s age limit, so every table then has snapshots
    # to expire (those of the test before, and of the first seconds here), and rows keep
    # coming while it runs.
    began = time.monotonic()
    due = list(MAINTAIN_AT)
    while (elapsed := time.monotonic() - began) < FEED_SECONDS:
        append(st, 10)
        if due and elapsed >= due[0]:
            due.pop(0)
            for table in tables:
                response = stack.api.post(
                    f"{base}/{table}/maintenance/runs/",
                    json={"actions": ["REWRITE_DATA_FILES", "EXPIRE_SNAPSHOTS"]},
                    timeout=30,
                )
                assert response.status_code == 202, response.text
                started += [run["id"] for run in response.json()]
        time.sleep(1)
    assert not due, "every maintenance round started while rows came"

    def run(run_id: int) -> dict:
        url = f"{stack.server.base_url}/api/maintenance-runs/{run_id}/"
        return stack.api.get(url, timeout=30).json()

    stack.wait_for(
        lambda: all(run(i)["state"] not in ("QUEUED", "RUNNING") for i in set(started)),
        timeout=180,
        what="the maintenance runs to finish",
    )
    finished = [run(i) for i in sorted(set(started))]
    failed = [(r["table_name"], r["action"], r["error"][:800]) for r in finished]
    assert [f for f, r in zip(failed, finished, strict=True) if r["state"] != "SUCCEEDED"] == []
    for table in tables:
        mine = [r for r in finished if r["table_name"] == f"{NS}.{table}"]
        assert any(r["files_rewritten"] for r in mine), f"{table} was compacted"
        assert any(r["snapshots_expired"] for r in mine), f"{table} had snapshots expired"
    follows(stack, st, "filtered", FILTER, "filtered after maintenance")
    follows(stack, st, "totals", TOTALS, "totals after maintenance")
    [(count, distinct)] = rows(st, f"SELECT count(*), count(DISTINCT id) FROM st.{NS}.filtered")
    assert count == distinct
    assert mt_row(stack, "filtered")["stream_status"] == "RUNNING"
    assert mt_row(stack, "totals")["stream_status"] == "RUNNING"


def test_suspend_then_resume_loses_and_duplicates_nothing(stack, st):
    ok(stack, "ALTER MATERIALIZED TABLE filtered SUSPEND")
    stack.wait_for(
        lambda: mt_row(stack, "filtered")["stream_status"] == "STOPPED",
        timeout=60,
        what="the stream to stop",
    )
    frozen = rows(st, f"SELECT * FROM st.{NS}.filtered")
    append(st, 6)
    time.sleep(8)
    assert rows(st, f"SELECT * FROM st.{NS}.filtered") == frozen, "a suspended table waits"

    ok(stack, "ALTER MATERIALIZED TABLE filtered RESUME")
    follows(stack, st, "filtered", FILTER, "filtered to catch up after RESUME")
    follows(stack, st, "totals", TOTALS, "totals, never suspended")


def test_a_sigkilled_streaming_process_resumes_from_its_checkpoints(stack, st):
    append(st, 3)
    time.sleep(3)  # a micro-batch may be running when the process dies
    stack.kill_streams()
    append(st, 7)
    stack.start_streams()
    follows(stack, st, "filtered", FILTER, "filtered after the restart")
    follows(stack, st, "totals", TOTALS, "totals after the restart")
    ids = [row[0] for row in rows(st, f"SELECT id FROM st.{NS}.filtered")]
    assert len(ids) == len(set(ids)), "no row was written twice"


def test_a_streaming_host_whose_spark_jvm_died_starts_its_streams_again_from_their_checkpoints(
    stack, st
):
    # An OutOfMemoryError in a micro-batch ends the host's JVM; the host process lives on,
    # renewing its leases. Before, it held its tables with dead streams until restarted.
    append(st, 3)
    time.sleep(3)  # a micro-batch may be running when the JVM dies
    stack.kill_jvm(stack.streams)
    append(st, 5)
    follows(stack, st, "filtered", FILTER, "filtered after the host's JVM died")
    follows(stack, st, "totals", TOTALS, "totals after the host's JVM died")
    ids = [row[0] for row in rows(st, f"SELECT id FROM st.{NS}.filtered")]
    assert len(ids) == len(set(ids)), "no row was written twice"
    assert "Spark JVM has exited" in stack.log("streams", lines=5000)


def test_a_manual_refresh_under_steady_appends_pauses_the_stream_and_every_snapshot_verifies(
    stack, st
):
    stop = threading.Event()

    def feed() -> None:
        while not stop.is_set():
            append(st, 2)
            time.sleep(0.5)

    old_checkpoint = mt_row(stack, "filtered")["stream_checkpoint"]
    feeder = threading.Thread(target=feed, name="feeder")
    feeder.start()
    try:
        time.sleep(2)
        response = stack.api.post(
            f"{stack.server.base_url}/api/namespaces/{NS}/materialized-tables/filtered/refresh",
            json={},
            timeout=30,
        )
        assert response.status_code == 202, response.text
        run_id = response.json()["jobId"]
        stack.wait_for(
            lambda: stack.run(run_id)["state"] in ("SUCCEEDED", "FAILED"),
            timeout=180,
            what="the manual refresh, made by the streaming process",
        )
        run = stack.run(run_id)
        assert (run["state"], run["action"]) == ("SUCCEEDED", "FULL"), run
        assert "stream paused" in run["reason"] and run["worker"].startswith("streams:")
        stack.wait_for(  # the stream goes on from a new checkpoint; the old one goes
            lambda: not Path(old_checkpoint).exists(), timeout=90, what="the old checkpoint to go"
        )
        time.sleep(3)  # the stream resumes under the same steady appends
    finally:
        stop.set()
        feeder.join()
    follows(stack, st, "filtered", FILTER, "filtered after its manual refresh")
    ids = [row[0] for row in rows(st, f"SELECT id FROM st.{NS}.filtered")]
    assert len(ids) == len(set(ids)), "no row was written twice"
    # The refresh's snapshot and the micro-batches around it each answer their sources.
    verdicts = verify(stack, "filtered", snapshots=10, namespace=NS)
    assert len(verdicts) >= 2
    # None differs; a snapshot whose source snapshot maintenance already expired (on since
    # the compaction test) cannot be recomputed any more, and says so.
    assert "DIFFERS" not in {v["verdict"] for v in verdicts}, verdicts
    assert any(v["verdict"] == "EXACT" for v in verdicts), verdicts
    assert all("expired" in v["reason"] for v in verdicts if v["verdict"] == "UNVERIFIABLE"), (
        verdicts
    )
    assert run["snapshot_id"] in {v["snapshot_id"] for v in verdicts}
    assert {v["verdict"] for v in verdicts if v["snapshot_id"] == run["snapshot_id"]} <= {
        "EXACT",
        "UNVERIFIABLE",
    }


def test_set_freshness_moves_a_table_to_a_schedule_and_back(stack, st):
    ok(stack, "ALTER MATERIALIZED TABLE filtered SET FRESHNESS = INTERVAL '1' HOUR")
    row = mt_row(stack, "filtered")
    assert row["refresh_mode"] == "FULL" and row["periodic_task_id"] is not None
    stack.wait_for(
        lambda: mt_row(stack, "filtered")["stream_status"] == "STOPPED",
        timeout=60,
        what="the stream to stop",
    )
    frozen = rows(st, f"SELECT * FROM st.{NS}.filtered")
    append(st, 4)
    time.sleep(6)
    assert rows(st, f"SELECT * FROM st.{NS}.filtered") == frozen, "hourly now: no stream"

    ok(stack, "ALTER MATERIALIZED TABLE filtered SET FRESHNESS = INTERVAL '5' SECOND")
    row = mt_row(stack, "filtered")
    assert row["refresh_mode"] == "CONTINUOUS" and row["periodic_task_id"] is None
    follows(stack, st, "filtered", FILTER, "filtered, streaming again")
    append(st, 4)
    follows(stack, st, "filtered", FILTER, "filtered to follow appends again")


def test_alter_as_adding_a_column_and_a_rollback_give_the_rows_of_each_definition(stack, st):
    old_checkpoint = mt_row(stack, "filtered")["stream_checkpoint"]
    ok(stack, f"ALTER MATERIALIZED TABLE filtered AS {WIDER}")
    follows(stack, st, "filtered", WIDER, "the new definition")
    # The old definition's checkpoint goes (it never resumes; removed just after the
    # rebuild is recorded); the new one is there.
    assert old_checkpoint
    stack.wait_for(
        lambda: not Path(old_checkpoint).exists(), timeout=30, what="the old checkpoint to go"
    )
    stack.wait_for(  # Spark makes it when the new stream starts, just after the rebuild
        lambda: Path(mt_row(stack, "filtered")["stream_checkpoint"]).exists(),
        timeout=60,
        what="the new stream's checkpoint",
    )
    append(st, 3)
    follows(stack, st, "filtered", WIDER, "the new definition to follow appends")
    assert mt_row(stack, "filtered")["current_version"] == 2
    # The rebuild and the new stream's batches answer the new definition (the newest state:
    # maintenance, on since the compaction test, may have compacted the table since).
    assert newest_state(stack, "filtered")["view-version-id"] == 2

    response = stack.follow(
        stack.api.post(
            f"{stack.server.base_url}/api/namespaces/{NS}/materialized-tables/filtered/rollback",
            json={"version_id": 1},
            timeout=30,
        )
    )
    assert response.status_code == 200, response.text
    follows(stack, st, "filtered", FILTER, "the first definition again")
    append(st, 3)
    follows(stack, st, "filtered", FILTER, "the first definition to follow appends")


def test_a_source_snapshot_that_deletes_rows_makes_the_table_recompute(stack, st):
    """Without a primary key a deleted source row names no row of the table: the table is
    recomputed, and its load's run says why."""
    loads_before = len(_loads(stack, "filtered"))
    _delete_meeting_compaction(st, f"DELETE FROM st.{NS}.events WHERE id <= 3")
    append(st, 3)
    follows(stack, st, "filtered", FILTER, "the table to be recomputed without the deleted rows")
    _wait_for_a_new_load(stack, "filtered", loads_before)
    reason = _loads(stack, "filtered")[-1]["reason"]
    # Why, exactly, depends on maintenance (on for the source since the compaction test):
    # the delete, or the snapshot the stream stood at expired meanwhile.
    assert reason.startswith("full: ") and reason.endswith("the stream restarted after them")
    append(st, 3)
    follows(stack, st, "filtered", FILTER, "the stream after the recompute")


def _delete_meeting_compaction(st, statement: str, attempts: int = 5) -> None:
    """Run a DELETE as a writer must while maintenance (on for the source since the
    compaction test) may rewrite its files: a compaction that commits between the DELETE's
    scan and its commit makes Iceberg refuse it ("Missing required files to delete"), and
    the DELETE is run again."""
    for attempt in range(attempts):
        try:
            st.sql(statement)
            return
        except Exception as error:
            if "Missing required files to delete" not in str(error) or attempt == attempts - 1:
                raise
            time.sleep(1)


def _loads(stack: RefreshStack, name: str) -> list[dict]:
    return [b for b in _runs(stack, name) if b["action"] == "FULL" and b["state"] == "SUCCEEDED"]


def _wait_for_a_new_load(stack: RefreshStack, name: str, loads_before: int) -> None:
    """The recompute is a load in the history. Its run is marked SUCCEEDED just after its
    commit, so a reader can see the new rows a moment before the row says so: wait a little."""
    stack.wait_for(
        lambda: len(_loads(stack, name)) > loads_before,
        timeout=30,
        what="the recompute to be a succeeded load in the history",
    )


def _runs(stack: RefreshStack, name: str) -> list[dict]:
    connection = sqlite3.connect(f"file:{Path(stack.server.db_path)}?mode=ro", uri=True)
    connection.row_factory = sqlite3.Row
    try:
        return [
            dict(row)
            for row in connection.execute(
                "SELECT * FROM refresh_refreshrun WHERE table_name = ? ORDER BY id",
                (f"{NS}.{name}",),
            )
        ]
    finally:
        connection.close()


LABELLED = (
    "SELECT e.k, count(*) AS n, max(l.label) AS label "
    "FROM events e JOIN labels l ON e.k = l.k GROUP BY e.k"
)


def test_a_stream_static_join_catches_up_when_its_static_side_moves_and_every_snapshot_verifies(
    stack, st
):
    """The static side of a join is read at the load's snapshot by every micro-batch (each
    key answers the same snapshot of it); when it moves on, the streaming process catches
    the table up by its key (the keys the changed labels touch recomputed, one commit) and
    streams on with the new pins: rows of keys no new event touched take the new labels
    too, and the table is not recomputed."""
    st.sql(f"CREATE TABLE st.{NS}.labels (k STRING NOT NULL, label STRING)")
    st.sql(f"INSERT INTO st.{NS}.labels VALUES ('k0', 'zero'), ('k1', 'one'), ('k2', 'two')")
    ok(
        stack,
        "CREATE MATERIALIZED TABLE labelled (PRIMARY KEY (k) NOT ENFORCED) "
        f"FRESHNESS = INTERVAL '5' SECOND AS {LABELLED}",
    )
    over_sources = LABELLED.replace("FROM events", f"FROM st.{NS}.events").replace(
        "JOIN labels", f"JOIN st.{NS}.labels"
    )

    def follows_join(what: str) -> None:
        stack.wait_for(
            lambda: rows(st, f"SELECT * FROM st.{NS}.labelled") == rows(st, over_sources),
            timeout=120,
            what=what,
            every=1.0,
        )

    follows_join("the join's load")
    append(st, 3)
    follows_join("the join to follow appends")
    loads_before = len(_loads(stack, "labelled"))

    # k2's label changes; the next events touch k0 and k1 only (ids 3n+1, 3n+2).
    st.sql(f"UPDATE st.{NS}.labels SET label = 'TWO' WHERE k = 'k2'")
    _next_id[0] += -_next_id[0] % 3  # the next id is 3n + 1
    append(st, 2)
    follows_join("the table caught up with the new labels")
    [caught_up] = _wait_for_catch_ups(stack, "labelled", 1)
    assert caught_up["state"] == "SUCCEEDED", caught_up
    # The events appended meanwhile are caught up with it (the stream then resumes after).
    assert caught_up["reason"].startswith("incremental: "), caught_up
    assert f"{NS}.labels changed by an overwrite" in caught_up["reason"], caught_up
    assert caught_up["reason"].endswith("; the stream resumed after it"), caught_up
    assert len(_loads(stack, "labelled")) == loads_before, "not recomputed"
    labels = {(row[0], row[2]) for row in rows(st, f"SELECT * FROM st.{NS}.labelled")}
    assert ("k2", "TWO") in labels, labels
    # Each micro-batch and load answers the snapshots it records, the static side included.
    verdicts = verify(stack, "labelled", snapshots=10, namespace=NS)
    assert "DIFFERS" not in {v["verdict"] for v in verdicts}, verdicts
    assert any(v["verdict"] == "EXACT" for v in verdicts), verdicts


def _wait_for_catch_ups(stack: RefreshStack, name: str, count: int) -> list[dict]:
    """The table's catch-ups (a continuous INCREMENTAL run that is no micro-batch and says
    why: a stream's failure says nothing), once there are `count` of them."""

    def caught_up() -> list[dict]:
        found = [
            run
            for run in _runs(stack, name)
            if (run["trigger"], run["action"]) == ("CONTINUOUS", "INCREMENTAL")
            and run["batch_id"] is None
            and run["reason"]
        ]
        return found if len(found) >= count else []

    return stack.wait_for(caught_up, timeout=120, what=f"{count} catch-up(s) of {name}")


LEDGER = "SELECT account, count(*) AS n, sum(amount) AS total FROM ledger GROUP BY account"


def test_a_keyed_continuous_table_catches_up_incrementally_after_each_merge_into_its_source(
    stack, st
):
    """CDC's way: the source (merge-on-read) takes MERGE INTO that updates, inserts and
    deletes rows, a snapshot Iceberg's stream source refuses. The table, with a primary key,
    catches up each time in one INCREMENTAL run whose reason says what changed, its stream
    resumes after it, and it is never recomputed; it ends exact, and so does every snapshot
    it wrote."""
    properties = ", ".join(f"'{k}' = '{v}'" for k, v in MERGE_ON_READ.items())
    st.sql(
        f"CREATE TABLE st.{NS}.ledger (id BIGINT NOT NULL, account STRING NOT NULL, "
        f"amount DOUBLE) TBLPROPERTIES ({properties})"
    )
    st.sql(
        f"INSERT INTO st.{NS}.ledger VALUES (1, 'a', 1.0), (2, 'b', 2.0), (3, 'a', 3.0), "
        "(4, 'c', 4.0)"
    )
    ok(
        stack,
        "CREATE MATERIALIZED TABLE balances (PRIMARY KEY (account) NOT ENFORCED) "
        f"FRESHNESS = INTERVAL '5' SECOND AS {LEDGER}",
    )
    over_source = LEDGER.replace("FROM ledger", f"FROM st.{NS}.ledger")

    def follows_ledger(what: str) -> None:
        stack.wait_for(
            lambda: rows(st, f"SELECT * FROM st.{NS}.balances") == rows(st, over_source),
            timeout=120,
            what=what,
            every=1.0,
        )

    follows_ledger("the ledger's load")
    st.sql(f"INSERT INTO st.{NS}.ledger VALUES (5, 'b', 5.0)")
    follows_ledger("a micro-batch")
    loads = len(_loads(stack, "balances"))
    merges = [
        # Updates 2 (moving it to account c), deletes 3 (a negative amount), inserts 6.
        "(2, 'c', 20.0), (3, 'a', -1.0), (6, 'd', 6.0)",
        # Updates 1 and 6, deletes 4 (account c keeps 2), inserts 7.
        "(1, 'a', 10.0), (6, 'd', 60.0), (4, 'c', -1.0), (7, 'a', 7.0)",
    ]
    for round_, values in enumerate(merges, start=1):
        st.sql(
            f"MERGE INTO st.{NS}.ledger t USING (SELECT * FROM VALUES {values} "
            "AS s(id, account, amount)) s ON t.id = s.id "
            "WHEN MATCHED AND s.amount < 0 THEN DELETE "
            "WHEN MATCHED THEN UPDATE SET t.account = s.account, t.amount = s.amount "
            "WHEN NOT MATCHED THEN INSERT *"
        )
        follows_ledger(f"the table caught up with MERGE {round_}")
        caught_up = _wait_for_catch_ups(stack, "balances", round_)
        assert len(caught_up) == round_, caught_up
        reason = caught_up[-1]["reason"]
        assert reason.startswith("incremental: "), reason
        assert f"{NS}.ledger changed by an overwrite" in reason, reason
        assert "keys recomputed; the stream resumed after it" in reason, reason
        assert caught_up[-1]["state"] == "SUCCEEDED"
    st.sql(f"INSERT INTO st.{NS}.ledger VALUES (8, 'e', 8.0)")
    follows_ledger("the stream after the catch-ups")
    assert len(_loads(stack, "balances")) == loads, "never recomputed"
    assert mt_row(stack, "balances")["stream_status"] == "RUNNING"
    verdicts = verify(stack, "balances", snapshots=10, namespace=NS)
    assert len(verdicts) >= 4, verdicts  # the load, a batch, two catch-ups, a batch
    assert {v["verdict"] for v in verdicts} == {"EXACT"}, verdicts


#: The expectations test's namespace: its own source and table, on this module's stack.
CHECKED_NS = "checked"
CHECKED = """CREATE MATERIALIZED TABLE checked (
  CONSTRAINT positive EXPECT (v > 0) ON VIOLATION DROP ROW,
  CONSTRAINT not_k0 EXPECT (k <> 'k0'),
  CONSTRAINT small EXPECT (v < 1000) ON VIOLATION FAIL UPDATE
)
FRESHNESS = INTERVAL '5' SECOND
AS SELECT id, k, v FROM events"""


def _checked_runs(stack: RefreshStack) -> list[dict]:
    response = stack.api.get(
        f"{stack.server.base_url}/api/namespaces/{CHECKED_NS}/materialized-tables/checked/runs/",
        timeout=30,
    )
    response.raise_for_status()
    return response.json()["results"]


def _checked_ids(st: SparkSession) -> list[int]:
    return [row[0] for row in rows(st, f"SELECT id FROM st.{CHECKED_NS}.checked")]


def test_a_continuous_tables_load_micro_batches_and_rebuild_apply_its_expectations(stack, st):
    """Created in the console with Databricks' CONSTRAINT ... EXPECT clauses, its load and
    its micro-batches leave DROP ROW's rows out, record each expectation's count on their
    runs, and verify exactly through the app's verifier; a micro-batch that violates a FAIL
    UPDATE expectation commits nothing and is the stream's failed run, naming the
    expectation and its count; CREATE OR ALTER without it rebuilds the table, and the
    stream runs again."""
    # The tests before leave their streams running; this one needs none of them (those
    # that exist: run alone, it finds none).
    for name in ("filtered", "totals", "labelled", "balances"):
        stack.statements(f"ALTER MATERIALIZED TABLE {name} SUSPEND", namespace=NS)
    ns, runs, ids = CHECKED_NS, _checked_runs, _checked_ids
    st.sql(f"CREATE NAMESPACE IF NOT EXISTS st.{ns}")
    st.sql(f"CREATE TABLE st.{ns}.events (id BIGINT NOT NULL, k STRING NOT NULL, v DOUBLE)")
    st.sql(f"INSERT INTO st.{ns}.events VALUES (1, 'k1', 2.5), (2, 'k0', -1.0), (3, 'k0', 3.0)")
    ok(stack, CHECKED, namespace=ns)
    assert mt_row(stack, "checked")["refresh_mode"] == "CONTINUOUS"
    stack.wait_for(
        lambda: ids(st) == [1, 3], timeout=180, what="the load, without row 2", every=1.0
    )
    # The load that wrote those rows: a load tried before it on a crowded machine (a
    # stream's start that failed and was tried again) is a finished FULL run too.
    [load] = stack.wait_for(
        lambda: [r for r in runs(stack) if r["action"] == "FULL" and r["state"] == "SUCCEEDED"],
        timeout=PATIENCE,
        what="the load's run",
    )
    assert load["expectations"] == {"positive": 1, "not_k0": 2, "small": 0}

    st.sql(f"INSERT INTO st.{ns}.events VALUES (4, 'k0', 5.0), (5, 'k1', -2.0), (6, 'k2', 1.0)")
    stack.wait_for(lambda: ids(st) == [1, 3, 4, 6], timeout=120, what="a micro-batch", every=1.0)
    batches = stack.wait_for(
        lambda: [
            r
            for r in runs(stack)
            if (r["trigger"], r["action"], r["state"]) == ("CONTINUOUS", "INCREMENTAL", "SUCCEEDED")
        ],
        timeout=PATIENCE,
        what="the micro-batch's run",
    )
    counted: dict[str, int] = {}
    for batch in batches:
        for name, count in batch["expectations"].items():
            counted[name] = counted.get(name, 0) + count
    assert counted == {"positive": 1, "not_k0": 1, "small": 0}

    verdicts = verify(stack, "checked", snapshots=5, namespace=ns)
    assert len(verdicts) >= 2
    assert {v["verdict"] for v in verdicts} == {"EXACT"}, verdicts

    st.sql(f"INSERT INTO st.{ns}.events VALUES (7, 'k1', 5000.0), (8, 'k1', 2.0)")
    stack.wait_for(
        lambda: mt_row(stack, "checked")["stream_status"] == "FAILED",
        timeout=120,
        what="the stream to fail on FAIL UPDATE",
    )
    error = mt_row(stack, "checked")["stream_error"]
    assert error.startswith("Expectation 'small' (ON VIOLATION FAIL UPDATE) failed: 1 row"), error
    # A start that failed on a crowded machine and was tried again (see the load above) is a
    # failed run too; the stream's failed run is the one of the FAIL UPDATE failure, one run
    # for the whole spell (its retries add none).
    [failed] = [
        r for r in runs(stack) if r["state"] == "FAILED" and (r["expectations"] or {}).get("small")
    ]
    assert (failed["trigger"], failed["action"]) == ("CONTINUOUS", "INCREMENTAL"), failed
    assert failed["error"] == error
    assert failed["expectations"] == {"positive": 0, "not_k0": 0, "small": 1}
    assert ids(st) == [1, 3, 4, 6], "the failed micro-batch committed nothing"

    # Changing the expectations is a new definition: the streaming process loads the table
    # anew (its rebuild run counts them) and streams on from there.
    altered = CHECKED.replace("CREATE MATERIALIZED", "CREATE OR ALTER MATERIALIZED").replace(
        ",\n  CONSTRAINT small EXPECT (v < 1000) ON VIOLATION FAIL UPDATE", ""
    )
    assert "small" not in altered
    ok(stack, altered, namespace=ns)
    stack.wait_for(
        lambda: ids(st) == [1, 3, 4, 6, 7, 8], timeout=180, what="the rebuild", every=1.0
    )
    # The run row is finished just after the commit that made the rows visible.
    [rebuilt] = stack.wait_for(
        lambda: [r for r in runs(stack) if r["trigger"] == "REBUILD" and r["finished_at"]],
        timeout=PATIENCE,
        what="the rebuild's run",
    )
    assert rebuilt["state"] == "SUCCEEDED", rebuilt
    assert rebuilt["expectations"] == {"positive": 2, "not_k0": 3}
    stack.wait_for(
        lambda: mt_row(stack, "checked")["stream_status"] == "RUNNING",
        timeout=120,
        what="the stream to run again",
    )

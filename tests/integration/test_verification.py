"""Verifying a materialized table's snapshots (refresh.verification): which snapshots are
verified, when one cannot be, the verdicts kept with the table's history, and the API, page
and command that ask for it. Spark's recompute itself is in tests/spark; here a worker's
verdict is given."""

from __future__ import annotations

import logging
import time
from contextlib import nullcontext

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from catalog import services, workers
from catalog.jobs import run
from catalog.models import CatalogEvent, SparkJob, Table, ViewRepresentation
from refresh import analysis, runner, verification
from refresh.core.refresh_state import partition_entry, refresh_state, user_change
from refresh.models import MaterializedTable, Verification
from refresh.spark.verify import Verdict
from runtime import engine
from tests.integration.snapshots import commit_snapshot

pytestmark = pytest.mark.django_db

ORDERS = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "ds", "type": "string", "required": False},
        {"id": 2, "name": "amount", "type": "double", "required": False},
    ],
}
DAILY = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "ds", "type": "string", "required": False},
        {"id": 2, "name": "total", "type": "double", "required": False},
    ],
}
QUERY = "SELECT ds, sum(amount) AS total FROM sales.orders GROUP BY ds"


@pytest.fixture
def mt(editor) -> MaterializedTable:
    services.create_namespace(name="sales")
    services.create_table(namespace="sales", name="orders", schema=ORDERS)
    table = services.create_table(namespace="sales", name="daily", schema=DAILY).obj
    table.materialized = MaterializedTable.objects.create(
        table=table,
        query=QUERY,
        default_namespace="sales",
        freshness_value=1,
        freshness_unit="HOUR",
        refresh_mode="FULL",
        mode_is_explicit=True,
        state="ACTIVATED",
        partitioned_by=["ds"],
        current_version=1,
    )
    mt = table.materialized
    mt.versions.create(version_id=1, query=QUERY, default_namespace="sales")
    return mt


def refreshed(mt: MaterializedTable, **extra: str) -> tuple[int, int]:
    """A source append and a refresh commit recording it: (source snapshot, table snapshot)."""
    source = commit_snapshot("sales", "orders", "append", 10)
    uuid = str(Table.objects.get(namespace__name="sales", name="orders").uuid)
    state = refresh_state(
        version=1, sources={"sales.orders": (uuid, source)}, started_ms=1_700_000_000_000
    )
    return source, commit_snapshot(
        "sales", "daily", "overwrite", 3, summary=state.summary() | extra
    )


@pytest.fixture
def given_verdict(monkeypatch):
    """The worker's Spark answers `verdict`; what it was asked is kept in `asked`."""
    asked: list[dict] = []
    answer = {"verdict": Verdict(columns=("ds", "total"), missing=0, extra=0)}

    def verify_snapshot(**kwargs):
        asked.append(kwargs)
        return answer["verdict"]

    monkeypatch.setattr(analysis, "verify_snapshot", verify_snapshot)
    # A job run here tags no Spark jobs: tagging would start this process's Spark session,
    # which the Spark tests' own session (the same JVM when one pytest runs them all) reuses.
    monkeypatch.setattr(engine, "job_group", lambda group, description: nullcontext())
    return asked, answer


def test_the_newest_snapshots_with_a_refresh_state_are_verified_against_what_they_record(
    mt, given_verdict
):
    asked, _ = given_verdict
    first_source, first = refreshed(mt)
    commit_snapshot("sales", "daily", "overwrite", 1, summary=user_change("alice"))
    second_source, second = refreshed(mt, **partition_entry({"ds": "2026-11-26"}))
    with analysis.on_worker():
        done = verification.verify(mt, snapshots=5)
    # Newest first; the person's change (no refresh state) is not among them.
    assert [v.snapshot_id for v in done] == [second, first]
    assert [v.verdict for v in done] == ["EXACT", "EXACT"]
    assert asked[0]["pins"] == {("sales", "orders"): second_source}
    assert asked[0]["partition"] == {"ds": "2026-11-26"}  # a partition refresh: its partition
    assert asked[1]["pins"] == {("sales", "orders"): first_source} and asked[1]["partition"] is None
    assert asked[0]["query"] == QUERY and asked[0]["target"] == ["sales", "daily"]
    assert done[0].source_snapshots == {"sales.orders": second_source}
    assert CatalogEvent.objects.filter(action="verify_materialized_table").count() == 2


def test_a_snapshot_that_differs_keeps_its_counts_and_rows(mt, given_verdict):
    _, answer = given_verdict
    answer["verdict"] = Verdict(
        columns=("ds", "total"),
        missing=1,
        extra=2,
        missing_sample=[["a", "3"]],
        extra_sample=[["a", "2"], ["z", "1"]],
    )
    _, snapshot = refreshed(mt)
    with analysis.on_worker():
        [result] = verification.verify(mt)
    result.refresh_from_db()
    assert (result.verdict, result.missing_rows, result.extra_rows) == ("DIFFERS", 1, 2)
    assert result.sample == {
        "columns": ["ds", "total"],
        "missing": [["a", "3"]],
        "extra": [["a", "2"], ["z", "1"]],
    }


def test_a_snapshot_whose_source_snapshot_is_gone_or_replaced_is_unverifiable_with_why(
    mt, given_verdict
):
    asked, _ = given_verdict
    refreshed(mt)
    state = refresh_state(version=1, sources={"sales.orders": ("another-uuid", 5)}, started_ms=1)
    commit_snapshot("sales", "daily", "overwrite", summary=state.summary())
    uuid = str(Table.objects.get(namespace__name="sales", name="orders").uuid)
    expired = refresh_state(version=1, sources={"sales.orders": (uuid, 424242)}, started_ms=1)
    commit_snapshot("sales", "daily", "overwrite", summary=expired.summary())
    with analysis.on_worker():
        gone, replaced, fine = verification.verify(mt, snapshots=3)
    assert (gone.verdict, gone.reason) == (
        "UNVERIFIABLE",
        "snapshot 424242 of sales.orders is gone (expired)",
    )
    assert replaced.reason == "the source sales.orders was replaced by another table since"
    assert fine.verdict == "EXACT" and len(asked) == 1


def test_a_table_with_no_refresh_state_yet_is_a_409_at_once_and_nothing_is_recorded(mt, editor):
    commit_snapshot("sales", "daily", "overwrite", summary=user_change("alice"))
    workers.beat("host:1")
    client = APIClient()
    client.force_authenticate(editor)
    response = client.post(
        "/api/namespaces/sales/materialized-tables/daily/verify", {}, format="json"
    )
    # Decided in the request, before anything would need the worker's Spark.
    assert response.status_code == 409
    assert "no snapshot that records a refresh state" in response.json()["error"]
    assert not SparkJob.objects.exists() and not Verification.objects.exists()


@pytest.mark.parametrize("snapshots", [0, 21, -1, "x", True, 2**70, None, [1], {"a": 1}, 1.5])
def test_hostile_snapshot_counts_are_400s_that_queue_nothing(mt, editor, snapshots):
    workers.beat("host:1")
    client = APIClient()
    client.force_authenticate(editor)
    response = client.post(
        "/api/namespaces/sales/materialized-tables/daily/verify",
        {"snapshots": snapshots},
        format="json",
    )
    assert response.status_code == 400, response.content
    assert "snapshots" in response.content.decode()
    assert not SparkJob.objects.exists()


def test_a_viewer_cannot_ask_for_a_verification_and_a_missing_table_is_a_404(mt, viewer, editor):
    workers.beat("host:1")
    client = APIClient()
    client.force_authenticate(viewer)
    url = "/api/namespaces/sales/materialized-tables/daily/verify"
    assert client.post(url, {}, format="json").status_code == 403
    client.force_authenticate(editor)
    missing = "/api/namespaces/sales/materialized-tables/nope/verify"
    assert client.post(missing, {}, format="json").status_code == 404
    assert not SparkJob.objects.exists()


def test_the_api_answers_the_job_and_then_lists_the_verdicts(mt, editor, given_verdict):
    _, snapshot = refreshed(mt)
    workers.beat("host:1")
    client = APIClient()
    client.force_authenticate(editor)
    response = client.post(
        "/api/namespaces/sales/materialized-tables/daily/verify", {"snapshots": 2}, format="json"
    )
    assert response.status_code == 202, response.content
    job = response.json()["job"]
    assert run(job["id"]) == "SUCCEEDED"
    result = client.get(job["url"]).json()["result"]
    assert [(v["snapshot_id"], v["verdict"]) for v in result["verifications"]] == [
        (snapshot, "EXACT")
    ]
    listed = client.get("/api/namespaces/sales/materialized-tables/daily/verifications/").json()
    assert [v["snapshot_id"] for v in listed["results"]] == [snapshot]
    assert listed["results"][0]["requested_by"] == editor.username


def test_the_page_shows_what_the_current_snapshot_answers_and_verifies(
    mt, editor, client, given_verdict
):
    source, snapshot = refreshed(mt)
    client.force_login(editor)
    page = client.get("/namespaces/sales/materialized-tables/daily/").content.decode()
    assert 'id="answer-sources"' in page and f"<code>{source}</code>" in page
    assert "definition version 1" in page and 'id="no-verifications"' in page

    workers.beat("host:1")
    response = client.post("/namespaces/sales/materialized-tables/daily/verify", {"snapshots": "1"})
    job = SparkJob.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    assert run(job.pk) == "SUCCEEDED"
    page = client.get("/namespaces/sales/materialized-tables/daily/").content.decode()
    assert 'id="verifications"' in page and f"<code>{snapshot}</code>" in page
    assert ">exact</span>" in page

    commit_snapshot("sales", "daily", "delete", summary=user_change(editor.username))
    page = client.get("/namespaces/sales/materialized-tables/daily/").content.decode()
    assert 'id="answer-user-change"' in page and editor.username in page


def test_verifications_kept_per_table_are_bounded(mt, given_verdict, monkeypatch):
    from refresh import services as mts

    monkeypatch.setattr(mts, "VERIFICATIONS_KEPT", 3)
    refreshed(mt)
    with analysis.on_worker():
        for _ in range(5):
            verification.verify(mt)
    assert mt.verifications.count() == 3


def test_the_command_prints_each_verdict_and_fails_when_one_differs(mt, given_verdict, capsys):
    _, answer = given_verdict
    _, snapshot = refreshed(mt)
    call_command("verify_materialized_table", "sales.daily")
    assert f"snapshot {snapshot}: EXACT" in capsys.readouterr().out
    answer["verdict"] = Verdict(
        columns=("ds", "total"), missing=0, extra=1, extra_sample=[["q", "9"]]
    )
    with pytest.raises(CommandError, match="1 of 1 snapshots differ"):
        call_command("verify_materialized_table", "sales.daily")
    out = capsys.readouterr().out
    assert f"snapshot {snapshot}: DIFFERS (0 rows missing, 1 extra)" in out
    assert "extra: ['q', '9']" in out
    with pytest.raises(CommandError, match="namespace.name"):
        call_command("verify_materialized_table", "daily")


BIG = "SELECT ds, amount FROM orders WHERE amount > 10"
OVER_VIEW = "SELECT ds, sum(amount) AS total FROM sales.big GROUP BY ds"


@pytest.fixture
def over_view(mt) -> MaterializedTable:
    """`mt` redefined over the view sales.big (on sales.orders)."""
    services.create_view(namespace="sales", name="big", sql=BIG)
    mt.versions.filter(version_id=1).update(query=OVER_VIEW)
    mt.query = OVER_VIEW
    mt.save(update_fields=["query"])
    return mt


def test_a_refresh_pins_a_views_tables_and_an_empty_table_through_the_expanded_view(
    over_view, caplog
):
    services.create_table(namespace="sales", name="empty", schema=ORDERS)
    query = f"{OVER_VIEW.replace(' GROUP BY', ' UNION ALL SELECT ds, amount FROM empty GROUP BY')}"
    source = commit_snapshot("sales", "orders", "append", 10)
    expanded, pins = runner.pinned(
        query, "sales", {"sales.orders": source, "sales.empty": None}, what="run 1"
    )
    # The view is read as its SQL, its table at the recorded snapshot; the empty one as empty.
    assert pins == {("sales", "orders"): source, ("sales", "empty"): None}
    assert "`lv`.`sales`.`orders`" in expanded.replace(settings.CATALOG_NAME, "lv")
    assert ".big" not in expanded and "amount > 10" in expanded
    # Its columns as the view's schema types them, as Spark reads a view.
    assert "CAST(`amount` AS DOUBLE) AS `amount`" in expanded
    assert not [r for r in caplog.records if "unpinned" in r.getMessage()]


def test_a_view_with_no_spark_sql_is_read_unpinned_and_the_log_says_so(mt, caplog):
    services.create_view(namespace="sales", name="trino_big", sql=BIG, dialect="trino")
    # Only the trino text: as an engine that writes one dialect would leave it.
    ViewRepresentation.objects.filter(version__view__name="trino_big").exclude(
        dialect="trino"
    ).delete()
    query = "SELECT ds, amount FROM sales.trino_big"
    with caplog.at_level(logging.WARNING, logger="refresh.runner"):
        expanded, pins = runner.pinned(query, "sales", {"sales.orders": 7}, what="Run 9")
    assert (expanded, pins) == (query, {})
    assert "Run 9 reads the view sales.trino_big: it has no Spark SQL" in caplog.text


def test_a_snapshot_of_a_table_over_a_view_is_verified_through_the_views_sql(
    over_view, given_verdict
):
    asked, _ = given_verdict
    source = commit_snapshot("sales", "orders", "append", 10)
    uuid = str(Table.objects.get(namespace__name="sales", name="orders").uuid)
    # A refresh that started after the view got its version.
    state = refresh_state(
        version=1, sources={"sales.orders": (uuid, source)}, started_ms=int(time.time() * 1000)
    )
    commit_snapshot("sales", "daily", "overwrite", 3, summary=state.summary())
    with analysis.on_worker():
        [result] = verification.verify(over_view)
    assert result.verdict == "EXACT"
    assert asked[0]["pins"] == {("sales", "orders"): source}
    assert "amount > 10" in asked[0]["query"] and ".big" not in asked[0]["query"]


def test_a_snapshot_over_a_view_that_changed_since_its_refresh_is_unverifiable(
    over_view, given_verdict
):
    asked, _ = given_verdict
    refreshed(over_view)  # a refresh started in 2023: the view's version is newer
    with analysis.on_worker():
        [result] = verification.verify(over_view)
    assert result.verdict == "UNVERIFIABLE" and not asked
    assert result.reason.startswith("the view sales.big has a new version since the refresh")

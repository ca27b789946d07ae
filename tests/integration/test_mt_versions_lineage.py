# ruff: noqa: F811 - pytest fixtures imported from test_mt_api are parameters here
"""Materialized tables, part 2, through Django's test client: the definition versions on the
table's page (timeline, diff, the "Change the query" form, rollback with a confirmation),
their API, and lineage (refresh/lineage.py, its page and its API) of a two-level cascade:
table orders -> view v -> materialized table a -> materialized table b. No Spark and no
Celery worker: the analyzer and the dispatch are faked as in test_mt_api."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.utils import timezone
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from catalog import services as catalog_services
from refresh import definitions, lineage, runs
from refresh import services as mts
from refresh.core.freshness import Freshness, TimeUnit
from refresh.models import MaterializedTable, MaterializedTableVersionLogEntry, RefreshRun
from tests.integration.test_mt_api import (  # noqa: F401 - fixtures
    dispatched,
    editor_api,
    sales,
    spark,
    viewer_api,
)

pytestmark = pytest.mark.django_db

A_PAGE = "/namespaces/sales/materialized-tables/a/"
B_PAGE = "/namespaces/sales/materialized-tables/b/"
A_QUERY = "SELECT ds, sum(amount) AS total FROM v GROUP BY ds"
B_QUERY = "SELECT ds, total FROM a"
WIDER = "SELECT ds, sum(amount) AS total, count(*) AS n FROM v GROUP BY ds"
WIDER_SCHEMA = StructType(
    [
        StructField("ds", StringType(), True),
        StructField("total", DoubleType(), True),
        StructField("n", LongType(), False),
    ]
).json()


@pytest.fixture
def cascade(editor, sales) -> dict[str, MaterializedTable]:
    """orders (table) -> v (view) -> a (materialized table) -> b (materialized table)."""
    catalog_services.create_view(
        namespace="sales", name="v", sql="SELECT ds, amount FROM orders", actor=editor
    )
    hourly = Freshness(1, TimeUnit.HOUR)
    a = mts.create_materialized_table(
        namespace="sales", name="a", query=A_QUERY, freshness=hourly, actor=editor
    )
    b = mts.create_materialized_table(
        namespace="sales", name="b", query=B_QUERY, freshness=hourly, actor=editor
    )
    return {"a": a, "b": b}


@pytest.fixture
def wider(monkeypatch) -> None:
    """The analyzer, for the altered query: one more column."""
    monkeypatch.setattr("refresh.analysis.query_schema", lambda query, *, namespace: WIDER_SCHEMA)


def finished(mt: MaterializedTable, *, ago: timedelta, seconds: float = 5) -> RefreshRun:
    run = runs.claim(runs.enqueue(mt, trigger="MANUAL").pk, worker="w:1")
    end = timezone.now() - ago
    runs.finish(run, state="SUCCEEDED", data_timestamp=end - timedelta(seconds=seconds))
    RefreshRun.objects.filter(pk=run.pk).update(
        started_at=end - timedelta(seconds=seconds), finished_at=end
    )
    return run


def applied(run: RefreshRun) -> None:
    """The rebuild run as a worker ends it once its commit landed (tests/spark commits)."""
    runs.claim(run.pk, worker="w:1")
    runs.apply_rebuild(run)


def altered(mt: MaterializedTable, editor, monkeypatch) -> MaterializedTable:
    monkeypatch.setattr("refresh.analysis.query_schema", lambda query, *, namespace: WIDER_SCHEMA)
    applied(definitions.alter_query(mt, query=WIDER, actor=editor))
    mt.refresh_from_db()
    return mt


# -- versions on the page ----------------------------------------------------------------------


def test_the_page_shows_the_version_timeline_and_each_versions_sql(
    client, editor, cascade, monkeypatch
):
    altered(cascade["a"], editor, monkeypatch)
    client.force_login(editor)

    html = client.get(A_PAGE).content.decode()

    assert 'id="current-version">version 2<' in html
    log = re.search(r'<ol class="timeline" id="version-log">(.*?)</ol>', html, re.S).group(1)
    entries = re.findall(r'data-version-id="(\d+)" data-operation="(\w+)"', log)
    assert entries == [("2", "alter"), ("1", "create")], "newest first"
    assert "erin" in log
    versions = re.search(r'<table class="list" id="versions">(.*?)</table>', html, re.S).group(1)
    assert "sum(amount) AS total FROM v GROUP BY ds" in versions
    assert "count(*) AS n FROM v" in versions
    assert "/diff?left=1&amp;right=2" in versions, "compare with previous"
    assert 'href="/namespaces/sales/materialized-tables/a/rollback/1"' in html
    assert 'href="/namespaces/sales/materialized-tables/a/rollback/2"' not in html
    assert 'id="mt-alter"' in html and 'id="lineage-link"' in html
    assert 'id="diff-form"' in html


def test_the_diff_page_shows_two_versions_side_by_side(
    client, viewer, editor, cascade, monkeypatch
):
    altered(cascade["a"], editor, monkeypatch)
    client.force_login(viewer)

    response = client.get(f"{A_PAGE}diff?left=1&right=2")

    assert response.status_code == 200
    html = response.content.decode()
    table = re.search(r'<table class="diff" id="diff">(.*?)</table>', html, re.S).group(1)
    assert '<th colspan="2">v1 ' in table and "v2 " in table
    assert 'class="replace"' in table and "<mark>" in table
    assert "count(*) AS n" in table

    default = client.get(f"{A_PAGE}diff")
    assert default.status_code == 200, "by default: the version in force and the one before"
    assert '<option value="1" selected>' in default.content.decode()


@pytest.mark.parametrize("query", ["left=9&right=1", "left=x&right=1", "left=1&right=99999999999"])
def test_an_unknown_diff_version_is_a_clear_message(client, viewer, cascade, query):
    client.force_login(viewer)

    response = client.get(f"{A_PAGE}diff?{query}")

    assert response.status_code == 400
    html = response.content.decode()
    assert 'id="form-errors"' in html and "There is no version" in html
    assert "the versions are v1" in html


def test_the_alter_form_makes_version_2_and_queues_a_rebuild(
    client,
    editor,
    cascade,
    dispatched,
    wider,
):
    client.force_login(editor)
    form = client.get(f"{A_PAGE}alter")
    assert form.status_code == 200
    assert A_QUERY in form.content.decode(), "the textarea starts from the current query"
    before = set(RefreshRun.objects.values_list("pk", flat=True))

    response = client.post(f"{A_PAGE}alter", {"query": WIDER}, follow=True)

    assert response.redirect_chain[-1][0] == A_PAGE
    mt = MaterializedTable.objects.get(table__name="a")
    assert mt.current_version == 1 and mt.query == A_QUERY, "until the rebuild commits"
    [run] = RefreshRun.objects.exclude(pk__in=before)
    assert run.trigger == "REBUILD" and run.state == "QUEUED" and run.pk in dispatched
    assert run.definition_version == 2
    html = response.content.decode()
    assert f"Version 2 of sales.a is being built by job {run.pk}" in html
    assert 'id="change-pending"' in html and "readers see version 1" in html
    log = list(mt.version_log.values_list("operation", "outcome"))
    assert log == [("create", "APPLIED"), ("alter", "PENDING")]

    applied(run)
    mt.refresh_from_db()
    assert mt.current_version == 2 and mt.query == WIDER
    assert 'id="change-pending"' not in client.get(A_PAGE).content.decode()


def test_a_change_whose_rebuild_failed_is_said_on_the_page_with_the_reason(
    client, viewer, editor, cascade, dispatched, wider
):
    run = definitions.alter_query(cascade["a"], query=WIDER, actor=editor)
    runs.fail_rebuild(run, error="[USER_RAISED_EXCEPTION] '(total > 0)' is not true!")
    client.force_login(viewer)

    html = client.get(A_PAGE).content.decode()

    notice = re.search(r'id="change-failed">(.*?)</p>', html, re.S).group(1)
    assert "The alter to version 2 did not take effect" in notice
    assert "is not true!" in notice and "keeps version 1" in notice
    assert 'id="current-version">version 1<' in html
    log = re.search(r'<ol class="timeline" id="version-log">(.*?)</ol>', html, re.S).group(1)
    assert "did not take effect" in log


def test_the_alter_form_shows_an_sql_error_beside_the_field_with_its_position(
    client, editor, cascade
):
    client.force_login(editor)

    response = client.post(f"{A_PAGE}alter", {"query": "SELECT ds,\n  total FROM nowhere"})

    assert response.status_code == 400
    html = response.content.decode()
    errors = re.search(r'id="query-errors">(.*?)</ul>', html, re.S).group(1)
    assert "Table or view not found: sales.nowhere" in errors
    assert "line 2, column 14" in errors
    assert 'id="error-position"' in html and "At line 2, column 14" in html
    assert MaterializedTable.objects.get(table__name="a").current_version == 1

    same = client.post(f"{A_PAGE}alter", {"query": A_QUERY})
    assert same.status_code == 400 and "already the table" in same.content.decode()
    empty = client.post(f"{A_PAGE}alter", {"query": "  "})
    assert empty.status_code == 400


def test_rollback_asks_for_confirmation_then_rolls_back(
    client,
    editor,
    cascade,
    monkeypatch,
    dispatched,
):
    altered(cascade["a"], editor, monkeypatch)
    client.force_login(editor)

    confirm = client.get(f"{A_PAGE}rollback/1")
    assert confirm.status_code == 200
    html = confirm.content.decode()
    assert 'id="confirm-rollback"' in html and "Roll back to version 1" in html
    assert MaterializedTable.objects.get(table__name="a").current_version == 2

    response = client.post(f"{A_PAGE}rollback/1", follow=True)

    assert response.redirect_chain[-1][0] == A_PAGE
    assert "Version 1 of sales.a is being built by job" in response.content.decode()
    run = RefreshRun.objects.get(trigger="REBUILD", definition_version=1)
    applied(run)
    mt = MaterializedTable.objects.get(table__name="a")
    assert mt.current_version == 1 and mt.query == A_QUERY
    log = list(mt.version_log.values_list("version_id", "operation"))
    assert log == [(1, "create"), (2, "alter"), (1, "rollback")]

    current = client.get(f"{A_PAGE}rollback/1")
    assert 'id="already-current"' in current.content.decode()
    assert 'id="confirm-rollback"' not in current.content.decode()
    assert client.get(f"{A_PAGE}rollback/7").status_code == 404
    assert client.get(f"{A_PAGE}rollback/99999999999").status_code == 404


def test_a_viewer_sees_versions_but_no_edit_buttons(client, viewer, editor, cascade, monkeypatch):
    altered(cascade["a"], editor, monkeypatch)
    client.force_login(viewer)

    html = client.get(A_PAGE).content.decode()

    assert 'id="version-log"' in html and 'id="versions"' in html
    assert 'id="mt-alter"' not in html and "rollback-button" not in html
    assert "/rollback/" not in html
    assert client.get(f"{A_PAGE}alter").status_code == 403
    assert client.post(f"{A_PAGE}alter", {"query": A_QUERY}).status_code == 403
    assert client.get(f"{A_PAGE}rollback/1").status_code == 403
    assert client.post(f"{A_PAGE}rollback/1").status_code == 403
    assert MaterializedTable.objects.get(table__name="a").current_version == 2


# -- versions through the API ------------------------------------------------------------------


def test_the_versions_api_lists_versions_and_the_log(
    editor_api,
    viewer_api,
    editor,
    cascade,
    monkeypatch,
):
    altered(cascade["a"], editor, monkeypatch)

    response = viewer_api.get("/api/namespaces/sales/materialized-tables/a/versions/")

    assert response.status_code == 200
    body = response.json()
    assert body["current_version"] == 2
    assert [v["version_id"] for v in body["versions"]] == [2, 1]
    assert [v["is_current"] for v in body["versions"]] == [True, False]
    assert body["versions"][1]["query"] == A_QUERY and body["versions"][1]["sources"] == ["sales.v"]
    assert [(e["version_id"], e["operation"], e["actor"]) for e in body["log"]] == [
        (2, "alter", "erin"),
        (1, "create", "erin"),
    ]
    missing = viewer_api.get("/api/namespaces/sales/materialized-tables/nope/versions/")
    assert missing.status_code == 404


def test_the_definition_api_alters_and_rolls_back(
    editor_api,
    viewer_api,
    cascade,
    dispatched,
    wider,
):
    url = "/api/namespaces/sales/materialized-tables/a/"

    refused = viewer_api.post(f"{url}definition", {"query": WIDER}, format="json")
    assert refused.status_code == 403

    altered_response = editor_api.post(f"{url}definition", {"query": WIDER}, format="json")
    assert altered_response.status_code == 200, altered_response.json()
    body = altered_response.json()
    assert body["current_version"] == 1 and body["query"] == A_QUERY
    pending = body["pending_change"]
    assert (pending["version_id"], pending["operation"], pending["outcome"]) == (
        2,
        "alter",
        "PENDING",
    )
    rebuild = editor_api.get(f"/api/refresh-runs/{pending['run_id']}/").json()
    assert (rebuild["trigger"], rebuild["state"]) == ("REBUILD", "QUEUED")
    busy = editor_api.post(f"{url}rollback", {"version_id": 1}, format="json")
    assert busy.status_code == 409 and "being applied" in busy.json()["error"]
    applied(RefreshRun.objects.get(pk=pending["run_id"]))

    bad = editor_api.post(f"{url}definition", {"query": "SELECT * FROM\n nowhere"}, format="json")
    assert bad.status_code == 400
    assert bad.json()["line"] == 2 and bad.json()["field"] == "query"
    typo = editor_api.post(f"{url}definition", {"sql": WIDER}, format="json")
    assert typo.status_code == 400

    rolled = editor_api.post(f"{url}rollback", {"version_id": 1}, format="json")
    assert rolled.status_code == 200 and rolled.json()["pending_change"]["version_id"] == 1
    assert MaterializedTableVersionLogEntry.objects.filter(operation="rollback").count() == 1
    applied(RefreshRun.objects.get(pk=rolled.json()["pending_change"]["run_id"]))

    again = editor_api.post(f"{url}rollback", {"version_id": 1}, format="json")
    assert again.status_code == 400, "already current"
    for wrong in (7, 2**40, "x", -1):
        answer = editor_api.post(f"{url}rollback", {"version_id": wrong}, format="json")
        assert answer.status_code in (400, 404), (wrong, answer.status_code)
    assert editor_api.post(f"{url}rollback", {"version_id": 7}, format="json").status_code == 404


def test_the_new_endpoints_are_in_the_openapi_schema(viewer_api):
    response = viewer_api.get("/api/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    paths = json.loads(response.content)["paths"]
    base = "/api/namespaces/{namespace}/materialized-tables/{name}/"
    assert f"{base}versions/" in paths
    assert "post" in paths[f"{base}definition"] and "post" in paths[f"{base}rollback"]
    assert "/api/lineage/" in paths


# -- lineage -------------------------------------------------------------------------------------


def _ids(graph: dict) -> set[str]:
    return {node["id"] for node in graph["nodes"]}


def _edges(graph: dict) -> set[tuple[str, str]]:
    return {(edge["source"], edge["target"]) for edge in graph["edges"]}


CASCADE_EDGES = {("sales.orders", "sales.v"), ("sales.v", "sales.a"), ("sales.a", "sales.b")}


def test_lineage_from_the_last_table_of_a_cascade_goes_all_the_way_up(cascade):
    finished(cascade["a"], ago=timedelta(hours=3))

    graph = lineage.lineage("sales", "b")

    assert _ids(graph) == {"sales.orders", "sales.v", "sales.a", "sales.b"}
    assert _edges(graph) == CASCADE_EDGES
    by_id = {node["id"]: node for node in graph["nodes"]}
    assert by_id["sales.orders"]["kind"] == "table"
    assert by_id["sales.v"]["kind"] == "view"
    assert by_id["sales.v"]["url"] == "/namespaces/sales/views/v/"
    a = by_id["sales.a"]
    assert a["kind"] == "materialized table" and a["url"] == A_PAGE
    assert a["state"] == "ACTIVATED" and a["refresh_mode"] == "FULL"
    assert a["freshness"] == "INTERVAL '1' HOUR"
    assert a["lag_seconds"] > 3 * 3600 and a["late"] is True
    assert by_id["sales.b"]["lag_seconds"] is None and by_id["sales.b"]["late"] is False
    assert by_id["sales.b"]["focus"] and not graph["truncated"]


def test_lineage_from_the_source_table_goes_downstream(cascade):
    graph = lineage.lineage("sales", "orders")

    assert _ids(graph) == {"sales.orders", "sales.v", "sales.a", "sales.b"}
    assert _edges(graph) == CASCADE_EDGES

    middle = lineage.lineage("sales", "v")
    assert _edges(middle) == CASCADE_EDGES, "both ways from the middle"

    shallow = lineage.lineage("sales", "orders", depth=1)
    assert _ids(shallow) == {"sales.orders", "sales.v"} and shallow["truncated"]
    small = lineage.lineage("sales", "orders", limit=2)
    assert len(small["nodes"]) == 2 and small["truncated"]


def test_lineage_ignores_names_that_only_look_alike_and_marks_unknown_sources(
    cascade, editor, django_assert_max_num_queries
):
    # "a_copy" contains "a" and reads orders: not a reader of a.
    catalog_services.create_view(
        namespace="sales", name="a_copy", sql="SELECT ds FROM orders", actor=editor
    )
    MaterializedTable.objects.filter(table__name="b").update(sources=["sales.a", "sales.gone"])

    with django_assert_max_num_queries(40):
        around_a = lineage.lineage("sales", "a")
    assert _ids(around_a) == {"sales.orders", "sales.v", "sales.a", "sales.b"}, (
        "what reads a and what a reads; not a_copy, nor gone (a source of b, not of a)"
    )

    graph = lineage.lineage("sales", "b")

    assert _ids(graph) == {"sales.orders", "sales.v", "sales.a", "sales.b", "sales.gone"}
    gone = next(n for n in graph["nodes"] if n["id"] == "sales.gone")
    assert gone["kind"] == "unknown" and gone["url"] is None
    assert ("sales.gone", "sales.b") in _edges(graph)


def test_the_lineage_page_embeds_the_graph_and_the_pages_link_to_it(client, viewer, cascade):
    client.force_login(viewer)

    response = client.get("/lineage/sales/b/")

    assert response.status_code == 200
    html = response.content.decode()
    assert '<svg id="lineage-graph"' in html and "js/lineage.js" in html
    data = json.loads(
        re.search(
            r'<script id="lineage-data" type="application/json">(.*?)</script>', html, re.S
        ).group(1)
    )
    assert _edges(data) == CASCADE_EDGES
    for node in ("sales.orders", "sales.v", "sales.a", "sales.b"):
        assert f'data-node="{node}"' in html, "listed below the graph too"

    for page in (B_PAGE, "/namespaces/sales/tables/orders/", "/namespaces/sales/views/v/"):
        linked = client.get(page).content.decode()
        assert 'id="lineage-link"' in linked, page
    assert client.get("/lineage/sales/orders/").status_code == 200
    assert client.get("/lineage/sales/v/").status_code == 200


def test_lineage_of_an_unknown_object_is_a_404(client, viewer, viewer_api, cascade):
    client.force_login(viewer)
    assert client.get("/lineage/sales/nope/").status_code == 404
    assert client.get("/lineage/nowhere/b/").status_code == 404
    assert (
        viewer_api.get("/api/lineage/", {"namespace": "sales", "name": "nope"}).status_code == 404
    )
    assert viewer_api.get("/api/lineage/", {"namespace": "no", "name": "b"}).status_code == 404
    assert viewer_api.get("/api/lineage/", {"namespace": "sales"}).status_code == 400
    assert (
        viewer_api.get(
            "/api/lineage/", {"namespace": "sales", "name": "b", "depth": "99"}
        ).status_code
        == 400
    )


def test_the_lineage_api_answers_nodes_and_edges(viewer_api, cascade):
    response = viewer_api.get("/api/lineage/", {"namespace": "sales", "name": "b"})

    assert response.status_code == 200
    body = response.json()
    assert body["focus"] == "sales.b"
    assert _ids(body) == {"sales.orders", "sales.v", "sales.a", "sales.b"}
    assert _edges(body) == CASCADE_EDGES
    a = next(n for n in body["nodes"] if n["id"] == "sales.a")
    assert {"state", "refresh_mode", "freshness", "lag_seconds", "late"} <= set(a)

    downstream = viewer_api.get("/api/lineage/", {"namespace": "sales", "name": "orders"}).json()
    assert _edges(downstream) == CASCADE_EDGES


def test_the_lineage_api_needs_a_role(client, cascade, django_user_model):
    nobody = django_user_model.objects.create_user("nobody", password="pw")
    client.force_login(nobody)
    assert client.get("/api/lineage/?namespace=sales&name=b").status_code == 403
    assert client.get("/lineage/sales/b/").status_code == 403


def test_the_namespace_list_shows_lag_and_marks_late_tables(client, viewer, cascade):
    finished(cascade["a"], ago=timedelta(hours=2))
    finished(cascade["b"], ago=timedelta(minutes=1))
    client.force_login(viewer)

    html = client.get("/namespaces/sales/materialized-tables/").content.decode()

    row_a = re.search(r'<tr id="mt-a" class="late">(.*?)</tr>', html, re.S).group(1)
    assert "badge late" in row_a and "2 h 0 min" in row_a
    row_b = re.search(r'<tr id="mt-b" class="">(.*?)</tr>', html, re.S).group(1)
    assert "badge late" not in row_b and "1 min" in row_b

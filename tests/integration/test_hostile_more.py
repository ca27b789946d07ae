"""More hostile input, found by an attacker's review: each test is a way an editor could
make the app touch what another object owns, tried against the real endpoints."""

from __future__ import annotations

import pytest

from catalog.models import CatalogObject
from tests.integration.test_iceberg_rest import Iceberg, assert_error, token_for
from tests.integration.test_purge_safety import create, snapshot_of

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "location",
    [
        "{orders}.checkpoints",
        "{orders}.checkpoints/mine",
        "{orders}.checkpoints/v1-1/sources",
        "file://{orders}.checkpoints/mine",
    ],
)
def test_no_object_may_live_in_the_folder_kept_beside_a_table_for_its_stream_checkpoints(
    api, ns, warehouse, location
):
    """A continuous table's streams keep their checkpoints in `<location>.checkpoints`, and
    the table's drop removes that folder whole (refresh.streams): an object living there
    would lose every file with it, though no two objects' locations overlapped."""
    assert create(api, "orders").status_code == 200
    orders = CatalogObject.objects.get(name="orders").location
    (warehouse / "ns" / "orders.checkpoints" / "v1-1").mkdir(parents=True)
    before = snapshot_of(warehouse)

    response = create(api, "squatter", location.format(orders=orders))

    error = assert_error(response, 409, "AlreadyExistsException")
    assert f"{orders}.checkpoints" in error["message"]
    assert "table ns.orders" in error["message"]
    assert not CatalogObject.objects.filter(name="squatter").exists()
    assert snapshot_of(warehouse) == before, "nothing was written"


def test_a_table_whose_checkpoint_folder_another_object_lives_in_is_refused(api, ns, warehouse):
    """The other way round: the new table's `<location>.checkpoints` would hold an object
    made before it."""
    early = f"{warehouse}/ns/later.checkpoints/early"
    assert create(api, "early", early).status_code == 200

    response = create(api, "later")

    error = assert_error(response, 409, "AlreadyExistsException")
    assert "table ns.early" in error["message"]
    assert not CatalogObject.objects.filter(name="later").exists()
    # A neighbour whose name only starts the same is no one's checkpoint folder.
    assert create(api, "late", f"{warehouse}/ns/later.checkpointsx").status_code == 200


def test_a_viewers_engine_cannot_fill_the_database_with_one_huge_metrics_report(viewer, api, ns):
    """Viewers' engines may send scan reports (POST .../metrics), and a body may be 8 MiB:
    a report no engine sends that large is refused, and nothing is stored."""
    from catalog.models import TableMetricsReport

    assert create(api, "t").status_code == 200
    reader = Iceberg(token_for(viewer))
    huge = {"report-type": "scan-report", "projected-field-names": ["x" * 1000] * 1000}

    response = reader.post("/namespaces/ns/tables/t/metrics", huge)

    error = assert_error(response, 400, "BadRequestException")
    assert "too large" in error["message"]
    assert not TableMetricsReport.objects.exists()


def test_metrics_reports_are_kept_bounded_per_table_newest_first(viewer, api, ns, settings):
    """Every scan of every engine sends a report: a table keeps only its newest ones, so no
    reader, hostile or busy, grows the database without end."""
    from catalog.models import TableMetricsReport

    settings.METRICS_REPORTS_PER_TABLE = 5
    assert create(api, "t").status_code == 200
    assert create(api, "u").status_code == 200
    reader = Iceberg(token_for(viewer))
    for number in range(8):
        report = {"report-type": "scan-report", "snapshot-id": number}
        assert reader.post("/namespaces/ns/tables/t/metrics", report).status_code == 204
    assert reader.post("/namespaces/ns/tables/u/metrics", {"report-type": "x"}).status_code == 204

    kept = TableMetricsReport.objects.filter(table_name="ns.t").order_by("id")
    assert [row.report["snapshot-id"] for row in kept] == [3, 4, 5, 6, 7]
    assert TableMetricsReport.objects.filter(table_name="ns.u").count() == 1


@pytest.mark.parametrize("revoke", ["demoted", "deactivated", "deleted"])
def test_a_job_runs_only_while_its_requester_still_holds_the_role_it_needs(
    editor, viewer, revoke, settings, monkeypatch
):
    """A change that needed Spark waits as a job (up to JOBS_QUEUED_TIMEOUT_SECONDS): an
    editor demoted, deactivated or deleted meanwhile must not have it made for them (a
    deleted one's would be recorded as no one's)."""
    from django.contrib.auth.models import Group

    from catalog import jobs, services, workers
    from catalog.models import SparkJob, View
    from catalog.roles import EDITOR, VIEWER

    # Jobs run here without Spark: the worker's executor would start a Spark JVM in the
    # test process, whose settings every later Spark test of this process would inherit.
    monkeypatch.setattr(jobs, "_executor", jobs.Executor())

    # Made by no one: the editor's right to create in it is the editor role's alone (an
    # owner of the namespace would keep creating in it whatever their roles).
    services.create_namespace(name="ns", actor=None)
    workers.beat("host:1")
    job = jobs.submit(
        "create_view",
        {"namespace": "ns", "name": "late", "sql": "SELECT 1 AS x"},
        actor=editor,
        summary="Create view ns.late",
    )
    preview = jobs.submit(
        "preview_view", {"namespace": "ns", "name": "nothing"}, actor=viewer, summary="preview"
    )
    if revoke == "demoted":
        editor.groups.remove(Group.objects.get(name=EDITOR))
        editor.groups.add(Group.objects.get_or_create(name=VIEWER)[0])
    elif revoke == "deactivated":
        editor.is_active = False
        editor.save()
    else:
        editor.delete()

    assert jobs.run(job.pk) == "FAILED"

    job.refresh_from_db()
    assert job.status == 403, job.error
    assert "editor" in job.error["message"]
    assert not View.objects.filter(name="late").exists()
    # A viewer's job still runs for a viewer (here: a 404, the view does not exist).
    assert jobs.run(preview.pk) == "FAILED"
    preview.refresh_from_db()
    assert preview.status == 404
    assert SparkJob.objects.get(pk=preview.pk).error["type"] == "NoSuchView"


def _commit_snapshot(api, table: str, manifest_list: str):
    import time

    snapshot = {
        "snapshot-id": 11,
        "timestamp-ms": int(time.time() * 1000),
        "manifest-list": manifest_list,
        "summary": {"operation": "append"},
        "schema-id": 0,
        "sequence-number": 1,
    }
    body = {
        "requirements": [],
        "updates": [
            {"action": "add-snapshot", "snapshot": snapshot},
            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 11},
        ],
    }
    return api.post(f"/namespaces/ns/tables/{table}", body)


@pytest.mark.parametrize("manifest_list", ["/etc/passwd", "/proc/self/environ", "/no/such.avro"])
def test_a_table_whose_manifest_list_is_not_one_answers_viewers_a_4xx_that_shows_nothing_of_it(
    api, ns, client, viewer, manifest_list
):
    """An editor's engine commits a snapshot naming any file as its manifest list: the
    table's preview, file list and page, which any viewer opens, must say the metadata is
    unreadable (they were 500s), and neither echo the file nor tell whether it exists."""
    from rest_framework.test import APIClient

    assert create(api, "t").status_code == 200
    assert _commit_snapshot(api, "t", manifest_list).status_code == 200
    reader = APIClient()
    reader.force_authenticate(viewer)
    messages = set()
    for endpoint in ("preview", "files"):
        response = reader.get(f"/api/namespaces/ns/tables/t/{endpoint}")
        assert response.status_code == 400, response.content
        message = response.json()["error"]
        assert "cannot be read" in message
        messages.add(message.replace(manifest_list, "<file>"))
    assert len(messages) == 1
    assert "root:" not in str(messages) and "PATH=" not in str(messages)
    assert "NotFound" not in str(messages)
    client.force_login(viewer)
    assert client.get("/namespaces/ns/tables/t/").status_code == 200
    page = client.get("/namespaces/ns/tables/t/", {"files": "1"})
    assert page.status_code == 200
    assert b"cannot be read" in page.content


def visit_unless_it_hangs(visit, pipe, answers: dict) -> None:
    """Run `visit` on a thread for up to 20 s; if it is still waiting (on `pipe`), open the
    pipe's other end so that the thread and the test run go on, and fail."""
    import os
    import threading

    visitor = threading.Thread(target=visit, daemon=True)
    visitor.start()
    visitor.join(20)
    if visitor.is_alive():
        os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))
        visitor.join(10)
        pytest.fail(f"a read of the pipe hung (answers so far: {answers})")


@pytest.mark.django_db(transaction=True)  # the visitor thread sees the test's rows
def test_a_manifest_list_that_is_a_pipe_does_not_hang_the_pages_of_its_table(
    api, ns, client, viewer, warehouse
):
    """An engine that writes into the warehouse can make a FIFO there and commit it as a
    manifest list: each page view of the table then waited forever on it, one server thread
    gone per view. Metadata files are read only when they are regular files."""
    import os

    from rest_framework.test import APIClient

    pipe = warehouse / "ns" / "t" / "metadata" / "snap-11.avro"
    assert create(api, "t").status_code == 200
    pipe.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(pipe)
    assert _commit_snapshot(api, "t", str(pipe)).status_code == 200
    reader = APIClient()
    reader.force_authenticate(viewer)
    client.force_login(viewer)
    answers: dict[str, int] = {}

    def visit() -> None:
        answers["page"] = client.get("/namespaces/ns/tables/t/").status_code
        answers["files"] = reader.get("/api/namespaces/ns/tables/t/files").status_code
        answers["preview"] = reader.get("/api/namespaces/ns/tables/t/preview").status_code

    visit_unless_it_hangs(visit, pipe, answers)
    assert answers == {"page": 200, "files": 400, "preview": 400}


@pytest.mark.django_db(transaction=True)  # the visitor thread sees the test's rows
def test_a_data_file_that_is_a_pipe_does_not_hang_a_viewers_preview(
    tmp_path, settings, editor, viewer
):
    """Whoever writes a table's folder (an attached table's writer, an engine) can put a
    FIFO where its metadata names a data file: a viewer's preview waited on it forever."""
    import os

    from rest_framework.test import APIClient

    from catalog import services
    from tests.unit.test_preview import BY_REGION, SCHEMA, row
    from tests.unit.test_preview_tables import create_table, write

    settings.ATTACH_LOCATIONS = [str(tmp_path / "external")]
    folder = tmp_path / "external" / "sales"
    table = create_table(folder, SCHEMA, BY_REGION)
    write(table, [row(1, "eu")])
    [data_file] = [p for p in folder.rglob("*.parquet")]
    data_file.unlink()
    os.mkfifo(data_file)
    services.create_namespace(name="ext", actor=editor)
    services.attach_table(namespace="ext", name="sales", location=str(folder))
    reader = APIClient()
    reader.force_authenticate(viewer)
    answers: dict[str, object] = {}

    def visit() -> None:
        response = reader.get("/api/namespaces/ext/tables/sales/preview")
        answers["preview"] = (response.status_code, response.json().get("error", ""))

    visit_unless_it_hangs(visit, data_file, answers)
    status, message = answers["preview"]
    assert status == 400
    assert "cannot be read" in message and str(data_file) in message


def test_the_spark_settings_to_paste_turn_off_variable_substitution(client, editor):
    """A reader's own Spark expands `${env:...}` in a view's SQL (Iceberg's view expansion
    parses it with the session's parser): the settings the app gives an engine turn that
    off, as the app's own sessions do."""
    client.force_login(editor)
    page = client.post("/credentials/", {"name": "laptop"})
    assert page.status_code == 200
    assert b"spark.sql.variable.substitute=false" in page.content


def test_a_demoted_editor_who_owns_the_namespace_still_has_their_job_run(
    editor, settings, monkeypatch
):
    """Ownership is a grant of its own (catalog.access: `own` implies every privilege): an
    editor removed from the editor group keeps creating in the namespace they made, as the
    owner of a schema does in Snowflake or Unity Catalog."""
    from django.contrib.auth.models import Group

    from catalog import jobs, services, workers
    from catalog.models import View
    from catalog.roles import EDITOR

    monkeypatch.setattr(jobs, "_executor", jobs.Executor())
    services.create_namespace(name="ns", actor=editor)
    workers.beat("host:1")
    job = jobs.submit(
        "create_view",
        {"namespace": "ns", "name": "late", "sql": "SELECT 1 AS x"},
        actor=editor,
        summary="Create view ns.late",
    )
    editor.groups.remove(Group.objects.get(name=EDITOR))

    assert jobs.run(job.pk) == "SUCCEEDED"
    assert View.objects.filter(namespace__name="ns", name="late").exists()

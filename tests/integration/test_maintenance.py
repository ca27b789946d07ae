"""Table maintenance without Spark: the policy (read and changed through the API and the
page, as properties committed through the one commit path), runs queued in order and never
twice, claimed one at a time per table, failed when their worker goes silent, the sweep's
decisions from the mirror, health samples, and pruning."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from catalog import services
from catalog.models import CatalogEvent, Namespace, Table
from maintenance import selectors
from maintenance import services as maintenance
from maintenance.core.policy import Action
from maintenance.models import HealthSample, MaintenanceRun
from refresh.models import MaterializedTable

pytestmark = pytest.mark.django_db

SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "x", "type": "long", "required": False}],
}
MINUTE_MS = 60 * 1000


def make_table(name: str = "events", namespace: str = "ops") -> Table:
    if not Namespace.objects.filter(name=namespace).exists():
        services.create_namespace(name=namespace)
    return services.create_table(namespace=namespace, name=name, schema=SCHEMA).obj


def make_mt(name: str = "totals") -> MaterializedTable:
    table = make_table(name)
    return MaterializedTable.objects.create(
        table=table,
        query="SELECT x FROM ops.events",
        freshness_value=10,
        freshness_unit="SECOND",
        refresh_mode="CONTINUOUS",
        mode_is_explicit=True,
        state="ACTIVATED",
    )


def add_snapshots(table: Table, *, count: int, age_minutes: float, files: int = 1) -> None:
    """`count` append snapshots, the first `age_minutes` old, each with `files` more files."""
    now = int(timezone.now().timestamp() * 1000)
    start = now - int(age_minutes * MINUTE_MS)
    step = (now - start) // max(count, 1)
    parent = table.current_snapshot_id
    for i in range(count):
        snapshot_id = (table.pk * 1000) + i + 1 + (table.snapshots.count() * 7)
        total = (i + 1) * files
        updates = [
            {
                "action": "add-snapshot",
                "snapshot": {
                    "snapshot-id": snapshot_id,
                    **({"parent-snapshot-id": parent} if parent else {}),
                    "sequence-number": table.snapshots.count() + 1,
                    "timestamp-ms": start + i * step,
                    "manifest-list": f"{table.location}/metadata/snap-{snapshot_id}.avro",
                    "summary": {
                        "operation": "append",
                        "total-data-files": str(total),
                        "total-files-size": str(total * 1024),
                        "total-delete-files": "0",
                    },
                    "schema-id": 0,
                },
            },
            {
                "action": "set-snapshot-ref",
                "ref-name": "main",
                "type": "branch",
                "snapshot-id": snapshot_id,
            },
        ]
        services.commit_table(
            namespace=table.namespace.name, name=table.name, requirements=[], updates=updates
        )
        table.refresh_from_db()
        parent = snapshot_id


@pytest.fixture
def editor_api(editor) -> APIClient:
    client = APIClient()
    client.force_authenticate(editor)
    return client


@pytest.fixture
def viewer_api(viewer) -> APIClient:
    client = APIClient()
    client.force_authenticate(viewer)
    return client


def policy_url(table: Table) -> str:
    return f"/api/namespaces/{table.namespace.name}/tables/{table.name}/maintenance"


def test_a_plain_table_is_not_maintained_until_asked_and_asking_commits_a_property(
    editor_api: APIClient,
) -> None:
    table = make_table()
    body = editor_api.get(policy_url(table)).json()
    assert body["enabled"] is False and body["enabled_by"] == "default"

    response = editor_api.patch(
        policy_url(table),
        {"enabled": True, "properties": {"history.expire.max-snapshot-age-ms": "3600000"}},
        format="json",
    )

    assert response.status_code == 200, response.content
    assert response.json()["enabled"] and response.json()["max_snapshot_age_ms"] == 3600000
    table.refresh_from_db()
    assert table.properties["lakeview.maintenance.enabled"] == "true"
    assert CatalogEvent.objects.for_object(table).filter(action="commit_table").exists()


def test_a_materialized_table_is_maintained_by_default_with_a_retention_from_its_freshness(
    editor_api: APIClient,
) -> None:
    mt = make_mt()
    body = editor_api.get(policy_url(mt.table)).json()
    assert body["enabled"] is True and body["enabled_by"] == "default"
    assert body["max_snapshot_age_ms"] == 10 * MINUTE_MS


def test_a_namespace_property_turns_maintenance_on_for_its_tables(editor_api) -> None:
    table = make_table()
    services.update_namespace_properties(
        name="ops", updates={"lakeview.maintenance.enabled": "true"}, removals=[]
    )
    table.refresh_from_db()
    assert selectors.policy_of(table).enabled_by == "namespace"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"properties": {"history.expire.min-snapshots-to-keep": "0"}}, "min-snapshots-to-keep"),
        ({"properties": {"lakeview.maintenance.orphan-age-ms": "5"}}, "orphan-age-ms"),
        ({"properties": {"write.format.default": "orc"}}, "write.format.default"),
        ({"enabled": "perhaps"}, "enabled"),
        ({"enabled": [1]}, "enabled"),
        ({"properties": ["enabled"]}, "properties"),
        ({"properties": {"history.expire.max-snapshot-age-ms": {"a": [1]}}}, "snapshot-age"),
        ({"properties": {"history.expire.max-snapshot-age-ms": "9" * 400}}, "snapshot-age"),
        ({"properties": {"lakeview.maintenance.enabled": "tru\u0000e"}}, "NUL"),
    ],
)
def test_a_wrong_policy_value_is_a_400_naming_it_and_changes_nothing(
    editor_api: APIClient, body: dict, field: str
) -> None:
    table = make_table()
    before = table.metadata_location
    response = editor_api.patch(policy_url(table), body, format="json")
    assert response.status_code == 400
    assert field in response.content.decode()
    table.refresh_from_db()
    assert table.metadata_location == before


def test_a_body_nested_too_deeply_is_a_400_and_changes_nothing(editor_api: APIClient) -> None:
    table = make_table()
    before = table.metadata_location
    body = '{"properties":' + '{"a":' * 100_000 + "1" + "}" * 100_001
    response = editor_api.generic("PATCH", policy_url(table), body, content_type="application/json")
    assert response.status_code == 400 and "nests too deeply" in response.json()["detail"]
    table.refresh_from_db()
    assert table.metadata_location == before


def test_a_viewer_reads_the_policy_but_cannot_change_it_or_start_runs(
    viewer_api: APIClient,
) -> None:
    table = make_table()
    assert viewer_api.get(policy_url(table)).status_code == 200
    assert viewer_api.patch(policy_url(table), {"enabled": True}, format="json").status_code == 403
    assert viewer_api.post(f"{policy_url(table)}/runs/", {}, format="json").status_code == 403
    assert not MaintenanceRun.objects.exists()


def test_run_maintenance_now_queues_every_action_in_order_and_never_twice(
    editor_api: APIClient,
) -> None:
    table = make_table()
    first = editor_api.post(f"{policy_url(table)}/runs/", {}, format="json")
    assert first.status_code == 202, first.content
    assert [r["action"] for r in first.json()] == [
        "REWRITE_DATA_FILES",
        "REWRITE_POSITION_DELETE_FILES",
        "REWRITE_MANIFESTS",
        "EXPIRE_SNAPSHOTS",
        "REMOVE_ORPHAN_FILES",
    ]
    assert {r["state"] for r in first.json()} == {"QUEUED"}

    again = editor_api.post(
        f"{policy_url(table)}/runs/", {"actions": ["EXPIRE_SNAPSHOTS"]}, format="json"
    )
    assert [r["id"] for r in again.json()] == [first.json()[3]["id"]]
    assert MaintenanceRun.objects.count() == 5
    listed = editor_api.get(f"{policy_url(table)}/runs/").json()
    assert listed["count"] == 5
    one = editor_api.get(f"/api/maintenance-runs/{first.json()[0]['id']}/")
    assert one.json()["table_name"] == "ops.events"


def test_an_unknown_action_is_a_400(editor_api: APIClient) -> None:
    table = make_table()
    response = editor_api.post(f"{policy_url(table)}/runs/", {"actions": ["VACUUM"]}, format="json")
    assert response.status_code == 400 and "actions" in response.json()


def test_an_attached_table_is_its_writers_to_maintain(editor_api, tmp_path) -> None:
    table = make_table()
    from catalog.models import Attachment

    Attachment.objects.create(table=table)
    assert editor_api.patch(policy_url(table), {"enabled": True}, format="json").status_code == 403
    assert editor_api.post(f"{policy_url(table)}/runs/", {}, format="json").status_code == 403


def test_two_runs_of_one_table_never_run_at_once_and_a_silent_workers_run_is_failed() -> None:
    table = make_table()
    other = make_table("other")
    expire, orphans = maintenance.start(
        table=table, actions=[Action.EXPIRE_SNAPSHOTS, Action.REMOVE_ORPHAN_FILES]
    )
    [elsewhere] = maintenance.start(table=other, actions=[Action.EXPIRE_SNAPSHOTS])

    assert maintenance.claim(expire.pk, worker="w1") is not None
    assert maintenance.claim(expire.pk, worker="w2") is None  # taken
    assert maintenance.claim(orphans.pk, worker="w2") is None  # the table is busy
    assert maintenance.claim(elsewhere.pk, worker="w2") is not None  # another table

    MaintenanceRun.objects.filter(pk=expire.pk).update(
        heartbeat_at=timezone.now() - timedelta(minutes=5)
    )
    assert maintenance.fail_abandoned(silent_for=timedelta(minutes=1)) == 1
    expire.refresh_from_db()
    assert expire.state == "FAILED" and "stopped answering" in expire.error
    assert maintenance.claim(orphans.pk, worker="w2") is not None


def test_the_sweep_samples_maintained_tables_and_queues_what_is_due() -> None:
    mt = make_mt()
    plain = make_table()
    add_snapshots(mt.table, count=30, age_minutes=30, files=2)
    add_snapshots(plain, count=30, age_minutes=30, files=2)

    queued = maintenance.sweep()

    runs = list(MaintenanceRun.objects.filter(table=mt.table).order_by("id"))
    assert [r.action for r in runs] == [
        "REWRITE_DATA_FILES",
        "EXPIRE_SNAPSHOTS",
        "REMOVE_ORPHAN_FILES",
    ]
    assert queued == 3 and {r.trigger for r in runs} == {"SCHEDULED"}
    assert not MaintenanceRun.objects.filter(table=plain).exists()
    sample = HealthSample.objects.get(table=mt.table)
    assert (sample.data_files, sample.snapshots) == (60, 30)
    assert sample.metadata_bytes and sample.metadata_bytes > 1000
    assert not HealthSample.objects.filter(table=plain).exists()

    # Runs still queued: the next tick queues nothing more, and takes no second sample yet.
    assert maintenance.sweep() == 0
    assert HealthSample.objects.filter(table=mt.table).count() == 1


def test_the_health_api_gives_the_figures_now_and_the_samples_with_runs_marked(
    editor_api: APIClient,
) -> None:
    mt = make_mt()
    add_snapshots(mt.table, count=3, age_minutes=1, files=4)
    [run] = maintenance.start(table=mt.table, actions=[Action.REWRITE_DATA_FILES])
    maintenance.record_sample(mt.table, run=run)
    maintenance.record_sample(mt.table)

    body = editor_api.get(policy_url(mt.table) + "/health").json()

    assert body["now"]["data_files"] == 12 and body["now"]["snapshots"] == 3
    assert body["now"]["average_file_bytes"] == 1024
    assert [s["run"] and s["run"]["action"] for s in body["series"]] == [
        "REWRITE_DATA_FILES",
        None,
    ]


def test_old_samples_and_finished_runs_are_pruned(settings) -> None:
    table = make_table()
    [run] = maintenance.start(table=table, actions=[Action.EXPIRE_SNAPSHOTS])
    maintenance.finish(run, state="SUCCEEDED")
    maintenance.record_sample(table)
    long_ago = timezone.now() - timedelta(days=settings.MAINTENANCE_KEEP_DAYS + 1)
    MaintenanceRun.objects.update(queued_at=long_ago)
    HealthSample.objects.update(taken_at=long_ago)
    maintenance.record_sample(table)

    assert maintenance.prune() == 2
    assert HealthSample.objects.count() == 1 and not MaintenanceRun.objects.exists()


def test_routine_scheduled_runs_are_pruned_sooner_than_failures_and_manual_runs(settings) -> None:
    table = make_table()
    kept_days = settings.MAINTENANCE_KEEP_SCHEDULED_DAYS + 1
    runs = {}
    for trigger, state in [
        ("SCHEDULED", "SUCCEEDED"),
        ("SCHEDULED", "FAILED"),
        ("MANUAL", "SUCCEEDED"),
    ]:
        [run] = maintenance.start(table=table, actions=[Action.EXPIRE_SNAPSHOTS], trigger=trigger)
        maintenance.finish(run, state=state)
        runs[(trigger, state)] = run.pk
    MaintenanceRun.objects.update(queued_at=timezone.now() - timedelta(days=kept_days))

    assert maintenance.prune() == 1
    left = set(MaintenanceRun.objects.values_list("pk", flat=True))
    assert left == {runs[("SCHEDULED", "FAILED")], runs[("MANUAL", "SUCCEEDED")]}


def _section(client, table) -> str:
    """The maintenance section as the table page shows it: the page holds its place, which
    static/js/later.js fills in from the address the place names."""
    page = client.get(f"/namespaces/ops/tables/{table.name}/")
    assert page.status_code == 200
    url = re.search(r'id="maintenance" data-later="([^"]+)"', page.content.decode()).group(1)
    assert url == f"/namespaces/ops/tables/{table.name}/maintenance/"
    section = client.get(url)
    assert section.status_code == 200
    return section.content.decode()


def test_the_table_page_shows_the_section_and_its_forms_switch_and_queue(client, editor) -> None:
    table = make_table()
    client.force_login(editor)
    html = _section(client, table)
    assert html.lstrip().startswith('<section class="card" id="maintenance">')
    assert "Run maintenance now" in html

    switched = client.post(
        f"/namespaces/ops/tables/{table.name}/maintenance/enabled", {"enabled": "on"}
    )
    assert switched.status_code == 302 and switched["Location"].endswith("#maintenance")
    table.refresh_from_db()
    assert table.properties["lakeview.maintenance.enabled"] == "true"

    client.post(f"/namespaces/ops/tables/{table.name}/maintenance/run")
    assert MaintenanceRun.objects.filter(table=table, trigger="MANUAL").count() == 5
    page = _section(client, table)
    assert 'id="maintenance-runs"' in page and "REMOVE_ORPHAN_FILES" in page


def test_a_viewer_sees_the_section_without_its_forms(client, viewer) -> None:
    table = make_table()
    client.force_login(viewer)
    html = _section(client, table)
    assert 'id="maintenance-state"' in html and "Run maintenance now" not in html
    response = client.post(f"/namespaces/ops/tables/{table.name}/maintenance/run")
    assert response.status_code == 403


def test_a_queued_maintenance_run_is_cancelled_at_once_and_a_running_one_is_asked_to_stop(
    editor_api: APIClient, viewer_api: APIClient, editor
) -> None:
    table = make_table()
    expire, orphans = maintenance.start(
        table=table, actions=[Action.EXPIRE_SNAPSHOTS, Action.REMOVE_ORPHAN_FILES]
    )
    url = f"/api/maintenance-runs/{orphans.pk}/cancel"
    assert viewer_api.post(url).status_code == 403
    cancelled = editor_api.post(url)
    assert cancelled.status_code == 200, cancelled.content
    assert cancelled.json()["state"] == "CANCELLED"
    assert cancelled.json()["error"] == f"Cancelled by {editor.username} before it started"
    assert maintenance.claim(orphans.pk, worker="w1") is None
    again = editor_api.post(url)
    assert again.status_code == 409 and "already ended CANCELLED" in again.json()["error"]

    assert maintenance.claim(expire.pk, worker="w1") is not None
    asked = editor_api.post(f"/api/maintenance-runs/{expire.pk}/cancel").json()
    assert asked["state"] == "RUNNING" and asked["cancel_requested_by"] == editor.username
    assert maintenance.cancel_asked(expire)
    assert CatalogEvent.objects.filter(action="cancel_maintenance_run").count() == 2
    for missing in ("99999999999999999999999", "0"):
        answer = editor_api.post(f"/api/maintenance-runs/{missing}/cancel")
        assert answer.status_code == 404 and answer["Content-Type"] == "application/json"
        assert editor_api.get(f"/api/maintenance-runs/{missing}/").status_code == 404


def test_the_page_cancels_a_maintenance_run_of_its_own_table_only(client, editor) -> None:
    table = make_table()
    other = make_table("other")
    [run] = maintenance.start(table=table, actions=[Action.EXPIRE_SNAPSHOTS])
    client.force_login(editor)
    cancel = f"/namespaces/ops/tables/{table.name}/maintenance/runs/{run.pk}/cancel"
    assert cancel in _section(client, table)
    elsewhere = f"/namespaces/ops/tables/{other.name}/maintenance/runs/{run.pk}/cancel"
    assert client.post(elsewhere).status_code == 404
    assert client.post(cancel).status_code == 302
    run.refresh_from_db()
    assert run.state == "CANCELLED"


@pytest.fixture
def stoppable_action(monkeypatch):
    """A maintenance action that runs until its Spark job group is cancelled, as Spark's
    actions do; records the groups cancelled."""
    import threading
    from contextlib import nullcontext

    from maintenance import runner as maintenance_runner
    from runtime import engine

    cancelled: list[str] = []
    stopped = threading.Event()

    def cancel(group: str) -> None:
        cancelled.append(group)
        stopped.set()

    def action(run, table, policy):
        assert stopped.wait(30), "never cancelled"
        raise RuntimeError("Job 3 cancelled part of cancelled job group")

    monkeypatch.setattr(engine, "job_group", lambda group, description: nullcontext())
    monkeypatch.setattr(engine, "cancel_group", cancel)
    monkeypatch.setattr(maintenance_runner, "_run_action", action)
    return maintenance_runner, cancelled


@pytest.mark.django_db(transaction=True)
def test_a_running_maintenance_run_asked_to_stop_has_its_spark_jobs_cancelled(
    stoppable_action, editor
) -> None:
    maintenance_runner, cancelled = stoppable_action
    [run] = maintenance.start(table=make_table(), actions=[Action.REWRITE_DATA_FILES])
    run = maintenance.claim(run.pk, worker="w1")
    maintenance.cancel_run(run, actor=editor)
    assert maintenance_runner._run(run) == "CANCELLED"
    run.refresh_from_db()
    assert cancelled and set(cancelled) == {f"lakeview-maintenance-{run.pk}"}
    assert run.error.startswith(f"Cancelled by {editor.username} after")


@pytest.mark.django_db(transaction=True)
def test_a_maintenance_run_past_the_deployments_limit_is_stopped_and_failed(
    stoppable_action, settings
) -> None:
    maintenance_runner, cancelled = stoppable_action
    settings.REFRESH_TIMEOUT_SECONDS = 1
    [run] = maintenance.start(table=make_table(), actions=[Action.REWRITE_DATA_FILES])
    run = maintenance.claim(run.pk, worker="w1")
    assert maintenance_runner._run(run) == "FAILED"
    run.refresh_from_db()
    assert run.error.startswith("Timed out: stopped after 1 s") and cancelled
    assert "REFRESH_TIMEOUT_SECONDS" in run.error


def test_a_tables_health_counts_its_snapshots_and_finds_the_oldest_no_branch_or_tag_holds():
    table = make_table()
    add_snapshots(table, count=4, age_minutes=40)
    table.refresh_from_db()
    by_age = list(
        table.snapshots.order_by("timestamp_ms").values_list("snapshot_id", "timestamp_ms")
    )
    health = selectors.health_of(table, with_files=True, with_manifests=False)
    assert health.snapshots == 4 and health.data_files == 4
    assert health.oldest_snapshot_ms == by_age[0][1]
    assert health.metadata_files == table.metadata_log.count() + 1
    # A tag on the oldest and one on the next: the third is the oldest one expiry may take.
    table.refs = {
        **table.refs,
        "old": {"snapshot-id": by_age[0][0], "type": "tag"},
        "older": {"snapshot-id": by_age[1][0], "type": "tag"},
    }
    assert selectors.health_of(table).oldest_snapshot_ms == by_age[2][1]


def test_the_list_of_a_tables_runs_answers_what_the_run_serializer_writes(
    editor_api: APIClient, editor
) -> None:
    from maintenance.api import RunSerializer

    table = make_table()
    now = timezone.now()
    for i in range(7):
        MaintenanceRun.objects.create(
            table=table,
            table_name=str(table),
            action="EXPIRE_SNAPSHOTS",
            trigger="API",
            state="SUCCEEDED" if i % 3 else "FAILED",
            queued_at=now - timedelta(minutes=10 * i),
            started_at=now - timedelta(minutes=10 * i, seconds=-1) if i % 2 else None,
            finished_at=now - timedelta(minutes=10 * i, seconds=-31) if i % 2 else None,
            files_before=60 if i % 2 else None,
            files_outside=["/elsewhere/f.parquet"] if i == 3 else [],
            details={"kept": i},
            error="it failed <badly>" if i % 3 == 0 else "",
            requested_by=editor if i == 1 else None,
            cancel_requested_at=now if i == 5 else None,
            cancel_requested_by=editor if i == 5 else None,
        )
    runs = list(selectors.runs(table))
    listed = editor_api.get(f"{policy_url(table)}/runs/", {"page_size": 3}).json()
    assert listed["count"] == 7
    assert listed["results"] == RunSerializer(runs[:3], many=True).data
    for page in (2, 3):
        answer = editor_api.get(f"{policy_url(table)}/runs/", {"page": page, "page_size": 3})
        start = (page - 1) * 3
        assert answer.json()["results"] == RunSerializer(runs[start : start + 3], many=True).data


def test_the_maintenance_api_follows_grants_on_the_table_as_its_page_does(
    django_user_model,
) -> None:
    """A user who may see one namespace reads its tables' maintenance, and not another's
    (a 404 as for a missing table or run); starting, cancelling and changing the policy
    need manage on the table; a revoke takes effect at the next request."""
    from catalog.core.access import MANAGE, READ_METADATA
    from tests.integration.grant_fixtures import api_as, give, take

    root = django_user_model.objects.create_superuser("root", password="root-password")
    carol = django_user_model.objects.create_user("carol", password="carol-password")
    seen, hidden = make_table("seen"), make_table("hidden", namespace="attic")
    [seen_run] = maintenance.start(table=seen, actions=[Action.EXPIRE_SNAPSHOTS])
    [hidden_run] = maintenance.start(table=hidden, actions=[Action.EXPIRE_SNAPSHOTS])
    give(root, READ_METADATA, carol, namespace="ops")
    make_table("elsewhere", namespace="other")
    give(root, READ_METADATA, carol, namespace="other")  # she keeps holding something
    api = api_as(carol)

    for suffix in ("", "/runs/", "/health"):
        assert api.get(policy_url(seen) + suffix).status_code == 200, suffix
    assert api.get(f"/api/maintenance-runs/{seen_run.pk}/").status_code == 200
    gone = api_as(root).get("/api/namespaces/attic/tables/nothing/maintenance")
    for suffix in ("", "/runs/", "/health"):
        answer = api.get(policy_url(hidden) + suffix)
        # As a missing table answers: nothing says the table exists.
        assert answer.status_code == 404, (suffix, answer.content)
        assert answer.json()["error"] == gone.json()["error"].replace("nothing", "hidden")
    assert api.get(f"/api/maintenance-runs/{hidden_run.pk}/").status_code == 404

    refused = api.post(policy_url(seen) + "/runs/", {}, format="json")
    assert refused.status_code == 403 and "manage" in refused.json()["error"]
    assert api.patch(policy_url(seen), {"enabled": True}, format="json").status_code == 403
    assert api.post(f"/api/maintenance-runs/{seen_run.pk}/cancel").status_code == 403
    assert MaintenanceRun.objects.get(pk=seen_run.pk).state == MaintenanceRun.State.QUEUED

    give(root, MANAGE, carol, namespace="ops", name="seen")
    assert api.post(f"/api/maintenance-runs/{seen_run.pk}/cancel").status_code == 200
    assert MaintenanceRun.objects.get(pk=seen_run.pk).state == MaintenanceRun.State.CANCELLED

    take(root, READ_METADATA, carol, namespace="ops")
    take(root, MANAGE, carol, namespace="ops", name="seen")
    assert api.get(policy_url(seen)).status_code == 404

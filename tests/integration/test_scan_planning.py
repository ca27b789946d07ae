"""Server-side scan planning (Iceberg REST planTableScan, fetchPlanningResult,
cancelPlanning, fetchScanTasks): the endpoints in the protocol's JSON shapes, their errors,
grants, pagination through plan tasks, forged tokens, and real pyiceberg 0.12 reading the
same rows through the catalog's planning as through its own.

The tables are written into the warehouse by pyiceberg (tests/unit/test_preview_tables.py:
one Parquet file per group of rows, position and equality delete files) and registered."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table as PyTable
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import DateType, LongType, NestedField, StringType

from catalog import services
from catalog.core import scan_planning
from catalog.core.access import READ_DATA, READ_METADATA
from catalog.services.credentials import create_client
from tests.integration.grant_fixtures import admin, alice, engine, give  # noqa: F401
from tests.integration.test_iceberg_rest import Iceberg, assert_error, token_for
from tests.unit.test_preview_tables import (
    add_equality_deletes,
    add_position_deletes,
    create_table,
    write,
)

pytestmark = pytest.mark.django_db

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "region", StringType(), required=False),
    NestedField(3, "day", DateType(), required=False),
    schema_id=0,
)
BY_REGION = PartitionSpec(
    PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="region"),
    spec_id=0,
)
PLAN = "/namespaces/ns/tables/events/plan"
TASKS = "/namespaces/ns/tables/events/tasks"


def rows(region: str, ids: range) -> list[dict[str, Any]]:
    return [{"id": i, "region": region, "day": datetime.date(2024, 1, 1 + i % 28)} for i in ids]


class Events:
    """ns.events, partitioned by region: eu holds ids 0-9 in two files, us 10-19 in two;
    snapshot `first` before the us files; a position delete file removes ids 0 and 1."""

    def __init__(self, warehouse: Path, *, equality: bool = False) -> None:
        self.table: PyTable = create_table(warehouse / "ns" / "events", SCHEMA, BY_REGION)
        self.eu = write(self.table, rows("eu", range(0, 5)), rows("eu", range(5, 10)))
        self.first = self.table.metadata.current_snapshot_id
        self.us = write(self.table, rows("us", range(10, 15)), rows("us", range(15, 20)))
        self.deletes = add_position_deletes(
            self.table, {self.eu[0]: [0, 1]}, partition=Record("eu")
        )
        if equality:
            add_equality_deletes(self.table, "id", [12], partition=Record("us"))
        self.location = str(warehouse / "ns" / "events")
        services.create_namespace(name="ns")
        services.register_table(
            namespace="ns", name="events", metadata_location=self.table.metadata_location
        )


@pytest.fixture
def events(warehouse: Path) -> Events:
    return Events(warehouse)


@pytest.fixture
def api(editor) -> Iceberg:
    return Iceberg(token_for(editor))


def paths(answer: dict[str, Any]) -> list[str]:
    return sorted(task["data-file"]["file-path"] for task in answer["file-scan-tasks"])


def all_tasks(api: Iceberg, answer: dict[str, Any]) -> list[dict[str, Any]]:
    """Every file scan task of a completed plan, its delete files inlined, following plan
    tasks as a client does."""
    found, pending = [], [answer]
    while pending:
        batch = pending.pop()
        deletes = batch.get("delete-files", [])
        for task in batch.get("file-scan-tasks", []):
            refs = task.get("delete-file-references", [])
            found.append({**task, "deletes": [deletes[r]["file-path"] for r in refs]})
        for token in batch.get("plan-tasks", []):
            response = api.post(TASKS, {"plan-task": token})
            assert response.status_code == 200, response.content
            pending.append(response.json())
    return found


# -- the endpoints ------------------------------------------------------------------------


def test_config_advertises_the_planning_endpoints_and_leaves_planning_to_clients(api):
    config = api.get("/config").json()
    for endpoint in (
        "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan",
        "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan/{plan-id}",
        "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan/{plan-id}",
        "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/tasks",
    ):
        assert endpoint in config["endpoints"]
    # Unsaid, the mode is the clients' default, "client": the answer is what it was.
    assert config["defaults"] == {} and config["overrides"] == {}


def test_the_server_setting_makes_server_planning_an_override(api, settings):
    settings.ICEBERG_SCAN_PLANNING_MODE = "server"
    config = api.get("/config").json()
    assert config["overrides"] == {"scan-planning-mode": "server"}
    assert config["defaults"] == {}


def test_a_small_plan_is_completed_at_once_with_every_live_file_and_its_deletes(api, events):
    response = api.post(PLAN, {})
    assert response.status_code == 200, response.content
    answer = response.json()
    assert answer["status"] == "completed"
    assert answer["plan-id"]
    assert "plan-tasks" not in answer
    assert paths(answer) == sorted(events.eu + events.us)
    [delete] = answer["delete-files"]
    assert delete["content"] == "position-deletes"
    assert delete["file-path"] == events.deletes
    by_path = {t["data-file"]["file-path"]: t for t in answer["file-scan-tasks"]}
    assert by_path[events.eu[0]]["delete-file-references"] == [0]
    # The position delete file is partition-scoped: it may apply to every eu file, never us.
    assert all("delete-file-references" not in by_path[path] for path in events.us)
    data_file = by_path[events.us[0]]["data-file"]
    assert data_file["content"] == "data"
    assert data_file["file-format"] == "parquet"
    assert data_file["partition"] == ["us"]
    assert data_file["record-count"] == 5
    assert "residual-filter" not in by_path[events.us[0]]


def test_every_path_in_a_plan_is_under_the_tables_location(api, events):
    tasks = all_tasks(api, api.post(PLAN, {}).json())
    named = [t["data-file"]["file-path"] for t in tasks] + [d for t in tasks for d in t["deletes"]]
    assert named and all(path.startswith(events.location + "/") for path in named)


def test_a_filter_prunes_partitions_and_gives_each_file_its_residual(api, events):
    answer = api.post(
        PLAN,
        {
            "filter": {
                "type": "and",
                "left": {"type": "eq", "term": "region", "value": "us"},
                "right": {"type": "gt", "term": "id", "value": 16},
            }
        },
    ).json()
    # eu is ruled out by partition; us 10-14 by its column statistics.
    assert paths(answer) == [events.us[1]]
    [task] = answer["file-scan-tasks"]
    # The partition decides region: what is left to check in the rows is the id.
    assert task["residual-filter"] == {"type": "gt", "term": "id", "value": 16}
    assert "delete-files" not in answer


def test_a_filter_decided_by_the_partition_leaves_a_true_residual(api, events):
    answer = api.post(PLAN, {"filter": {"type": "eq", "term": "region", "value": "eu"}}).json()
    assert paths(answer) == sorted(events.eu)
    assert {t["residual-filter"] is True for t in answer["file-scan-tasks"]} == {True}


def test_case_insensitive_filters_and_selects_resolve_and_sensitive_ones_do_not(api, events):
    body = {"select": ["ID"], "filter": {"type": "lt", "term": "ID", "value": 3}}
    answer = api.post(PLAN, {**body, "case-sensitive": False}).json()
    assert paths(answer) == [events.eu[0]]
    assert answer["file-scan-tasks"][0]["residual-filter"] == {
        "type": "lt",
        "term": "id",
        "value": 3,
    }
    error = assert_error(api.post(PLAN, body), 400, "BadRequestException")
    assert "select" in error["message"] and "ID" in error["message"]


def test_time_travel_by_snapshot_id_plans_the_snapshots_files(api, events):
    answer = api.post(PLAN, {"snapshot-id": events.first, "use-snapshot-schema": True}).json()
    assert paths(answer) == sorted(events.eu)
    assert "delete-files" not in answer


def test_an_incremental_scan_plans_the_files_appended_after_the_start(api, events):
    current = events.table.metadata.current_snapshot_id
    answer = api.post(PLAN, {"start-snapshot-id": events.first, "end-snapshot-id": current}).json()
    assert paths(answer) == sorted(events.us)
    assert "delete-files" not in answer


def test_stats_fields_bring_the_named_columns_statistics_and_only_those(api, events):
    answer = api.post(PLAN, {"stats-fields": ["day"]}).json()
    data_file = answer["file-scan-tasks"][0]["data-file"]
    assert data_file["null-value-counts"] == {"keys": [3], "values": [0]}
    assert data_file["lower-bounds"]["keys"] == [3]
    assert isinstance(data_file["lower-bounds"]["values"][0], str)  # an ISO date
    datetime.date.fromisoformat(data_file["lower-bounds"]["values"][0])
    plain = api.post(PLAN, {}).json()["file-scan-tasks"][0]["data-file"]
    assert "lower-bounds" not in plain and "value-counts" not in plain


def test_equality_deletes_are_planned_for_the_client_to_apply(api, warehouse):
    events = Events(warehouse, equality=True)
    answer = api.post(PLAN, {}).json()
    kinds = sorted(delete["content"] for delete in answer["delete-files"])
    assert kinds == ["equality-deletes", "position-deletes"]
    [equality] = [d for d in answer["delete-files"] if d["content"] == "equality-deletes"]
    assert equality["equality-ids"] == [1]
    position = answer["delete-files"].index(equality)
    users = {
        t["data-file"]["file-path"]
        for t in answer["file-scan-tasks"]
        if position in t.get("delete-file-references", [])
    }
    assert users == set(events.us)


# -- errors --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"filter": {"type": "gt", "term": "nope", "value": 1}}, "nope"),
        ({"filter": {"type": "bogus", "term": "id"}}, "filter"),
        ({"filter": {"type": "gt", "term": "id", "value": "abc"}}, "filter"),
        ({"filter": "id > 5"}, "filter"),
        ({"select": ["nope"]}, "select"),
        ({"select": "id"}, "select"),
        ({"snapshot-id": "1"}, "snapshot-id"),
        ({"case-sensitive": "no"}, "case-sensitive"),
        ({"start-snapshot-id": 1}, "end-snapshot-id"),
        ({"snapshot-id": 1, "end-snapshot-id": 1}, "snapshot-id"),
        ({"stats-fields": ["nope"]}, "stats-fields"),
    ],
)
def test_a_bad_request_is_a_400_naming_the_field(api, events, body, field):
    error = assert_error(api.post(PLAN, body), 400, "BadRequestException")
    assert field in error["message"]


def test_an_unknown_snapshot_is_a_400_as_the_spec_keeps_404_for_missing_tables(api, events):
    error = assert_error(api.post(PLAN, {"snapshot-id": 12345}), 400, "BadRequestException")
    assert error["message"] == "Cannot find snapshot with ID 12345"


def test_a_missing_table_or_namespace_is_a_404_as_load_table_answers_it(api, events):
    assert_error(api.post("/namespaces/ns/tables/nope/plan", {}), 404, "NoSuchTableException")
    missing_namespace = api.post("/namespaces/nope/tables/events/plan", {})
    loaded = api.get("/namespaces/nope/tables/events")
    assert_error(missing_namespace, 404, loaded.json()["error"]["type"])


def test_a_forged_or_altered_plan_task_is_a_404_never_a_500(api, events, monkeypatch):
    monkeypatch.setattr(scan_planning, "INLINE_FILES", 0)
    monkeypatch.setattr(scan_planning, "FILES_PER_TASK", 1)
    token = api.post(PLAN, {}).json()["plan-tasks"][0]
    for forged in ("forged", token[:-2] + "xx", token + "x", "", "a:b:c"):
        response = api.post(TASKS, {"plan-task": forged})
        assert response.status_code == 404, (forged, response.content)
        assert response.json()["error"]["type"] == "NoSuchPlanTaskException"
    assert_error(api.post(TASKS, {"plan-task": 5}), 400, "BadRequestException")
    assert_error(api.post(TASKS, {}), 400, "BadRequestException")


def test_a_plan_task_of_another_table_is_a_404(api, events, warehouse, monkeypatch):
    monkeypatch.setattr(scan_planning, "INLINE_FILES", 0)
    other = create_table(warehouse / "ns" / "other", SCHEMA, BY_REGION)
    write(other, rows("eu", range(3)))
    services.register_table(namespace="ns", name="other", metadata_location=other.metadata_location)
    token = api.post("/namespaces/ns/tables/other/plan", {}).json()["plan-tasks"][0]
    response = api.post(TASKS, {"plan-task": token})
    assert_error(response, 404, "NoSuchPlanTaskException")


def test_a_plan_id_is_fetched_and_cancelled_and_a_forged_one_is_a_404(api, events):
    plan_id = api.post(PLAN, {"filter": {"type": "eq", "term": "region", "value": "us"}}).json()[
        "plan-id"
    ]
    fetched = api.get(f"{PLAN}/{plan_id}")
    assert fetched.status_code == 200, fetched.content
    assert fetched.json()["status"] == "completed"
    assert paths(fetched.json()) == sorted(events.us)
    assert api.delete(f"{PLAN}/{plan_id}").status_code == 204
    assert_error(api.get(f"{PLAN}/forged"), 404, "NoSuchPlanIdException")
    assert_error(api.delete(f"{PLAN}/forged"), 404, "NoSuchPlanIdException")


# -- pagination ----------------------------------------------------------------------------


def test_a_large_plan_is_paged_through_plan_tasks_that_add_up_to_the_small_plan(
    api, events, monkeypatch
):
    whole = all_tasks(api, api.post(PLAN, {}).json())
    monkeypatch.setattr(scan_planning, "INLINE_FILES", 1)
    monkeypatch.setattr(scan_planning, "FILES_PER_TASK", 2)
    answer = api.post(PLAN, {}).json()
    assert answer["status"] == "completed"
    assert "file-scan-tasks" not in answer
    assert len(answer["plan-tasks"]) == 2  # two appends, one manifest of two files each
    paged = all_tasks(api, answer)
    key = lambda task: task["data-file"]["file-path"]  # noqa: E731
    assert sorted(paged, key=key) == sorted(whole, key=key)


def test_plan_tasks_keep_reading_their_snapshot_after_a_new_commit(api, events, monkeypatch):
    monkeypatch.setattr(scan_planning, "INLINE_FILES", 0)
    answer = api.post(PLAN, {}).json()
    write(events.table, rows("eu", range(100, 103)))
    services.register_table(
        namespace="ns",
        name="events",
        metadata_location=events.table.metadata_location,
        overwrite=True,
    )
    assert len(all_tasks(api, answer)) == 4
    assert len(all_tasks(api, api.post(PLAN, {}).json())) == 5


# -- grants --------------------------------------------------------------------------------


def test_planning_needs_read_data_on_the_table(events, admin, alice):  # noqa: F811
    assert_error(engine(alice).post(PLAN, {}), 403, "ForbiddenException")
    give(admin, READ_METADATA, alice, namespace="ns", name="events")
    error = assert_error(engine(alice).post(PLAN, {}), 403, "ForbiddenException")
    assert READ_DATA in error["message"]
    give(admin, READ_DATA, alice, namespace="ns", name="events")
    assert engine(alice).post(PLAN, {}).status_code == 200


def test_a_table_one_may_not_see_answers_as_a_missing_one(events, admin, alice):  # noqa: F811
    services.create_namespace(name="elsewhere")
    give(admin, READ_DATA, alice, namespace="elsewhere")
    assert_error(engine(alice).post(PLAN, {}), 404, "NoSuchTableException")


def test_plan_tasks_are_refused_once_read_data_is_revoked(events, admin, alice, monkeypatch):  # noqa: F811
    from tests.integration.grant_fixtures import take

    monkeypatch.setattr(scan_planning, "INLINE_FILES", 0)
    give(admin, READ_DATA, alice, namespace="ns", name="events")
    reader = engine(alice)
    token = reader.post(PLAN, {}).json()["plan-tasks"][0]
    take(admin, READ_DATA, alice, namespace="ns", name="events")
    give(admin, READ_METADATA, alice, namespace="ns", name="events")
    assert_error(reader.post(TASKS, {"plan-task": token}), 403, "ForbiddenException")


# -- real pyiceberg ------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_pyiceberg_reads_the_same_rows_through_server_planning_as_through_its_own(
    live_server, editor, warehouse
):
    """A partitioned table with position deletes, written through the catalog by pyiceberg:
    every read (all rows, a filter, a column choice, a time travel) is the same whether
    pyiceberg plans it or the catalog does (scan-planning-mode=server)."""
    import pyarrow as pa
    from pyiceberg.catalog.rest import RestCatalog

    client, secret = create_client(name="py", user=editor)
    uri, credential = f"{live_server.url}/iceberg", f"{client.client_id}:{secret}"
    with RestCatalog("lv", uri=uri, credential=credential) as catalog:
        catalog.create_namespace("py")
        table = catalog.create_table("py.events", schema=SCHEMA, partition_spec=BY_REGION)
        arrow_schema = table.schema().as_arrow()
        for region, ids in (("eu", range(0, 10)), ("us", range(10, 20)), ("eu", range(20, 25))):
            table.append(pa.Table.from_pylist(rows(region, ids), schema=arrow_schema))
        first = table.refresh().metadata.snapshots[0].snapshot_id
        eu_file = next(
            task.file.file_path
            for task in table.scan(row_filter="region == 'eu'").plan_files()
            if task.file.record_count == 10
        )
        # A position delete file (pyiceberg writes none itself: the tests' helper writes it
        # and commits it through this catalog) removing ids 3 and 4.
        add_position_deletes(table, {eu_file: [3, 4]}, partition=Record("eu"))

    reads = [
        {},
        {"row_filter": "region == 'eu' and id >= 2"},
        {"row_filter": "id > 12", "selected_fields": ("id", "day")},
        {"snapshot_id": first},
    ]
    results: dict[str, list] = {}
    plans: dict[str, list] = {}
    for mode in ("client", "server"):
        with RestCatalog(
            "lv", uri=uri, credential=credential, **{"scan-planning-mode": mode}
        ) as catalog:
            loaded = catalog.load_table("py.events")
            assert catalog.supports_server_side_planning() is (mode == "server")
            results[mode] = [
                loaded.scan(**read).to_arrow().sort_by("id").to_pylist() for read in reads
            ]
            plans[mode] = sorted(
                (task.file.file_path, sorted(d.file_path for d in task.delete_files))
                for task in loaded.scan().plan_files()
            )
    assert results["server"] == results["client"]
    assert plans["server"] == plans["client"]
    # The delete file is partition-scoped: both planners give it to both eu files.
    assert sum(1 for _, deletes in plans["server"] if deletes) == 2
    everything = [row["id"] for row in results["server"][0]]
    assert everything == [i for i in range(25) if i not in (3, 4)]
    assert [row["id"] for row in results["server"][3]] == list(range(10))

"""The OpenLineage run events of materialized tables' runs (refresh.core.lineage_events),
built from plain values and checked against the OpenLineage JSON schema and the schemas of
every facet they carry (tests/data/openlineage, as the specification publishes them)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator, FormatChecker
from openlineage.client.serde import Serde
from referencing import Registry, Resource

from refresh.core.lineage_events import (
    Column,
    RunFacts,
    Where,
    end_event,
    finished_events,
    run_uuid,
    start_event,
)

SCHEMAS = Path(__file__).resolve().parents[1] / "data" / "openlineage"
CORE = "https://openlineage.io/spec/2-0-2/OpenLineage.json"


def _registry() -> tuple[Registry, dict[str, dict]]:
    documents = {}
    for path in sorted(SCHEMAS.glob("*.json")):
        document = json.loads(path.read_text())
        documents[document["$id"]] = document
    registry = Registry().with_resources(
        (uri, Resource.from_contents(document)) for uri, document in documents.items()
    )
    return registry, documents


REGISTRY, DOCUMENTS = _registry()


def validate(event: Any) -> dict:
    """The event (or its JSON, read back) as the transports send it, valid against the core
    schema's RunEvent and each facet against its own schema (which must be one we have);
    returned as a dict."""
    body = Serde.to_dict(event)
    run_event = {"$ref": f"{CORE}#/$defs/RunEvent"}
    Draft202012Validator(run_event, registry=REGISTRY, format_checker=FormatChecker()).validate(
        body
    )
    groups = [body["run"].get("facets", {}), body["job"].get("facets", {})]
    for dataset in [*body.get("inputs", []), *body.get("outputs", [])]:
        groups += [dataset.get(key, {}) for key in ("facets", "inputFacets", "outputFacets")]
    for facets in groups:
        for key, facet in facets.items():
            uri = facet["_schemaURL"].split("#")[0]
            assert uri in DOCUMENTS, f"no schema for the {key} facet: {uri}"
            Draft202012Validator(
                DOCUMENTS[uri], registry=REGISTRY, format_checker=FormatChecker()
            ).validate({key: facet})
    return body


WHERE = Where(
    job_namespace="lakeview",
    dataset_namespace="http://catalog:8000/iceberg",
    catalog_name="lakeview",
    warehouse="/data/warehouse",
    engine_version="0.1.0",
)
QUEUED = datetime(2026, 11, 29, 1, 0, tzinfo=UTC)
STARTED = datetime(2026, 11, 29, 1, 0, 2, tzinfo=UTC)
FINISHED = datetime(2026, 11, 29, 1, 0, 9, tzinfo=UTC)
QUERY = (
    "SELECT ds, sum(amount) AS total FROM sales.orders JOIN sales.shops USING (shop) GROUP BY ds"
)


def facts(**changes: Any) -> RunFacts:
    values: dict[str, Any] = {
        "run_id": 42,
        "queued_at": QUEUED,
        "table": "sales.daily",
        "trigger": "SCHEDULED",
        "state": "SUCCEEDED",
        "query": QUERY,
        "action": "FULL",
        "started_at": STARTED,
        "finished_at": FINISHED,
        "schedule_time": QUEUED,
        "sources": {"sales.orders": 7001, "sales.shops": 7002},
        "snapshot_id": 9001,
        "rows_written": 120,
        "bytes_written": 4096,
        "columns": (Column("ds", "string", "the day"), Column("total", "double")),
    }
    return RunFacts(**(values | changes))


def test_a_start_names_the_job_its_sql_the_sources_and_the_table_and_is_valid():
    body = validate(
        start_event(facts(state="RUNNING", sources=dict.fromkeys(["sales.orders"])), WHERE)
    )

    assert body["eventType"] == "START"
    assert body["eventTime"] == "2026-11-29T01:00:02Z"
    assert body["job"]["namespace"] == "lakeview" and body["job"]["name"] == "sales.daily"
    assert body["job"]["facets"]["sql"]["query"] == QUERY
    assert body["job"]["facets"]["jobType"]["processingType"] == "BATCH"
    assert [(i["namespace"], i["name"]) for i in body["inputs"]] == [
        ("http://catalog:8000/iceberg", "sales.orders")
    ]
    assert "version" not in body["inputs"][0]["facets"]  # not decided yet
    [output] = body["outputs"]
    assert output["name"] == "sales.daily" and "version" not in output["facets"]
    assert [f["name"] for f in output["facets"]["schema"]["fields"]] == ["ds", "total"]
    assert body["run"]["facets"]["nominalTime"]["nominalStartTime"] == "2026-11-29T01:00:00Z"


def test_a_complete_has_each_source_at_the_snapshot_read_and_the_snapshot_written():
    body = validate(end_event(facts(), WHERE))

    assert body["eventType"] == "COMPLETE"
    assert body["eventTime"] == "2026-11-29T01:00:09Z"
    assert {i["name"]: i["facets"]["version"]["datasetVersion"] for i in body["inputs"]} == {
        "sales.orders": "7001",
        "sales.shops": "7002",
    }
    [output] = body["outputs"]
    assert output["facets"]["version"]["datasetVersion"] == "9001"
    assert output["outputFacets"]["outputStatistics"] == {
        **output["outputFacets"]["outputStatistics"],
        "rowCount": 120,
        "size": 4096,
    }
    assert output["facets"]["catalog"]["framework"] == "iceberg"
    assert "errorMessage" not in body["run"]["facets"]


def test_a_failure_carries_the_error_and_no_snapshot_written():
    failed = facts(state="FAILED", error="line 1:8: column amount not found", snapshot_id=None)

    body = validate(end_event(failed, WHERE))

    assert body["eventType"] == "FAIL"
    assert body["run"]["facets"]["errorMessage"]["message"] == "line 1:8: column amount not found"
    assert "version" not in body["outputs"][0]["facets"]


def test_a_cancelled_run_aborts_and_a_skip_completes_with_nothing_written():
    assert validate(end_event(facts(state="CANCELLED"), WHERE))["eventType"] == "ABORT"
    skipped = validate(end_event(facts(state="SKIPPED", action="NO_DATA", snapshot_id=None), WHERE))
    assert skipped["eventType"] == "COMPLETE"
    assert "version" not in skipped["outputs"][0]["facets"]
    assert skipped["outputs"][0]["outputFacets"] == {}


def test_the_start_and_the_end_of_a_run_share_one_run_id_and_other_runs_have_their_own():
    start = start_event(facts(state="RUNNING"), WHERE)
    end = end_event(facts(), WHERE)
    assert start.run.runId == end.run.runId == run_uuid(facts(), WHERE)
    assert run_uuid(facts(run_id=43), WHERE) != start.run.runId
    # UUIDv7, as OpenLineage recommends: ordered by the time the run was queued.
    assert start.run.runId[14] == "7"
    assert run_uuid(facts(run_id=1, queued_at=FINISHED), WHERE) > start.run.runId


def test_a_micro_batch_is_a_streaming_start_and_complete_sent_together():
    batch = facts(trigger="CONTINUOUS", action="INCREMENTAL", schedule_time=None)

    start, complete = [validate(e) for e in finished_events(batch, WHERE, announced=False)]

    assert (start["eventType"], complete["eventType"]) == ("START", "COMPLETE")
    assert start["job"]["facets"]["jobType"]["processingType"] == "STREAMING"
    assert "nominalTime" not in start["run"]["facets"]
    assert complete["outputs"][0]["facets"]["version"]["datasetVersion"] == "9001"


@pytest.mark.parametrize(
    ("state", "expected"),
    [("FAILED", ["FAIL"]), ("CANCELLED", []), ("SKIPPED", [])],
)
def test_a_run_that_never_started_sends_only_a_failure(state, expected):
    never = facts(state=state, started_at=None)
    events = finished_events(never, WHERE, announced=True)
    assert [validate(e)["eventType"] for e in events] == expected


def test_a_run_whose_start_was_sent_ends_with_one_event():
    assert [e.eventType.value for e in finished_events(facts(), WHERE, announced=True)] == [
        "COMPLETE"
    ]


def test_the_validator_refuses_an_event_the_schema_does_not_allow():
    body = Serde.to_dict(end_event(facts(), WHERE))
    body["eventType"] = "FINISHED"
    validator = Draft202012Validator({"$ref": f"{CORE}#/$defs/RunEvent"}, registry=REGISTRY)
    assert not validator.is_valid(body)
    body = Serde.to_dict(end_event(facts(), WHERE))
    del body["outputs"][0]["facets"]["version"]["datasetVersion"]
    facet = body["outputs"][0]["facets"]["version"]
    schema = DOCUMENTS[facet["_schemaURL"].split("#")[0]]
    assert not Draft202012Validator(schema, registry=REGISTRY).is_valid({"version": facet})

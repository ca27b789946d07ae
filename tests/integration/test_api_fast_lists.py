"""The list of a table's runs is written from values, not through RefreshRunSerializer
(refresh.api.serializers.runs.run_data: fifty runs through the serializer took most of the
answer). What it writes must be what the serializer writes for the same run, field for
field: the OpenAPI schema documents the serializer. (The list of materialized tables,
written by summary_data, is held to its serializer by tests/integration/test_mt_api.py.)"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from refresh.models import RefreshRun
from tests.integration.test_mt_lifecycle import make_mt

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(editor) -> APIClient:
    client = APIClient()
    client.force_authenticate(editor)
    return client


def a_run_with_every_field(mt, editor) -> RefreshRun:
    now = timezone.now()
    return RefreshRun.objects.create(
        materialized_table=mt,
        table_name="sales.daily",
        trigger=RefreshRun.Trigger.MANUAL,
        action=RefreshRun.Action.PARTITION,
        state=RefreshRun.State.FAILED,
        schedule_time=now - timedelta(minutes=3),
        partition={"ds": "2024-01-01"},
        options={"spark.sql.shuffle.partitions": "4"},
        force=True,
        full=True,
        reason="asked for",
        queued_at=now - timedelta(minutes=3),
        started_at=now - timedelta(minutes=2, seconds=30),
        finished_at=now - timedelta(minutes=1),
        worker="host:12",
        heartbeat_at=now - timedelta(minutes=1, seconds=5),
        rows_written=12,
        bytes_written=3456,
        snapshot_id=987654321,
        source_snapshots={"sales.orders": 5},
        data_timestamp=now - timedelta(minutes=4),
        definition_version=2,
        batches=3,
        error="Spark said no",
        requested_by=editor,
        cancel_requested_at=now - timedelta(minutes=1, seconds=30),
        cancel_requested_by=editor,
    )


def test_a_run_in_the_list_is_written_as_the_runs_own_answer_writes_it(api, editor):
    mt = make_mt()
    run = a_run_with_every_field(mt, editor)
    listed = api.get("/api/namespaces/sales/materialized-tables/daily/runs/").json()["results"]
    alone = api.get(f"/api/refresh-runs/{run.pk}/").json()
    assert [item for item in listed if item["id"] == run.pk] == [alone]

"""A continuous table's micro-batches stay a small history: rows older than an hour are
folded into one row per hour, with the sums of what they wrote and of each expectation's
violating rows."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from catalog import services
from refresh.models import MaterializedTable, RefreshRun
from refresh.streams.batches import compact_history

pytestmark = pytest.mark.django_db

SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "id", "type": "long", "required": False}],
}


def test_micro_batches_older_than_an_hour_are_folded_per_hour_and_recent_ones_kept():
    services.create_namespace(name="live")
    table = services.create_table(namespace="live", name="t", schema=SCHEMA).obj
    mt = MaterializedTable.objects.create(
        table=table,
        query="SELECT id FROM live.s",
        freshness_value=5,
        freshness_unit="SECOND",
        refresh_mode="CONTINUOUS",
        state="ACTIVATED",
    )
    hour = (timezone.now() - timedelta(hours=3)).replace(minute=0, second=0, microsecond=0)

    def batch(at, batch_id, rows, expectations=None):
        RefreshRun.objects.create(
            materialized_table=mt,
            table_name="live.t",
            trigger=RefreshRun.Trigger.CONTINUOUS,
            action=RefreshRun.Action.INCREMENTAL,
            state=RefreshRun.State.SUCCEEDED,
            queued_at=at,
            started_at=at,
            finished_at=at + timedelta(seconds=1),
            batch_id=batch_id,
            rows_written=rows,
            bytes_written=rows * 10,
            data_timestamp=at,
            expectations=expectations or {},
        )

    for i in range(120):  # two old hours, one batch every minute
        counted = {"positive": i % 2, "has_id": 1} if i % 3 else {}  # some count none
        batch(hour + timedelta(minutes=i), i, 2, counted)
    # The stream caught up with a source's MERGE in the first hour: a run of its own.
    batch(hour + timedelta(minutes=20, seconds=30), None, 3)
    RefreshRun.objects.filter(batch_id=None).update(reason="incremental: live.s changed")
    now = timezone.now()
    for i in range(5):  # recent batches stay as they are
        batch(now - timedelta(minutes=5 - i), 1000 + i, 1)

    folded = compact_history()

    assert folded == 118, "each old hour's newest batch stays and stands for the others"
    old = list(mt.runs.filter(batches__gt=1).order_by("started_at"))
    assert [run.batches for run in old] == [60, 60]
    assert [run.rows_written for run in old] == [120, 120]
    assert old[1].batch_id == 119 and old[0].bytes_written == 1200
    assert old[0].started_at == hour and old[1].started_at == hour + timedelta(minutes=60)
    assert old[0].expectations == {"positive": 20, "has_id": 40}
    assert mt.runs.filter(batches=1).count() == 6, "5 recent batches and the catch-up"
    [caught_up] = mt.runs.filter(batch_id=None)
    assert (caught_up.reason, caught_up.rows_written) == ("incremental: live.s changed", 3)
    assert compact_history() == 0, "folded rows are not folded again"

    # A batch of a folded hour that passes the age later joins that hour's row.
    batch(hour + timedelta(minutes=30, seconds=30), 500, 7)
    assert compact_history() == 1
    first_hour = mt.runs.filter(batches__gt=1).order_by("started_at").first()
    assert (first_hour.batches, first_hour.rows_written) == (61, 127)
    assert mt.runs.filter(batches__gt=1).count() == 2

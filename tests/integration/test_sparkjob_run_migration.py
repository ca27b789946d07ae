"""catalog's migration 0022 makes a Spark job a run (infra.runs.Run) and keeps every job:
its "created_at" is the run's queued_at in the same column, and a job asked to stop is
still asked to stop, by a cancel_requested_at."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

BEFORE = [("catalog", "0021_idempotency_keys")]
AFTER = [("catalog", "0022_sparkjob_is_a_run")]


def _migrate(targets: list[tuple[str, str]]):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.mark.django_db(transaction=True)
def test_every_spark_job_survives_the_migration_and_one_asked_to_stop_is_still_asked():
    old = _migrate(BEFORE)
    Job = old.get_model("catalog", "SparkJob")
    asked_for = timezone.now() - timedelta(hours=2)
    beaten = timezone.now() - timedelta(minutes=1)
    running = Job.objects.create(
        kind="preview_view", state="RUNNING", created_at=asked_for, heartbeat_at=beaten,
        cancel_requested=True, error={"message": "kept"},
    )  # fmt: skip
    done = Job.objects.create(kind="alter_query", state="SUCCEEDED", created_at=asked_for)
    try:
        new = _migrate(AFTER)
        Job = new.get_model("catalog", "SparkJob")
        assert Job.objects.count() == 2
        kept = Job.objects.get(pk=running.pk)
        assert (kept.queued_at, kept.cancel_requested_at, kept.error) == (
            asked_for,
            beaten,
            {"message": "kept"},
        )
        other = Job.objects.get(pk=done.pk)
        assert (other.queued_at, other.cancel_requested_at) == (asked_for, None)
        # And back: the flag again, the rows still there.
        Job = _migrate(BEFORE).get_model("catalog", "SparkJob")
        assert sorted(Job.objects.values_list("pk", "cancel_requested")) == [
            (running.pk, True),
            (done.pk, False),
        ]
    finally:
        _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())

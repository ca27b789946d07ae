"""The one module that touches django-celery-beat: a materialized table's full-refresh
schedule as a `PeriodicTask`.

The schedule is the cron Flink derives from the freshness (refresh.core.freshness), as a
`CrontabSchedule`, or an `IntervalSchedule` for seconds, which a crontab cannot express.
beat's database scheduler notices saved `PeriodicTask`s without a restart."""

from __future__ import annotations

import json

from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask

from catalog.core.errors import CatalogError
from refresh.core.freshness import RefreshMode, Schedule, full_refresh_schedule
from refresh.models import MaterializedTable

#: The Celery task a tick sends, with the table's id (its worker side comes with the Spark
#: refresh job).
TASK = "refresh.scheduled_refresh"


def shown(mt: MaterializedTable) -> tuple[Schedule, PeriodicTask | None] | None:
    """A FULL table's schedule and its periodic task, as its page and API show them (None
    for another mode, or a freshness no schedule expresses)."""
    if mt.refresh_mode != RefreshMode.FULL:
        return None
    try:
        schedule = full_refresh_schedule(mt.freshness)
    except CatalogError:
        return None
    return schedule, mt.periodic_task


def _name(mt: MaterializedTable) -> str:
    return f"Full refresh of {mt.table} (materialized table {mt.pk})"


def install(
    mt: MaterializedTable, *, enabled: bool, run_options: dict[str, str] | None = None
) -> PeriodicTask:
    """Create or replace the table's schedule from its freshness (FULL tables only).
    `run_options` (RESUME WITH) go to every run the schedule starts, not to the table."""
    schedule = full_refresh_schedule(mt.freshness)
    fields: dict[str, object] = {"crontab": None, "interval": None}
    if schedule.crontab is not None:
        minute, hour, day_of_month, month_of_year, day_of_week = schedule.crontab
        fields["crontab"], _ = CrontabSchedule.objects.get_or_create(
            minute=minute,
            hour=hour,
            day_of_month=day_of_month,
            month_of_year=month_of_year,
            day_of_week=day_of_week,
        )
    else:
        fields["interval"], _ = IntervalSchedule.objects.get_or_create(
            every=schedule.every_seconds, period=IntervalSchedule.SECONDS
        )
    task = mt.periodic_task or PeriodicTask(task=TASK)
    task.name = _name(mt)
    task.task = TASK
    kwargs: dict[str, object] = {"materialized_table_id": mt.pk}
    if run_options:
        kwargs["options"] = dict(run_options)
    task.kwargs = json.dumps(kwargs)
    task.enabled = enabled
    task.description = f"FRESHNESS = {mt.freshness} (materialized table {mt.table})"
    for key, value in fields.items():
        setattr(task, key, value)
    task.save()
    if mt.periodic_task_id != task.pk:
        mt.periodic_task = task
        mt.save(update_fields=["periodic_task", "updated_at"])
    return task


def run_options(mt: MaterializedTable) -> dict[str, str]:
    """The options the schedule passes to its runs (RESUME WITH's), if any."""
    if mt.periodic_task is None:
        return {}
    return dict(json.loads(mt.periodic_task.kwargs or "{}").get("options") or {})


def set_enabled(mt: MaterializedTable, enabled: bool) -> None:
    if mt.periodic_task is not None and mt.periodic_task.enabled != enabled:
        mt.periodic_task.enabled = enabled
        mt.periodic_task.save(update_fields=["enabled"])


def remove(mt: MaterializedTable) -> None:
    if mt.periodic_task is not None:
        task, mt.periodic_task = mt.periodic_task, None
        mt.save(update_fields=["periodic_task", "updated_at"])
        task.delete()


def forget_schedule(sender: type, instance: MaterializedTable, **kwargs: object) -> None:
    """A materialized table deleted any way (its table dropped through /iceberg too) takes
    its schedule with it: beat must not tick for a table that is gone."""
    if instance.periodic_task_id is not None:
        PeriodicTask.objects.filter(pk=instance.periodic_task_id).delete()

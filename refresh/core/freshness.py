"""FRESHNESS, the refresh mode it implies, and the schedule of full refreshes.

Flink's rules (FLIP-435 and its implementation, `MaterializedTableUtils` and
`CronExpressionUtils`):
- an explicit REFRESH_MODE wins; otherwise a freshness strictly below the threshold
  (`materialized-table.refresh-mode.freshness-threshold`, 30 minutes by default) is
  CONTINUOUS, anything else FULL;
- the interval is a positive integer;
- in FULL mode the schedule is a cron: seconds and minutes must be below 60 and divide it,
  hours below 24 and divide it, and a DAY freshness must be 1 (months have different
  lengths).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime, timedelta

from catalog.core.errors import InvalidInput

DEFAULT_THRESHOLD = timedelta(minutes=30)


class TimeUnit(enum.StrEnum):
    SECOND = "SECOND"
    MINUTE = "MINUTE"
    HOUR = "HOUR"
    DAY = "DAY"


class RefreshMode(enum.StrEnum):
    CONTINUOUS = "CONTINUOUS"
    FULL = "FULL"


_UNIT_SECONDS = {TimeUnit.SECOND: 1, TimeUnit.MINUTE: 60, TimeUnit.HOUR: 3600, TimeUnit.DAY: 86400}
#: What the interval must divide (and stay below) for a cron to express it.
_CRON_UPPER_BOUND = {TimeUnit.SECOND: 60, TimeUnit.MINUTE: 60, TimeUnit.HOUR: 24}


@dataclass(frozen=True)
class Freshness:
    value: int
    unit: TimeUnit

    @classmethod
    def parse(cls, value: str | int, unit: str) -> Freshness:
        """From the statement's `INTERVAL '<value>' <unit>`, refused as Flink refuses it."""
        text = str(value).strip()
        if not text.isdigit() or int(text) <= 0:
            raise InvalidInput(
                "The freshness interval currently only supports positive integer type values.",
                field="freshness",
            )
        try:
            time_unit = TimeUnit(unit.strip().upper())
        except ValueError:
            raise InvalidInput(
                f"Unknown freshness unit {unit!r}: use SECOND, MINUTE, HOUR or DAY",
                field="freshness",
            ) from None
        return cls(int(text), time_unit)

    def to_timedelta(self) -> timedelta:
        return timedelta(seconds=self.value * _UNIT_SECONDS[self.unit])

    def __str__(self) -> str:
        return f"INTERVAL '{self.value}' {self.unit.value}"


def derive_mode(
    freshness: Freshness,
    explicit: RefreshMode | None = None,
    threshold: timedelta = DEFAULT_THRESHOLD,
) -> RefreshMode:
    """An explicit mode wins; else strictly below the threshold is CONTINUOUS."""
    if explicit is not None:
        return explicit
    return RefreshMode.CONTINUOUS if freshness.to_timedelta() < threshold else RefreshMode.FULL


@dataclass(frozen=True)
class Schedule:
    """When full refreshes run: a crontab (minute, hour, day_of_month, month_of_year,
    day_of_week, as django-celery-beat's CrontabSchedule takes them), or, for seconds,
    which a crontab cannot express, an interval."""

    crontab: tuple[str, str, str, str, str] | None = None
    every_seconds: int | None = None

    def __str__(self) -> str:
        if self.crontab is not None:
            return " ".join(self.crontab)
        return f"every {self.every_seconds} seconds"


def full_refresh_schedule(freshness: Freshness) -> Schedule:
    """The schedule Flink derives from the freshness (convertFreshnessToCron), with its
    refusals."""
    value, unit = freshness.value, freshness.unit
    if unit is TimeUnit.DAY:
        if value > 1:
            raise InvalidInput(
                "In full refresh mode, freshness must be 1 when the time unit is DAY.",
                field="freshness",
            )
        return Schedule(crontab=("0", "0", "*", "*", "*"))
    bound = _CRON_UPPER_BOUND[unit]
    if value >= bound:
        raise InvalidInput(
            f"In full refresh mode, freshness must be less than {bound} when the time unit "
            f"is {unit.value}.",
            field="freshness",
        )
    if bound % value != 0:
        raise InvalidInput(
            f"In full refresh mode, only freshness that are factors of {bound} are currently "
            f"supported when the time unit is {unit.value}.",
            field="freshness",
        )
    if unit is TimeUnit.SECOND:
        return Schedule(every_seconds=value)
    if unit is TimeUnit.MINUTE:
        return Schedule(crontab=(f"*/{value}", "*", "*", "*", "*"))
    return Schedule(crontab=("0", f"*/{value}", "*", "*", "*"))


def planned_tick(moment: datetime, freshness: Freshness) -> datetime:
    """The scheduled time at or before `moment` (ticks fall on multiples of the freshness
    from midnight, as the cron above places them): a run's scheduleTime is the planned
    tick, not the time the worker happened to start it."""
    period = int(freshness.to_timedelta().total_seconds())
    midnight = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    elapsed = int((moment - midnight).total_seconds())
    return midnight + timedelta(seconds=elapsed - elapsed % period)

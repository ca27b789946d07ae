"""FRESHNESS, the refresh mode it implies, the schedule of full refreshes and its ticks.

Flink's rules, as its implementation of FLIP-435 has them:
- `IntervalFreshness.of`: the interval is a Java int and positive ("The freshness interval
  currently only supports positive integer type values. But was: ...");
- `MaterializedTableUtils.deriveRefreshMode`: an explicit REFRESH_MODE wins; otherwise a
  freshness strictly below `materialized-table.refresh-mode.freshness-threshold` (30 minutes
  by default) is CONTINUOUS, anything else FULL;
- `IntervalFreshness.validateFreshnessForCron` / `convertFreshnessToCron`: in FULL mode the
  schedule is a cron, so seconds and minutes must be below 60 and divide it, hours below 24
  and divide it, and a DAY freshness must be 1 (months have different lengths).

A cron fires on the wall clock, so every tick falls on a multiple of the freshness counted
from midnight; `planned_tick` finds the one a run belongs to (Flink's `scheduleTime`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime, timedelta

from catalog.core.errors import InvalidInput

#: Flink's default `materialized-table.refresh-mode.freshness-threshold`.
DEFAULT_THRESHOLD = timedelta(minutes=30)
#: Flink keeps the interval in a Java int (`Integer.parseInt` in `IntervalFreshness.of`).
MAX_INTERVAL = 2**31 - 1

POSITIVE_INTEGER_ONLY = (
    "The freshness interval currently only supports positive integer type values. But was: {}"
)
UNSUPPORTED_UNIT = (
    "Materialized table freshness only support SECOND, MINUTE, HOUR, DAY as the time unit."
)


class TimeUnit(enum.StrEnum):
    SECOND = "SECOND"
    MINUTE = "MINUTE"
    HOUR = "HOUR"
    DAY = "DAY"


class RefreshMode(enum.StrEnum):
    CONTINUOUS = "CONTINUOUS"
    FULL = "FULL"


_UNIT_SECONDS = {TimeUnit.SECOND: 1, TimeUnit.MINUTE: 60, TimeUnit.HOUR: 3600, TimeUnit.DAY: 86400}


def _freshness_error(message: str) -> InvalidInput:
    return InvalidInput(message, field="freshness")


def _java_int(text: str) -> int | None:
    """What Java's `Integer.parseInt` accepts (an optional sign, ASCII digits, the int
    range), or None: Flink parses the interval with it, so '+5' and '05' are 5."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits or not all("0" <= char <= "9" for char in digits):
        return None
    # Past the int range anyway; int() would refuse over 4,300 digits with a ValueError.
    if len(digits.lstrip("0")) > 10:
        return None
    value = int(text)
    return value if -(2**31) <= value <= MAX_INTERVAL else None


@dataclass(frozen=True)
class Freshness:
    """`INTERVAL '<value>' <unit>`: how far the table may lag behind its sources."""

    value: int
    unit: TimeUnit

    def __post_init__(self) -> None:
        # IntervalFreshness.of(int, unit) refuses a non-positive interval the same way.
        value = self.value
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_INTERVAL:
            raise _freshness_error(POSITIVE_INTEGER_ONLY.format(value))
        if not isinstance(self.unit, TimeUnit):
            object.__setattr__(self, "unit", _time_unit(str(self.unit)))

    @classmethod
    def parse(cls, value: str | int, unit: str) -> Freshness:
        """From the text of `INTERVAL '<value>' <unit>`, refused as Flink refuses it."""
        if isinstance(value, str):
            number = _java_int(value)
            if number is None:
                raise _freshness_error(POSITIVE_INTEGER_ONLY.format(value))
            value = number
        return cls(value, _time_unit(unit))

    def to_timedelta(self) -> timedelta:
        return timedelta(seconds=self.seconds)

    @property
    def seconds(self) -> int:
        return self.value * _UNIT_SECONDS[self.unit]

    def __str__(self) -> str:
        return f"INTERVAL '{self.value}' {self.unit.value}"


#: A CREATE without FRESHNESS: Flink's `materialized-table.default-freshness.full` (for
#: REFRESH_MODE = FULL) and `.continuous` (otherwise, which that freshness makes CONTINUOUS).
DEFAULT_FULL_FRESHNESS = Freshness(1, TimeUnit.HOUR)
DEFAULT_CONTINUOUS_FRESHNESS = Freshness(3, TimeUnit.MINUTE)


def _time_unit(unit: str) -> TimeUnit:
    try:
        return TimeUnit(unit.upper())
    except ValueError:
        raise _freshness_error(UNSUPPORTED_UNIT) from None


# -- the refresh mode -------------------------------------------------------------------------


def derive_mode(
    freshness: Freshness,
    explicit: RefreshMode | None = None,
    threshold: timedelta = DEFAULT_THRESHOLD,
) -> RefreshMode:
    """The physical mode (Flink's `deriveRefreshMode`): an explicit REFRESH_MODE wins, else
    a freshness strictly below the threshold is CONTINUOUS; at the threshold it is FULL."""
    if explicit is not None:
        return RefreshMode(explicit)
    return RefreshMode.CONTINUOUS if freshness.to_timedelta() < threshold else RefreshMode.FULL


# -- the schedule of full refreshes -----------------------------------------------------------


@dataclass(frozen=True)
class Schedule:
    """When full refreshes run, in the shapes django-celery-beat takes: a crontab (minute,
    hour, day_of_month, month_of_year, day_of_week, as `CrontabSchedule` has them), or, for
    seconds, which a crontab cannot express, an interval. `flink_cron` is the Quartz
    expression Flink gives its workflow scheduler, for display and comparison."""

    crontab: tuple[str, str, str, str, str] | None = None
    every_seconds: int | None = None
    flink_cron: str = ""

    def __str__(self) -> str:
        if self.crontab is not None:
            return " ".join(self.crontab)
        return f"every {self.every_seconds} seconds"


#: What the interval must stay below and divide, per unit (validateCronConstraints).
_CRON_UPPER_BOUND = {TimeUnit.SECOND: 60, TimeUnit.MINUTE: 60, TimeUnit.HOUR: 24}


def check_cron_expressible(freshness: Freshness) -> None:
    """Refuse a freshness a cron cannot express, in Flink's words
    (`IntervalFreshness.validateFreshnessForCron`)."""
    value, unit = freshness.value, freshness.unit
    if unit is TimeUnit.DAY:
        # Months have different lengths: only one day is supported (validateDayConstraints).
        if value > 1:
            raise _freshness_error(
                "In full refresh mode, freshness must be 1 when the time unit is DAY."
            )
        return
    bound = _CRON_UPPER_BOUND[unit]
    if value >= bound:
        raise _freshness_error(
            f"In full refresh mode, freshness must be less than {bound} when the time unit "
            f"is {unit.value}."
        )
    if bound % value != 0:
        raise _freshness_error(
            f"In full refresh mode, only freshness that are factors of {bound} are currently "
            f"supported when the time unit is {unit.value}."
        )


def full_refresh_schedule(freshness: Freshness) -> Schedule:
    """The schedule Flink derives from the freshness (`convertFreshnessToCron`: '0/n * * * *
    ? *', '0 0/n * * * ? *', '0 0 0/n * * ? *', '0 0 0 * * ? *'), with its refusals."""
    check_cron_expressible(freshness)
    n = freshness.value
    if freshness.unit is TimeUnit.SECOND:
        return Schedule(every_seconds=n, flink_cron=f"0/{n} * * * * ? *")
    if freshness.unit is TimeUnit.MINUTE:
        return Schedule(crontab=(f"*/{n}", "*", "*", "*", "*"), flink_cron=f"0 0/{n} * * * ? *")
    if freshness.unit is TimeUnit.HOUR:
        return Schedule(crontab=("0", f"*/{n}", "*", "*", "*"), flink_cron=f"0 0 0/{n} * * ? *")
    return Schedule(crontab=("0", "0", "*", "*", "*"), flink_cron="0 0 0 * * ? *")


@dataclass(frozen=True)
class RefreshPlan:
    """What a definition implies: the mode, and for FULL the schedule."""

    mode: RefreshMode
    schedule: Schedule | None


def plan_refresh(
    freshness: Freshness,
    explicit: RefreshMode | None = None,
    threshold: timedelta = DEFAULT_THRESHOLD,
) -> RefreshPlan:
    """The mode, and the schedule when it is FULL: Flink checks the cron as soon as the mode
    comes out FULL (at CREATE, and when the freshness or the mode changes)."""
    mode = derive_mode(freshness, explicit, threshold)
    schedule = full_refresh_schedule(freshness) if mode is RefreshMode.FULL else None
    return RefreshPlan(mode, schedule)


# -- ticks -------------------------------------------------------------------------------------


def planned_tick(moment: datetime, freshness: Freshness) -> datetime:
    """The scheduled time at or before `moment`: a run's scheduleTime is the planned tick,
    not the time a worker happened to start it. Ticks fall on multiples of the freshness
    from midnight on the wall clock of `moment` (naive, or in its own time zone), as the
    cron above places them."""
    check_cron_expressible(freshness)
    period = freshness.seconds
    elapsed = moment.hour * 3600 + moment.minute * 60 + moment.second
    tick = elapsed - elapsed % period
    return moment.replace(
        hour=tick // 3600, minute=tick % 3600 // 60, second=tick % 60, microsecond=0
    )


def next_schedule_times(after: datetime, freshness: Freshness, count: int = 1) -> list[datetime]:
    """The next `count` ticks strictly after `after` (wall clock, as `planned_tick`)."""
    step = freshness.to_timedelta()
    tick = planned_tick(after, freshness)
    ticks = []
    while len(ticks) < count:
        tick = tick + step
        ticks.append(tick)
    return ticks


# -- lag ---------------------------------------------------------------------------------------


def lag(data_as_of: datetime, now: datetime) -> timedelta:
    """How far the table's data is behind `now` (never negative): what Snowflake shows as a
    dynamic table's lag, and what FRESHNESS bounds."""
    return max(now - data_as_of, timedelta(0))


def meets_freshness(data_as_of: datetime, now: datetime, freshness: Freshness) -> bool:
    """Whether the data is within its freshness (FLIP-435: best effort, not a guarantee)."""
    return lag(data_as_of, now) <= freshness.to_timedelta()

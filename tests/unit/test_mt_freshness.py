"""Freshness, the refresh mode it implies, the full-refresh schedule and its ticks, by
Flink's rules for materialized tables (IntervalFreshness, MaterializedTableUtils,
convertFreshnessToCron)."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from catalog.core.errors import InvalidInput
from refresh.core.freshness import (
    DEFAULT_THRESHOLD,
    Freshness,
    RefreshMode,
    Schedule,
    TimeUnit,
    derive_mode,
    full_refresh_schedule,
    lag,
    meets_freshness,
    next_schedule_times,
    plan_refresh,
    planned_tick,
)

POSITIVE_ONLY = "The freshness interval currently only supports positive integer type values."


# -- the value ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "unit", "expected"),
    [
        ("30", "SECOND", Freshness(30, TimeUnit.SECOND)),
        ("3", "minute", Freshness(3, TimeUnit.MINUTE)),
        ("+05", "HOUR", Freshness(5, TimeUnit.HOUR)),
        ("2147483647", "DAY", Freshness(2147483647, TimeUnit.DAY)),
        (1, "DAY", Freshness(1, TimeUnit.DAY)),
    ],
)
def test_a_freshness_reads_as_javas_integer_parse_reads_its_interval(text, unit, expected):
    assert Freshness.parse(text, unit) == expected


@pytest.mark.parametrize("value", ["0", "-30", "1.5", "abc", "", " 5", "2147483648", "²", 0, -1])
def test_a_freshness_that_is_not_a_positive_java_int_is_refused_in_flinks_words(value):
    with pytest.raises(InvalidInput) as caught:
        Freshness.parse(value, "SECOND")
    assert caught.value.message == f"{POSITIVE_ONLY} But was: {value}"
    assert caught.value.field == "freshness"


def test_a_freshness_built_directly_is_held_to_the_same_rule():
    with pytest.raises(InvalidInput, match="But was: 0"):
        Freshness(0, TimeUnit.MINUTE)
    assert Freshness(2, "hour") == Freshness(2, TimeUnit.HOUR)


@pytest.mark.parametrize("unit", ["YEAR", "WEEK", "MILLISECOND", "DAYS", ""])
def test_a_unit_other_than_second_minute_hour_day_is_refused_in_flinks_words(unit):
    with pytest.raises(InvalidInput) as caught:
        Freshness.parse("1", unit)
    assert caught.value.message == (
        "Materialized table freshness only support SECOND, MINUTE, HOUR, DAY as the time unit."
    )


def test_a_freshness_reads_back_as_its_interval_and_as_a_duration():
    freshness = Freshness(3, TimeUnit.MINUTE)
    assert str(freshness) == "INTERVAL '3' MINUTE"
    assert freshness.to_timedelta() == timedelta(minutes=3)
    assert Freshness(2, TimeUnit.DAY).seconds == 172800


# -- the mode ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("freshness", "mode"),
    [
        (Freshness(3, TimeUnit.MINUTE), RefreshMode.CONTINUOUS),
        (Freshness(29, TimeUnit.MINUTE), RefreshMode.CONTINUOUS),
        (Freshness(1799, TimeUnit.SECOND), RefreshMode.CONTINUOUS),
        (Freshness(1800, TimeUnit.SECOND), RefreshMode.FULL),  # at the threshold: FULL
        (Freshness(30, TimeUnit.MINUTE), RefreshMode.FULL),
        (Freshness(31, TimeUnit.MINUTE), RefreshMode.FULL),
        (Freshness(1, TimeUnit.HOUR), RefreshMode.FULL),
        (Freshness(1, TimeUnit.DAY), RefreshMode.FULL),
    ],
)
def test_a_freshness_strictly_below_the_threshold_is_continuous(freshness, mode):
    assert derive_mode(freshness) is mode


def test_the_default_threshold_is_flinks_thirty_minutes():
    assert timedelta(minutes=30) == DEFAULT_THRESHOLD


def test_an_explicit_refresh_mode_wins_over_the_freshness():
    assert derive_mode(Freshness(5, TimeUnit.SECOND), RefreshMode.FULL) is RefreshMode.FULL
    assert derive_mode(Freshness(1, TimeUnit.DAY), RefreshMode.CONTINUOUS) is RefreshMode.CONTINUOUS


@pytest.mark.parametrize(
    ("threshold", "mode"),
    [
        (timedelta(hours=2), RefreshMode.CONTINUOUS),
        (timedelta(hours=1, seconds=1), RefreshMode.CONTINUOUS),
        (timedelta(hours=1), RefreshMode.FULL),
        (timedelta(minutes=59), RefreshMode.FULL),
    ],
)
def test_the_threshold_is_a_setting_compared_strictly(threshold, mode):
    assert derive_mode(Freshness(1, TimeUnit.HOUR), threshold=threshold) is mode


def test_a_plan_has_a_schedule_only_in_full_mode():
    continuous = plan_refresh(Freshness(3, TimeUnit.MINUTE))
    assert (continuous.mode, continuous.schedule) == (RefreshMode.CONTINUOUS, None)
    full = plan_refresh(Freshness(3, TimeUnit.MINUTE), RefreshMode.FULL)
    assert (full.mode, str(full.schedule)) == (RefreshMode.FULL, "*/3 * * * *")


def test_a_plan_that_comes_out_full_refuses_a_freshness_a_cron_cannot_express():
    # Flink's converter test: 40 MINUTE with no REFRESH_MODE is FULL under the default
    # threshold, and is refused for its cron.
    with pytest.raises(InvalidInput, match="factors of 60"):
        plan_refresh(Freshness(40, TimeUnit.MINUTE))
    assert plan_refresh(Freshness(40, TimeUnit.MINUTE), RefreshMode.CONTINUOUS).schedule is None


# -- the schedule ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("freshness", "crontab", "flink_cron"),
    [
        (Freshness(1, TimeUnit.MINUTE), ("*/1", "*", "*", "*", "*"), "0 0/1 * * * ? *"),
        (Freshness(15, TimeUnit.MINUTE), ("*/15", "*", "*", "*", "*"), "0 0/15 * * * ? *"),
        (Freshness(30, TimeUnit.MINUTE), ("*/30", "*", "*", "*", "*"), "0 0/30 * * * ? *"),
        (Freshness(1, TimeUnit.HOUR), ("0", "*/1", "*", "*", "*"), "0 0 0/1 * * ? *"),
        (Freshness(2, TimeUnit.HOUR), ("0", "*/2", "*", "*", "*"), "0 0 0/2 * * ? *"),
        (Freshness(12, TimeUnit.HOUR), ("0", "*/12", "*", "*", "*"), "0 0 0/12 * * ? *"),
        (Freshness(1, TimeUnit.DAY), ("0", "0", "*", "*", "*"), "0 0 0 * * ? *"),
    ],
)
def test_full_refreshes_get_the_crontab_flink_derives(freshness, crontab, flink_cron):
    assert full_refresh_schedule(freshness) == Schedule(crontab=crontab, flink_cron=flink_cron)


@pytest.mark.parametrize(
    ("seconds", "flink_cron"), [(5, "0/5 * * * * ? *"), (30, "0/30 * * * * ? *")]
)
def test_seconds_which_a_crontab_cannot_express_become_an_interval(seconds, flink_cron):
    schedule = full_refresh_schedule(Freshness(seconds, TimeUnit.SECOND))
    assert schedule == Schedule(every_seconds=seconds, flink_cron=flink_cron)
    assert str(schedule) == f"every {seconds} seconds"


@pytest.mark.parametrize(
    ("freshness", "message"),
    [
        (Freshness(90, TimeUnit.SECOND),
         "In full refresh mode, freshness must be less than 60 when the time unit is SECOND."),
        (Freshness(60, TimeUnit.SECOND),
         "In full refresh mode, freshness must be less than 60 when the time unit is SECOND."),
        (Freshness(32, TimeUnit.SECOND),
         "In full refresh mode, only freshness that are factors of 60 are currently supported "
         "when the time unit is SECOND."),
        (Freshness(90, TimeUnit.MINUTE),
         "In full refresh mode, freshness must be less than 60 when the time unit is MINUTE."),
        (Freshness(40, TimeUnit.MINUTE),
         "In full refresh mode, only freshness that are factors of 60 are currently supported "
         "when the time unit is MINUTE."),
        (Freshness(24, TimeUnit.HOUR),
         "In full refresh mode, freshness must be less than 24 when the time unit is HOUR."),
        (Freshness(5, TimeUnit.HOUR),
         "In full refresh mode, only freshness that are factors of 24 are currently supported "
         "when the time unit is HOUR."),
        (Freshness(2, TimeUnit.DAY),
         "In full refresh mode, freshness must be 1 when the time unit is DAY."),
    ],
)  # fmt: skip
def test_a_freshness_a_cron_cannot_express_is_refused_in_flinks_words(freshness, message):
    with pytest.raises(InvalidInput) as caught:
        full_refresh_schedule(freshness)
    assert caught.value.message == message
    assert caught.value.field == "freshness"


# -- ticks -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("freshness", "tick"),
    [
        (Freshness(10, TimeUnit.SECOND), datetime(2024, 3, 2, 10, 17, 40)),
        (Freshness(1, TimeUnit.MINUTE), datetime(2024, 3, 2, 10, 17)),
        (Freshness(15, TimeUnit.MINUTE), datetime(2024, 3, 2, 10, 15)),
        (Freshness(1, TimeUnit.HOUR), datetime(2024, 3, 2, 10)),
        (Freshness(4, TimeUnit.HOUR), datetime(2024, 3, 2, 8)),
        (Freshness(1, TimeUnit.DAY), datetime(2024, 3, 2)),
    ],
)
def test_the_planned_tick_is_the_one_the_cron_placed_not_the_start(freshness, tick):
    started = datetime(2024, 3, 2, 10, 17, 42, 123456)
    assert planned_tick(started, freshness) == tick


def test_a_moment_on_a_tick_is_its_own_planned_tick():
    on_tick = datetime(2024, 1, 2, 0, 0)
    assert planned_tick(on_tick, Freshness(1, TimeUnit.DAY)) == on_tick


def test_ticks_follow_the_wall_clock_of_an_aware_moment():
    berlin = ZoneInfo("Europe/Berlin")
    tick = planned_tick(datetime(2024, 7, 1, 9, 59, tzinfo=berlin), Freshness(2, TimeUnit.HOUR))
    assert tick == datetime(2024, 7, 1, 8, 0, tzinfo=berlin)


def test_a_freshness_no_cron_can_express_has_no_ticks():
    with pytest.raises(InvalidInput, match="factors of 60"):
        planned_tick(datetime(2024, 1, 1), Freshness(7, TimeUnit.MINUTE))


def test_the_next_ticks_come_after_the_moment_and_cross_midnight():
    ticks = next_schedule_times(datetime(2024, 3, 2, 21, 0), Freshness(2, TimeUnit.HOUR), 3)
    assert ticks == [datetime(2024, 3, 2, 22), datetime(2024, 3, 3, 0), datetime(2024, 3, 3, 2)]
    assert next_schedule_times(datetime(2024, 3, 2), Freshness(1, TimeUnit.DAY)) == [
        datetime(2024, 3, 3)
    ]


# -- lag ---------------------------------------------------------------------------------------


def test_lag_is_how_far_the_data_is_behind_and_never_negative():
    now = datetime(2024, 3, 2, 12, 0)
    assert lag(datetime(2024, 3, 2, 11, 45), now) == timedelta(minutes=15)
    assert lag(datetime(2024, 3, 2, 12, 5), now) == timedelta(0)


def test_data_meets_its_freshness_up_to_and_including_the_interval():
    now, freshness = datetime(2024, 3, 2, 12, 0), Freshness(15, TimeUnit.MINUTE)
    assert meets_freshness(datetime(2024, 3, 2, 11, 45), now, freshness)
    assert not meets_freshness(datetime(2024, 3, 2, 11, 44, 59), now, freshness)

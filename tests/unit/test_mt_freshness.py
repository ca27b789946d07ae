"""Freshness, refresh modes, full-refresh schedules and the scheduled partition, by Flink's
rules for materialized tables (FLIP-435)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from catalog.core.errors import InvalidInput
from refresh.core.freshness import (
    Freshness,
    RefreshMode,
    TimeUnit,
    derive_mode,
    full_refresh_schedule,
    planned_tick,
)
from refresh.core.partitions import scheduled_partition, to_strftime


@pytest.mark.parametrize("value", ["0", "-30", "1.5", "abc", ""])
def test_a_freshness_that_is_not_a_positive_integer_is_refused_in_flinks_words(value):
    with pytest.raises(InvalidInput, match="only supports positive integer type values"):
        Freshness.parse(value, "SECOND")


@pytest.mark.parametrize(
    ("freshness", "mode"),
    [
        (Freshness(29, TimeUnit.MINUTE), RefreshMode.CONTINUOUS),
        (Freshness(1799, TimeUnit.SECOND), RefreshMode.CONTINUOUS),
        (Freshness(30, TimeUnit.MINUTE), RefreshMode.FULL),  # at the threshold: FULL
        (Freshness(1, TimeUnit.HOUR), RefreshMode.FULL),
        (Freshness(1, TimeUnit.DAY), RefreshMode.FULL),
    ],
)
def test_freshness_strictly_below_the_threshold_is_continuous(freshness, mode):
    assert derive_mode(freshness) is mode


def test_an_explicit_refresh_mode_wins_over_freshness():
    assert derive_mode(Freshness(5, TimeUnit.SECOND), RefreshMode.FULL) is RefreshMode.FULL
    assert derive_mode(Freshness(1, TimeUnit.DAY), RefreshMode.CONTINUOUS) is RefreshMode.CONTINUOUS


def test_the_threshold_is_a_setting():
    freshness = Freshness(1, TimeUnit.HOUR)
    assert derive_mode(freshness, threshold=timedelta(hours=2)) is RefreshMode.CONTINUOUS


@pytest.mark.parametrize(
    ("freshness", "schedule"),
    [
        (Freshness(10, TimeUnit.SECOND), "every 10 seconds"),
        (Freshness(15, TimeUnit.MINUTE), "*/15 * * * *"),
        (Freshness(2, TimeUnit.HOUR), "0 */2 * * *"),
        (Freshness(1, TimeUnit.DAY), "0 0 * * *"),
    ],
)
def test_full_refreshes_are_scheduled_as_flink_derives_the_cron(freshness, schedule):
    assert str(full_refresh_schedule(freshness)) == schedule


@pytest.mark.parametrize(
    ("freshness", "message"),
    [
        (Freshness(40, TimeUnit.MINUTE), "only freshness that are factors of 60 are currently "
         "supported when the time unit is MINUTE."),
        (Freshness(32, TimeUnit.SECOND), "factors of 60 are currently supported when the time "
         "unit is SECOND."),
        (Freshness(90, TimeUnit.SECOND), "freshness must be less than 60 when the time unit is "
         "SECOND."),
        (Freshness(5, TimeUnit.HOUR), "factors of 24 are currently supported when the time unit "
         "is HOUR."),
        (Freshness(2, TimeUnit.DAY), "freshness must be 1 when the time unit is DAY."),
    ],
)  # fmt: skip
def test_a_freshness_a_cron_cannot_express_is_refused_in_flinks_words(freshness, message):
    with pytest.raises(InvalidInput) as caught:
        full_refresh_schedule(freshness)
    assert caught.value.message.endswith(message)


def test_the_planned_tick_is_the_schedule_not_the_start():
    started = datetime(2024, 3, 2, 10, 17, 42)
    assert planned_tick(started, Freshness(15, TimeUnit.MINUTE)) == datetime(2024, 3, 2, 10, 15)
    assert planned_tick(started, Freshness(10, TimeUnit.SECOND)) == datetime(2024, 3, 2, 10, 17, 40)
    assert planned_tick(started, Freshness(1, TimeUnit.DAY)) == datetime(2024, 3, 2)


@pytest.mark.parametrize(
    ("schedule_time", "freshness", "expected"),
    [
        # The seed's examples: daily at midnight refreshes yesterday...
        (datetime(2024, 3, 2), Freshness(1, TimeUnit.DAY), "2024-03-01"),
        (datetime(2024, 1, 2), Freshness(1, TimeUnit.DAY), "2024-01-01"),
        # ...hourly refreshes the latest (today's) partition.
        (datetime(2024, 3, 2, 5), Freshness(1, TimeUnit.HOUR), "2024-03-02"),
    ],
)
def test_a_scheduled_refresh_overwrites_the_partition_holding_schedule_time_minus_freshness(
    schedule_time, freshness, expected
):
    options = {"partition.fields.ds.date-formatter": "yyyy-MM-dd", "other": "x"}
    assert scheduled_partition(schedule_time, freshness, options) == {"ds": expected}


def test_several_formatted_partition_columns_each_get_their_value():
    options = {
        "partition.fields.ds.date-formatter": "yyyyMMdd",
        "partition.fields.hh.date-formatter": "HH",
    }
    assert scheduled_partition(
        datetime(2024, 3, 2, 0, 0), Freshness(1, TimeUnit.HOUR), options
    ) == {"ds": "20240301", "hh": "23"}


def test_a_table_without_date_formatters_is_refreshed_whole():
    assert scheduled_partition(datetime(2024, 3, 2), Freshness(1, TimeUnit.DAY), {}) == {}


def test_java_date_patterns_translate_and_unknown_letters_are_refused():
    assert to_strftime("yyyy-MM-dd'T'HH:mm:ss") == "%Y-%m-%dT%H:%M:%S"
    with pytest.raises(InvalidInput, match="Unsupported letter 'E'"):
        to_strftime("yyyy-MM-dd EEE")

"""The partition a scheduled full refresh overwrites: `scheduleTime - freshness` formatted
with each `partition.fields.<col>.date-formatter` (FLIP-435's "Partitioned Table Full
Refresh", and the cases of Flink's MaterializedTableManagerTest)."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from catalog.core.errors import InvalidInput
from refresh.core.freshness import Freshness, TimeUnit
from refresh.core.partitions import (
    check_formatter_column,
    check_formatter_option,
    check_partition_values,
    format_moment,
    formatter_columns,
    parse_schedule_time,
    scheduled_partition,
    to_strftime,
)

DAY = "partition.fields.day.date-formatter"
HOUR = "partition.fields.hour.date-formatter"
MINUTE = "partition.fields.minute.date-formatter"


def seconds(n: int) -> Freshness:
    return Freshness(n, TimeUnit.SECOND)


def minutes(n: int) -> Freshness:
    return Freshness(n, TimeUnit.MINUTE)


def hours(n: int) -> Freshness:
    return Freshness(n, TimeUnit.HOUR)


def days(n: int) -> Freshness:
    return Freshness(n, TimeUnit.DAY)


# -- the seed's examples -----------------------------------------------------------------------


def test_a_daily_refresh_at_midnight_overwrites_yesterdays_partition():
    # FLIP-435: "today's date is March 2, 2024 ... it will determine that ds=2024-03-01".
    options = {"partition.fields.ds.date-formatter": "yyyy-MM-dd"}
    assert scheduled_partition(datetime(2024, 3, 2), days(1), options) == {"ds": "2024-03-01"}
    assert scheduled_partition(datetime(2024, 1, 2), days(1), options) == {"ds": "2024-01-01"}


def test_an_hourly_refresh_overwrites_the_latest_daily_partition():
    # FLIP-435: with FRESHNESS = INTERVAL '1' HOUR "it would compute that ds='2024-03-02',
    # which is the latest time partition".
    options = {"partition.fields.ds.date-formatter": "yyyy-MM-dd"}
    assert scheduled_partition(datetime(2024, 3, 2, 5), hours(1), options) == {"ds": "2024-03-02"}


def test_the_hourly_run_at_midnight_with_day_and_hour_fields_overwrites_the_last_hour():
    options = {DAY: "yyyy-MM-dd", HOUR: "HH"}
    assert scheduled_partition(datetime(2024, 1, 2), hours(1), options) == {
        "day": "2024-01-01",
        "hour": "23",
    }


# -- Flink's MaterializedTableManagerTest.testGetPeriodRefreshPartition --------------------------

FLINK_CASES = [
    # The freshness matches the partition the formatters describe.
    ("2024-01-01 00:00:00", days(1), {DAY: "yyyy-MM-dd"}, {"day": "2023-12-31"}),
    ("2024-01-02 00:00:00", days(1), {DAY: "yyyy-MM-dd"}, {"day": "2024-01-01"}),
    ("2024-01-02 00:00:00", hours(1), {DAY: "yyyy-MM-dd", HOUR: "HH"},
     {"day": "2024-01-01", "hour": "23"}),
    ("2024-01-02 01:00:00", hours(1), {DAY: "yyyy-MM-dd", HOUR: "HH"},
     {"day": "2024-01-02", "hour": "00"}),
    ("2024-01-01 00:00:00", hours(2), {DAY: "yyyy-MM-dd", HOUR: "HH"},
     {"day": "2023-12-31", "hour": "22"}),
    ("2024-01-01 00:00:00", hours(4), {DAY: "yyyy-MM-dd", HOUR: "HH"},
     {"day": "2023-12-31", "hour": "20"}),
    ("2024-01-01 00:00:00", hours(8), {DAY: "yyyy-MM-dd", HOUR: "HH"},
     {"day": "2023-12-31", "hour": "16"}),
    ("2024-01-01 00:00:00", hours(12), {DAY: "yyyy-MM-dd", HOUR: "HH"},
     {"day": "2023-12-31", "hour": "12"}),
    ("2024-01-01 12:00:00", hours(12), {DAY: "yyyy-MM-dd", HOUR: "HH"},
     {"day": "2024-01-01", "hour": "00"}),
    *[
        ("2024-01-01 00:00:00", minutes(n), {DAY: "yyyy-MM-dd", HOUR: "HH", MINUTE: "mm"},
         {"day": "2023-12-31", "hour": "23", "minute": f"{60 - n:02d}"})
        for n in (1, 2, 4, 5, 6, 10, 12, 15, 30)
    ],
    ("2024-01-01 00:30:00", minutes(30), {DAY: "yyyy-MM-dd", HOUR: "HH", MINUTE: "mm"},
     {"day": "2024-01-01", "hour": "00", "minute": "00"}),
    # The freshness is coarser than the partition the formatters describe.
    ("2024-01-01 00:00:00", days(1), {DAY: "yyyy-MM-dd", HOUR: "HH"},
     {"day": "2023-12-31", "hour": "00"}),
    ("2024-01-01 00:00:00", days(1), {DAY: "yyyy-MM-dd", HOUR: "HH", MINUTE: "mm"},
     {"day": "2023-12-31", "hour": "00", "minute": "00"}),
    ("2024-01-01 00:00:00", hours(1), {DAY: "yyyy-MM-dd", HOUR: "HH", MINUTE: "mm"},
     {"day": "2023-12-31", "hour": "23", "minute": "00"}),
    ("2024-01-01 01:00:00", hours(1), {DAY: "yyyy-MM-dd", HOUR: "HH", MINUTE: "mm"},
     {"day": "2024-01-01", "hour": "00", "minute": "00"}),
    # The freshness is finer than the partition the formatters describe.
    ("2024-01-01 00:00:00", hours(1), {DAY: "yyyy-MM-dd"}, {"day": "2023-12-31"}),
    ("2024-01-01 01:00:00", hours(1), {DAY: "yyyy-MM-dd"}, {"day": "2024-01-01"}),
    ("2024-01-01 00:00:00", hours(2), {DAY: "yyyy-MM-dd"}, {"day": "2023-12-31"}),
    ("2024-01-01 02:00:00", hours(2), {DAY: "yyyy-MM-dd"}, {"day": "2024-01-01"}),
    ("2024-01-01 00:00:00", hours(4), {DAY: "yyyy-MM-dd"}, {"day": "2023-12-31"}),
    ("2024-01-01 04:00:00", hours(4), {DAY: "yyyy-MM-dd"}, {"day": "2024-01-01"}),
    *[
        ("2024-01-01 00:00:00", minutes(n), {DAY: "yyyy-MM-dd", HOUR: "HH"},
         {"day": "2023-12-31", "hour": "23"})
        for n in (1, 2, 4, 15)
    ],
    ("2024-01-01 00:00:00", minutes(1), {DAY: "yyyy-MM-dd"}, {"day": "2023-12-31"}),
    ("2024-01-01 00:01:00", minutes(1), {DAY: "yyyy-MM-dd"}, {"day": "2024-01-01"}),
]  # fmt: skip


@pytest.mark.parametrize(("schedule_time", "freshness", "options", "expected"), FLINK_CASES)
def test_flinks_cases_give_flinks_partitions(schedule_time, freshness, options, expected):
    assert scheduled_partition(schedule_time, freshness, options) == expected
    as_datetime = datetime.strptime(schedule_time, "%Y-%m-%d %H:%M:%S")
    assert scheduled_partition(as_datetime, freshness, options) == expected


def test_a_missing_schedule_time_is_refused_in_flinks_words():
    with pytest.raises(InvalidInput) as caught:
        scheduled_partition(
            None, days(1), {DAY: "yyyy-MM-dd"}, table="`catalog`.`database`.`table`"
        )
    assert caught.value.message == (
        "The scheduler time must not be null during the periodic refresh of the materialized "
        "table `catalog`.`database`.`table`."
    )


def test_a_schedule_time_not_in_flinks_format_is_refused_in_flinks_words():
    with pytest.raises(InvalidInput) as caught:
        scheduled_partition(
            "2024-01-01", days(1), {DAY: "yyyy-MM-dd"}, table="`catalog`.`database`.`table`"
        )
    assert caught.value.message == (
        "Failed to parse a valid partition value for the field 'day' in materialized table "
        "`catalog`.`database`.`table` using the scheduler time '2024-01-01' based on the date "
        "format 'yyyy-MM-dd HH:mm:ss'."
    )


# -- which options count -----------------------------------------------------------------------


def test_a_table_without_date_formatters_is_refreshed_whole():
    options = {"connector": "iceberg", "partition.fields.ds.other": "x"}
    assert scheduled_partition(datetime(2024, 3, 2), days(1), options) == {}
    assert scheduled_partition(None, days(1), {}) == {}  # Flink reads no time then either


def test_only_date_formatter_options_name_partition_columns():
    options = {DAY: "yyyy-MM-dd", "partition.fields.a.b.date-formatter": "HH", "k": "v"}
    assert formatter_columns(options) == {"day": "yyyy-MM-dd", "a.b": "HH"}


def test_a_date_formatter_must_name_a_partition_column():
    assert check_formatter_column(DAY, ["day", "hour"]) == "day"
    assert check_formatter_column("sink.parallelism", []) is None
    with pytest.raises(InvalidInput) as caught:
        check_formatter_column("partition.fields.ds.date-formatter", ["b", "c"])
    assert caught.value.message == (
        "Column 'ds' referenced by materialized table option 'partition.fields.ds.date-"
        "formatter' isn't a partition column. Available partition columns: ['b', 'c']."
    )
    with pytest.raises(InvalidInput, match="Unsupported pattern letters 'Q'"):
        check_formatter_option(DAY, "yyyy-Q", ["day"])


# -- Java date patterns ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "strftime", "formatted"),
    [
        ("yyyy-MM-dd", "%Y-%m-%d", "2024-03-02"),
        ("yyyyMMdd", "%Y%m%d", "20240302"),
        ("HH", "%H", "07"),
        ("yyyy-MM-dd HH", "%Y-%m-%d %H", "2024-03-02 07"),
        ("yyyy-MM-dd HH:mm:ss", "%Y-%m-%d %H:%M:%S", "2024-03-02 07:05:09"),
        ("yyyy-MM-dd'T'HH", "%Y-%m-%dT%H", "2024-03-02T07"),
        ("yyyyMMdd''HH", "%Y%m%d'%H", "20240302'07"),
        ("'week of' yyyy/MM/dd", "week of %Y/%m/%d", "week of 2024/03/02"),
        ("'it''s' HH'h'", "it's %Hh", "it's 07h"),
        ("yyyy_MM_dd 100%", "%Y_%m_%d 100%%", "2024_03_02 100%"),
    ],
)
def test_a_java_date_pattern_translates_and_formats(pattern, strftime, formatted):
    moment = datetime(2024, 3, 2, 7, 5, 9)
    assert to_strftime(pattern) == strftime
    assert format_moment(moment, pattern) == formatted
    assert moment.strftime(to_strftime(pattern)) == formatted


def test_a_year_below_1000_is_padded_as_javas_yyyy_pads_it():
    assert format_moment(datetime(999, 1, 2), "yyyy-MM-dd") == "0999-01-02"


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("yyyy-MM-dd EEE", "Unsupported pattern letters 'EEE'"),
        ("yy-MM-dd", "Unsupported pattern letters 'yy'"),
        ("yyyyy", "Unsupported pattern letters 'yyyyy'"),
        ("yyyy-M-d", "Unsupported pattern letters 'M'"),
        ("hh:mm a", "Unsupported pattern letters 'hh'"),
        ("HH:mm:ss.SSS", "Unsupported pattern letters 'SSS'"),
        ("yyyy-MM-ddTHH", "Unsupported pattern letters 'T'"),
        ("yyyy[-MM]", "Reserved character '['"),
        ("yyyy-MM-dd'T", "Unclosed quote"),
        ("", "must not be empty"),
    ],
)
def test_a_pattern_letter_not_translated_is_refused_never_guessed(pattern, message):
    with pytest.raises(InvalidInput, match=message.replace("[", "\\[")):
        to_strftime(pattern)


# -- time zones --------------------------------------------------------------------------------


def test_a_text_schedule_time_reads_as_flinks_default_format():
    assert parse_schedule_time("2024-01-02 03:04:05") == datetime(2024, 1, 2, 3, 4, 5)
    with pytest.raises(InvalidInput, match="does not match the format 'yyyy-MM-dd HH:mm:ss'"):
        parse_schedule_time("20240103 00:00:00.000")


def test_a_naive_schedule_time_is_taken_in_flinks_local_time_zone():
    berlin = ZoneInfo("Europe/Berlin")
    options = {DAY: "yyyy-MM-dd", HOUR: "HH"}
    assert scheduled_partition("2024-07-02 00:00:00", hours(1), options, tz=berlin) == {
        "day": "2024-07-01",
        "hour": "23",
    }
    # An aware time is converted to that zone first: 22:00 UTC is midnight in Berlin.
    utc_time = datetime(2024, 7, 1, 22, 0, tzinfo=ZoneInfo("UTC"))
    assert scheduled_partition(utc_time, hours(1), options, tz=berlin) == {
        "day": "2024-07-01",
        "hour": "23",
    }


def test_the_day_after_a_daylight_saving_change_refreshes_that_day_not_the_one_before():
    # 2024-03-31 had 23 hours in Berlin; Flink's millisecond subtraction would land on
    # 2024-03-30 23:00 and never refresh 2024-03-31. The wall clock the cron ticks on does.
    berlin = ZoneInfo("Europe/Berlin")
    tick = datetime(2024, 4, 1, tzinfo=berlin)
    options = {"partition.fields.ds.date-formatter": "yyyy-MM-dd"}
    assert scheduled_partition(tick, days(1), options) == {"ds": "2024-03-31"}


def test_seconds_freshness_moves_the_partition_by_seconds():
    options = {MINUTE: "HH:mm:ss"}
    assert scheduled_partition(datetime(2024, 1, 1, 0, 0, 0), seconds(30), options) == {
        "minute": "23:59:30"
    }


# -- a partition asked for by hand -------------------------------------------------------------


@pytest.mark.parametrize(
    ("partition", "words"),
    [
        ({"ds": "x; DROP TABLE t; --"}, "does not match its date-formatter 'yyyy-MM-dd' "
         "(for example '2024-01-31')"),
        ({"ds": "2024-1-5"}, "does not match its date-formatter"),
        ({"ds": "2024-02-30"}, "does not match its date-formatter"),
        ({"hour": "7"}, "does not match its date-formatter 'HH'"),
        ({"n": "1; DROP"}, "is not a whole number (the column is long)"),
        ({"day": "2024-02-30"}, "is not a valid date"),
        ({"name": "a\nb"}, "without control characters"),
        ({"name": "x" * 1001}, "at most 1000 characters"),
    ],
)  # fmt: skip
def test_a_partition_value_the_column_cannot_hold_is_refused(partition, words):
    with pytest.raises(InvalidInput) as refused:
        check_partition_values(
            partition,
            options={
                "partition.fields.ds.date-formatter": "yyyy-MM-dd",
                "partition.fields.hour.date-formatter": "HH",
            },
            column_types={"ds": "string", "hour": "string", "n": "long", "day": "date",
                          "name": "string"},
        )  # fmt: skip
    assert words in refused.value.message
    assert refused.value.field == "partition"


def test_partition_values_the_columns_can_hold_pass():
    check_partition_values(
        {"ds": "2024-01-31", "hour": "07", "n": "-12", "day": "2024-02-29", "name": "it's; ok"},
        options={
            "partition.fields.ds.date-formatter": "yyyy-MM-dd",
            "partition.fields.hour.date-formatter": "HH",
        },
        column_types={"ds": "string", "hour": "string", "n": "long", "day": "date"},
    )

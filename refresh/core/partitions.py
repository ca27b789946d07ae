"""The partition a scheduled full refresh overwrites (FLIP-435, "Partitioned Table Full
Refresh"; Flink's `MaterializedTableManager.getPeriodRefreshPartition`).

For each option `partition.fields.<column>.date-formatter`, the value is `scheduleTime -
freshness` formatted with that pattern: with freshness 1 DAY, the run scheduled at
2024-03-02 00:00 refreshes ds='2024-03-01'; with 1 HOUR, the run at 2024-01-02 00:00
refreshes day='2024-01-01', hour='23'. A table without such options is refreshed whole.

The patterns are Java's (`SimpleDateFormat`, as Flink formats them); the common letters are
translated here and any other letter is refused, never guessed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, tzinfo

from catalog.core.errors import InvalidInput
from refresh.core.freshness import Freshness

#: Flink's option key is `partition.fields.#.date-formatter` (MaterializedTableConfigOptions).
PARTITION_FIELDS = "partition.fields."
DATE_FORMATTER = ".date-formatter"
#: How Flink reads a scheduleTime given as text (SCHEDULE_TIME_DATE_FORMATTER_DEFAULT).
SCHEDULE_TIME_FORMAT = "yyyy-MM-dd HH:mm:ss"


# -- Java date patterns ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Field:
    """A run of one pattern letter: its strftime directive and its zero-padded value."""

    directive: str
    attribute: str
    width: int


#: The letters translated. Java reads a run of one letter as one field, so 'yyyyMMdd' is
#: yyyy, MM, dd, and 'yyyyy' or 'M' are fields of their own, which are refused.
_FIELDS = {
    "yyyy": _Field("%Y", "year", 4),
    "MM": _Field("%m", "month", 2),
    "dd": _Field("%d", "day", 2),
    "HH": _Field("%H", "hour", 2),
    "mm": _Field("%M", "minute", 2),
    "ss": _Field("%S", "second", 2),
}
#: Reserved by Java's formatters (optional sections and future use), refused outright.
_RESERVED = "[]{}#"

Part = _Field | str


def _letter_run(pattern: str, start: int) -> str:
    end = start
    while end < len(pattern) and pattern[end] == pattern[start]:
        end += 1
    return pattern[start:end]


def _quoted(pattern: str, start: int) -> tuple[str, int]:
    """The literal text of the quoted section opening at `start`, and where the pattern
    continues. As in Java, '' is a single quote, inside a section or outside one."""
    if pattern.startswith("''", start):
        return "'", start + 2
    text, index = [], start + 1
    while index < len(pattern):
        if pattern.startswith("''", index):
            text.append("'")
            index += 2
        elif pattern[index] == "'":
            return "".join(text), index + 1
        else:
            text.append(pattern[index])
            index += 1
    raise InvalidInput(f"Unclosed quote in date formatter {pattern!r}", field="options")


def compile_pattern(pattern: str) -> tuple[Part, ...]:
    """A Java date pattern as fields and literal text, or an InvalidInput naming what is not
    supported."""
    if not pattern:
        raise InvalidInput("A date formatter must not be empty", field="options")
    parts: list[Part] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "'":
            text, index = _quoted(pattern, index)
            parts.append(text)
        elif char.isascii() and char.isalpha():
            run = _letter_run(pattern, index)
            if run not in _FIELDS:
                raise InvalidInput(
                    f"Unsupported pattern letters {run!r} in date formatter {pattern!r}: use "
                    "yyyy, MM, dd, HH, mm, ss, and quote literal text ('T')",
                    field="options",
                )
            parts.append(_FIELDS[run])
            index += len(run)
        elif char in _RESERVED:
            raise InvalidInput(
                f"Reserved character {char!r} in date formatter {pattern!r}: quote it",
                field="options",
            )
        else:
            parts.append(char)
            index += 1
    return tuple(parts)


def to_strftime(pattern: str) -> str:
    """A Java date pattern ('yyyy-MM-dd', "yyyyMMdd'T'HH") as a strftime format."""
    return "".join(
        part.directive if isinstance(part, _Field) else part.replace("%", "%%")
        for part in compile_pattern(pattern)
    )


def format_moment(moment: datetime, pattern: str) -> str:
    """`moment` formatted with a Java date pattern. Done field by field rather than with
    strftime, whose %Y does not pad years below 1000 on every platform (Java's yyyy does)."""
    return "".join(
        f"{getattr(moment, part.attribute):0{part.width}d}" if isinstance(part, _Field) else part
        for part in compile_pattern(pattern)
    )


def parse_schedule_time(text: str, pattern: str = SCHEDULE_TIME_FORMAT) -> datetime:
    """A scheduleTime given as text (Flink's refresh endpoint takes one, by default in
    'yyyy-MM-dd HH:mm:ss'), as a naive datetime."""
    try:
        return datetime.strptime(text, to_strftime(pattern))
    except (TypeError, ValueError):
        raise InvalidInput(
            f"The schedule time {text!r} does not match the format {pattern!r}",
            field="scheduleTime",
        ) from None


# -- the options -------------------------------------------------------------------------------


def formatter_column(key: str) -> str | None:
    """The column of a `partition.fields.<column>.date-formatter` option key, else None."""
    if key.startswith(PARTITION_FIELDS) and key.endswith(DATE_FORMATTER):
        column = key[len(PARTITION_FIELDS) : -len(DATE_FORMATTER)]
        return column or None
    return None


def formatter_columns(options: Mapping[str, str]) -> dict[str, str]:
    """{column: pattern} from the table's options."""
    found = {}
    for key, pattern in options.items():
        column = formatter_column(key)
        if column is not None:
            found[column] = pattern
    return found


def check_formatter_column(key: str, partitioned_by: Iterable[str]) -> str | None:
    """Flink's create-time check (its converter's words, list included): a
    `partition.fields.<col>.date-formatter` option must name a partition column. Returns
    the column, or None for any other option."""
    column = formatter_column(key)
    if column is None:
        return None
    columns = list(partitioned_by)
    if column not in columns:
        available = "['" + "', '".join(columns) + "']"
        raise InvalidInput(
            f"Column '{column}' referenced by materialized table option '{key}' isn't a "
            f"partition column. Available partition columns: {available}.",
            field="options",
        )
    return column


def check_formatter_option(key: str, pattern: str, partitioned_by: Iterable[str]) -> None:
    """Both checks a date-formatter option gets at CREATE: Flink's (a partition column), and
    ours that its pattern translates, so that a bad pattern is refused at once rather than
    at the first scheduled run."""
    if check_formatter_column(key, partitioned_by) is not None:
        compile_pattern(pattern)


# -- the partition of a scheduled run ----------------------------------------------------------


def refreshed_moment(schedule_time: datetime, freshness: Freshness) -> datetime:
    """`scheduleTime - freshness`, on the wall clock the cron ticks on (Python's arithmetic
    on a naive or an aware datetime alike). Flink subtracts milliseconds, which is the same
    thing except across a daylight-saving change: there the run after a 23-hour day would
    land on the day before it, and that day's partition would never be refreshed."""
    return schedule_time - freshness.to_timedelta()


def _schedule_moment(
    schedule_time: datetime | str | None, tz: tzinfo | None, table: str, first_column: str
) -> datetime:
    """The schedule time as a datetime in `tz`, refused in Flink's words when it is missing
    or does not read as 'yyyy-MM-dd HH:mm:ss'."""
    if schedule_time is None:
        raise InvalidInput(
            "The scheduler time must not be null during the periodic refresh of the "
            f"materialized table {table}.",
            field="scheduleTime",
        )
    if isinstance(schedule_time, str):
        try:
            schedule_time = parse_schedule_time(schedule_time)
        except InvalidInput:
            raise InvalidInput(
                f"Failed to parse a valid partition value for the field '{first_column}' in "
                f"materialized table {table} using the scheduler time '{schedule_time}' "
                f"based on the date format '{SCHEDULE_TIME_FORMAT}'.",
                field="scheduleTime",
            ) from None
    if tz is None:
        return schedule_time
    if schedule_time.tzinfo is None:
        return schedule_time.replace(tzinfo=tz)
    return schedule_time.astimezone(tz)


def scheduled_partition(
    schedule_time: datetime | str | None,
    freshness: Freshness,
    options: Mapping[str, str],
    *,
    tz: tzinfo | None = None,
    table: str = "",
) -> dict[str, str]:
    """{column: value} of the partition the run planned at `schedule_time` overwrites; empty
    for a table without date-formatter options (the whole table is refreshed). A text
    schedule time is read as Flink reads it ('yyyy-MM-dd HH:mm:ss'); `tz` is Flink's local
    time zone (a naive time is taken in it, an aware one converted to it); `table` names the
    table in Flink's messages."""
    formatters = formatter_columns(options)
    if not formatters:
        return {}
    moment = _schedule_moment(schedule_time, tz, table or "(unnamed)", next(iter(formatters)))
    moment = refreshed_moment(moment, freshness)
    return {column: format_moment(moment, pattern) for column, pattern in formatters.items()}


# -- a partition asked for by hand -------------------------------------------------------------

#: How a partition value must read for a column of each Iceberg type (others: any text).
_TYPED_VALUES = {
    "int": (r"[+-]?\d{1,10}", "a whole number"),
    "long": (r"[+-]?\d{1,19}", "a whole number"),
    "boolean": (r"(?i:true|false)", "true or false"),
    "date": (r"\d{4}-\d{2}-\d{2}", "a date like 2024-01-31"),
}
MAX_PARTITION_VALUE = 1_000


def check_partition_values(
    partition: Mapping[str, str],
    *,
    options: Mapping[str, str],
    column_types: Mapping[str, str],
    field: str = "partition",
) -> None:
    """Refuse a partition value (REFRESH PARTITION, the refresh endpoint's staticPartitions)
    that the column could not hold: one that does not match the column's date formatter
    exactly (Flink formats the scheduled partition with it, so a hand-given one must read
    the same), one that is not of the column's type, control characters, or a value longer
    than MAX_PARTITION_VALUE. Values reach Spark as literals either way; this keeps a run
    from being queued for a partition that cannot exist."""
    import re

    formatters = formatter_columns(options)
    for column, value in partition.items():
        if not isinstance(value, str):
            raise InvalidInput(f"The partition value of {column} must be text", field=field)
        if len(value) > MAX_PARTITION_VALUE or any(ord(c) < 32 or ord(c) == 127 for c in value):
            raise InvalidInput(
                f"The partition value of {column} must be at most {MAX_PARTITION_VALUE} "
                "characters without control characters",
                field=field,
            )
        pattern = formatters.get(column)
        if pattern is not None:
            example = format_moment(datetime(2024, 1, 31, 13, 45, 30), pattern)
            try:
                moment = datetime.strptime(value, to_strftime(pattern))
            except ValueError:
                moment = None
            if moment is None or format_moment(moment, pattern) != value:
                raise InvalidInput(
                    f"The partition value {value!r} of {column} does not match its "
                    f"date-formatter {pattern!r} (for example {example!r})",
                    field=field,
                )
            continue
        expected = _TYPED_VALUES.get(column_types.get(column, "string"))
        if expected is not None and not re.fullmatch(expected[0], value):
            raise InvalidInput(
                f"The partition value {value!r} of {column} is not {expected[1]} "
                f"(the column is {column_types[column]})",
                field=field,
            )
        if column_types.get(column) == "date":
            try:
                datetime.strptime(value, "%Y-%m-%d")
            except ValueError:
                raise InvalidInput(
                    f"The partition value {value!r} of {column} is not a valid date",
                    field=field,
                ) from None

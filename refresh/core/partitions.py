"""The partition a scheduled full refresh overwrites (FLIP-435, "partitioned table full
refresh"): for each option `partition.fields.<column>.date-formatter`, the value is
`scheduleTime - freshness` formatted with that pattern. With freshness 1 DAY, the run
scheduled at 2024-03-02 00:00 refreshes ds='2024-03-01'."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime

from catalog.core.errors import InvalidInput
from refresh.core.freshness import Freshness

OPTION = re.compile(r"^partition\.fields\.(?P<column>.+)\.date-formatter$")
# Java DateTimeFormatter letters we translate, longest first; anything else alphabetic
# outside quotes is refused rather than guessed.
_LETTERS = [("yyyy", "%Y"), ("MM", "%m"), ("dd", "%d"), ("HH", "%H"), ("mm", "%M"), ("ss", "%S")]


def formatter_columns(options: Mapping[str, str]) -> dict[str, str]:
    """{column: pattern} from the table's options."""
    found = {}
    for key, pattern in options.items():
        match = OPTION.match(key)
        if match:
            found[match.group("column")] = pattern
    return found


def to_strftime(pattern: str) -> str:
    """A Java date pattern ('yyyy-MM-dd', "yyyyMMdd'T'HH") as a strftime format."""
    out, i = [], 0
    while i < len(pattern):
        if pattern[i] == "'":
            end = pattern.find("'", i + 1)
            if end == -1:
                raise InvalidInput(f"Unclosed quote in date formatter {pattern!r}")
            out.append(pattern[i + 1 : end].replace("%", "%%") or "'")
            i = end + 1
            continue
        for letters, directive in _LETTERS:
            if pattern.startswith(letters, i):
                out.append(directive)
                i += len(letters)
                break
        else:
            if pattern[i].isalpha():
                raise InvalidInput(
                    f"Unsupported letter {pattern[i]!r} in date formatter {pattern!r}: use "
                    "yyyy, MM, dd, HH, mm, ss and quoted text"
                )
            out.append(pattern[i].replace("%", "%%"))
            i += 1
    return "".join(out)


def scheduled_partition(
    schedule_time: datetime, freshness: Freshness, options: Mapping[str, str]
) -> dict[str, str]:
    """{column: value} of the partition the run planned at `schedule_time` overwrites;
    empty for a table without date-formatter options (the whole table is refreshed)."""
    moment = schedule_time - freshness.to_timedelta()
    return {
        column: moment.strftime(to_strftime(pattern))
        for column, pattern in formatter_columns(options).items()
    }

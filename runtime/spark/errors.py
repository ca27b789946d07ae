"""Spark's and Iceberg's errors as the app reports them: an analysis or parse error as a
SqlError with line and column, a failed job's root cause, and whether a commit lost to a
concurrent one (and may be run again). The bottom of refresh.spark: it imports nothing of
the app but catalog.core's error types. Django-free."""

from __future__ import annotations

import re

from catalog.core.errors import SqlError


class SandboxRefused(SqlError):
    """A statement the sandbox (runtime.spark.sandbox, runtime.spark.policies) refuses: what
    it is, and where (a 400)."""


#: Spark's analysis errors end "...; line 1 pos 14;" followed by the plan; parse errors say
#: "(line 1, pos 7)" followed by the query with a marker.
_POSITION = re.compile(r"line (\d+),? pos (\d+)")


def spark_error(error: Exception, *, line_offset: int = 0, column_offset: int = 0) -> SqlError:
    """A Spark analysis or parse error as a SqlError: the first line of Spark's message,
    without the plan it appends, placed at Spark's line and column (1-based; Spark's `pos`
    is 0-based), shifted by where the query starts in the statement."""
    text = str(getattr(error, "desc", None) or error)
    message = next((line.strip() for line in text.splitlines() if line.strip()), "")
    message = re.sub(r";\s*line \d+ pos \d+;?.*$", "", message).strip()
    message = re.sub(r"\s*\(line \d+, pos \d+\)", "", message).strip()
    found = _POSITION.search(text)
    line = column = None
    if found:
        line = int(found.group(1)) + line_offset
        column = int(found.group(2)) + 1 + (column_offset if found.group(1) == "1" else 0)
    return SqlError(f"Spark cannot analyze the query: {message[:1000]}", line=line, column=column)


#: What Iceberg says when a commit lost to a concurrent one it cannot be rebased onto: a
#: compaction replaced the files a MERGE's delete files name, or a refresh replaced the
#: files a compaction rewrote. Whoever lost may run again.
COMMIT_CONFLICTS = (
    "Found conflicting",
    "Missing required files",
    "Cannot commit",
    "CommitFailed",
    "ValidationException",
)


def is_commit_conflict(error: BaseException) -> bool:
    return any(marker in str(error) for marker in COMMIT_CONFLICTS)


def failure_message(error: Exception) -> str:
    """What a failed Spark job says to its user: the root cause's message (an
    `assert_true` that did not hold, a division by zero under ANSI mode, a file gone),
    not py4j's wrapping and the JVM's stack trace."""
    java = getattr(error, "java_exception", None)
    if java is None:
        text = str(error).strip()
        return text.splitlines()[0] if text else type(error).__name__
    try:
        root = java
        while root.getCause() is not None and root.getCause() is not root:
            root = root.getCause()
        message = root.getMessage() or root.toString()
    except Exception:  # noqa: BLE001 - the JVM is gone: py4j's own words
        message = str(error)
    return message.strip().splitlines()[0][:2000] if message.strip() else type(error).__name__

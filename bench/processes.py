"""CPU and memory of a process with everything it started (its Spark JVM, gunicorn's
workers), from /proc: what the benches charge to each of the stack's processes."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (which may hold spaces)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _stats() -> Iterator[tuple[int, list[str]]]:
    """(pid, its stat fields) of every process alive now."""
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := _stat(int(entry))) is not None:
            yield int(entry), fields


def _cpu_ticks(fields: list[str]) -> int:
    """User + system CPU of one process, in clock ticks."""
    return int(fields[11]) + int(fields[12])


def tree(pid: int) -> list[int]:
    """`pid` and all its descendants alive now."""
    children: dict[int, list[int]] = {}
    for member, fields in _stats():
        children.setdefault(int(fields[1]), []).append(member)
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        pending.extend(children.get(current, []))
    return found


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and all its descendants."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for member in tree(pid):
        if (fields := _stat(member)) is not None:
            total += _cpu_ticks(fields) / ticks
    return total


def group_cpu_seconds(pgid: int) -> float:
    """User + system CPU the processes of process group `pgid` alive now have used so far (a
    server started in a session of its own, with all its workers)."""
    ticks = sum(_cpu_ticks(fields) for _, fields in _stats() if int(fields[2]) == pgid)
    return ticks / os.sysconf("SC_CLK_TCK")


def rss_bytes(pid: int) -> int:
    """Resident memory of a process and all its descendants."""
    page = os.sysconf("SC_PAGE_SIZE")
    total = 0
    for member in tree(pid):
        if (fields := _stat(member)) is not None:
            total += int(fields[21]) * page
    return total

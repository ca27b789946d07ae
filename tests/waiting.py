"""Waiting for an event in a test: ask for the condition until it holds, within a generous
bound, so that a loaded machine (a 2-core CI) makes a test slower, never red. A fixed sleep
followed by an assert, or a tight bound on how long something took, does the opposite."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

#: The longest a test waits for an event: only a broken app takes this long, since every
#: wait returns as soon as its condition holds.
PATIENCE = 120.0


def eventually(
    condition: Callable[[], T], *, what: str, timeout: float = PATIENCE, every: float = 0.05
) -> T:
    """`condition()`'s first true value, asked every `every` seconds; fails naming `what`
    when `timeout` seconds pass without one."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"Timed out after {timeout:g}s waiting for {what}")
        time.sleep(every)

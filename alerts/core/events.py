"""Which notification a new observation of a table gives, from the last state notified to a
subscription about it: one event per change of state, none per failing tick.

Three topics are followed apart for each (subscription, table): its refreshes (OK, FAILED,
SUSPENDED, LATE), its maintenance runs (OK, FAILED) and its verifications (OK, DIFFERS)."""

from __future__ import annotations

from enum import StrEnum


class Event(StrEnum):
    FAILED = "FAILED"
    SUSPENDED = "SUSPENDED"
    LATE = "LATE"
    RECOVERED = "RECOVERED"
    MAINTENANCE_FAILED = "MAINTENANCE_FAILED"
    VERIFICATION_DIFFERS = "VERIFICATION_DIFFERS"
    TEST = "TEST"


class Topic(StrEnum):
    REFRESH = "refresh"
    MAINTENANCE = "maintenance"
    VERIFICATION = "verification"


class Seen(StrEnum):
    """What was observed of a table."""

    RUN_FAILED = "RUN_FAILED"
    SUSPENDED = "SUSPENDED"  # suspended itself after repeated failures
    RUN_SUCCEEDED = "RUN_SUCCEEDED"  # a refresh succeeded, or found nothing to do
    LATE = "LATE"  # lag over the freshness for longer than the grace
    ON_TIME = "ON_TIME"
    MAINTENANCE_FAILED = "MAINTENANCE_FAILED"
    MAINTENANCE_SUCCEEDED = "MAINTENANCE_SUCCEEDED"
    DIFFERS = "DIFFERS"
    EXACT = "EXACT"


OK = "OK"

TOPIC_OF = {
    Seen.RUN_FAILED: Topic.REFRESH,
    Seen.SUSPENDED: Topic.REFRESH,
    Seen.RUN_SUCCEEDED: Topic.REFRESH,
    Seen.LATE: Topic.REFRESH,
    Seen.ON_TIME: Topic.REFRESH,
    Seen.MAINTENANCE_FAILED: Topic.MAINTENANCE,
    Seen.MAINTENANCE_SUCCEEDED: Topic.MAINTENANCE,
    Seen.DIFFERS: Topic.VERIFICATION,
    Seen.EXACT: Topic.VERIFICATION,
}


def step(last: str, seen: Seen) -> tuple[str, Event | None]:
    """The state after `seen`, given the `last` state notified (OK when none), and the event
    to send, if any."""
    if seen is Seen.RUN_FAILED:
        # Failing while late is news; failing again, or while suspended, is not.
        return (Event.FAILED.value, Event.FAILED) if last in (OK, "LATE") else (last, None)
    if seen is Seen.SUSPENDED:
        return (last, None) if last == "SUSPENDED" else ("SUSPENDED", Event.SUSPENDED)
    if seen is Seen.RUN_SUCCEEDED:
        return (OK, None) if last == OK else (OK, Event.RECOVERED)
    if seen is Seen.LATE:
        # A failing table falls behind too: its failure said so already.
        return ("LATE", Event.LATE) if last == OK else (last, None)
    if seen is Seen.ON_TIME:
        # Only lateness ends by being on time; a failure ends with a successful run.
        return (OK, Event.RECOVERED) if last == "LATE" else (last, None)
    if seen is Seen.MAINTENANCE_FAILED:
        return ("FAILED", Event.MAINTENANCE_FAILED) if last == OK else (last, None)
    if seen is Seen.DIFFERS:
        return ("DIFFERS", Event.VERIFICATION_DIFFERS) if last == OK else (last, None)
    # MAINTENANCE_SUCCEEDED, EXACT: back to OK without a message of its own.
    return OK, None

"""A streaming host among the others: its registration (a StreamHost row), its heartbeat on
a thread of its own renewing its leases, its clean leave, and each pass's share of the
active continuous tables (refresh.stream_hosts.plan_for): the queries of tables lost or
above the share stopped and released, free or expired ones claimed up to it."""

from __future__ import annotations

import contextlib
import logging
import threading
import time

from django.db import close_old_connections, connection

from refresh import stream_hosts
from refresh.models import MaterializedTable, StreamHost
from refresh.spark import stream_queries
from refresh.streams.state import HostState
from refresh.streams.stops import stop, stopped

logger = logging.getLogger(__name__)

#: How long after another host's lease ends the next pass looks (the database's clock and
#: this process's timer need not tick together to the millisecond).
EXPIRY_MARGIN_SECONDS = 0.05


def pause(state: HostState) -> float:
    """Until the next pass: the poll interval, or less when another host's lease ends
    sooner (a dead host's tables are claimed as its leases end; issue 21 asks for them
    to run elsewhere within the lease time plus one trigger)."""
    if state.next_expiry is None:
        return state.poll_seconds
    ends_in = state.next_expiry - time.monotonic()
    return max(0.0, min(state.poll_seconds, ends_in + EXPIRY_MARGIN_SECONDS))


def join(state: HostState) -> StreamHost:
    """Register this process as a streaming host and start its heartbeat thread."""
    if state.host is None:
        state.host = stream_hosts.register(state.host_name)
        state.beating = threading.Thread(
            target=beat_forever, args=(state,), name="stream-host-heartbeat", daemon=True
        )
        state.beating.start()
    return state.host


def leave(state: HostState) -> None:
    """A clean stop (streams already stopped): the leases end now, so the other hosts
    take the tables at their next pass rather than after the lease time."""
    if state.host is None:
        return
    try:
        stream_hosts.leave(state.host)
    except Exception:  # noqa: BLE001 - the leases then simply expire
        logger.exception("Leaving as streaming host %s", state.host)


def beat_forever(state: HostState) -> None:
    """Renew this host's leases every third of the lease time, on a thread of its own:
    a long load or rebuild in the loop never lets them lapse."""
    assert state.host is not None
    last_sweep = 0.0
    try:
        while not state.stopping.wait(stream_hosts.lease_seconds() / 3):
            close_old_connections()
            try:
                stream_hosts.beat(state.host)
                if time.monotonic() - last_sweep > 60:
                    stream_hosts.forget_dead()
                    last_sweep = time.monotonic()
            except Exception:  # noqa: BLE001 - a missed beat; the leases run on meanwhile
                logger.exception("Heartbeat of streaming host %s failed", state.host)
    finally:
        # This thread's database connection is its own; it ends with the thread.
        connection.close()


def assign(state: HostState, host: StreamHost, desired: dict[int, MaterializedTable]) -> set[int]:
    """Settle this pass's leases; returns the tables this host holds afterwards.

    A running query whose lease another host took (this one was paused or cut off
    longer than the lease) stops at once: its micro-batches could no longer commit
    anyway. Tables above the fair share, or no longer active, stop between
    micro-batches and are released; then free or expired ones are claimed up to the
    share."""
    plan = stream_hosts.plan_for(host, desired)
    for mt_id in [m for m in state.running if m not in plan.keep and m not in plan.release]:
        running = state.running.pop(mt_id)
        if not MaterializedTable.objects.filter(pk=mt_id).exists():
            # Dropped (its lease went with its row): its checkpoints go too.
            stop(running)
            stopped(mt_id, running)
            continue
        logger.warning("Lost the lease of table %s to another host; stopping", mt_id)
        with contextlib.suppress(Exception):
            running.query.stop()
    # Stopped together, each between its micro-batches: a table suspended, dropped or
    # switched to FULL within the usual minute; a surplus one within a third of the
    # lease (a busy query whose batches run back to back is stopped then anyway; its
    # next holder replays the batch cut short, which finds its own commit if it made one).
    giving_up = {m: state.running.pop(m) for m in plan.release if m in state.running}
    for ending, timeout in (
        ([m for m in giving_up if m not in desired], 60.0),
        ([m for m in giving_up if m in desired], stream_hosts.lease_seconds() / 3),
    ):
        try:
            stream_queries.stop_all_between_batches(
                [giving_up[m].query for m in ending], timeout=timeout
            )
        except Exception:  # noqa: BLE001 - a query that fails to stop is gone anyway
            logger.exception("Stopping streams %s", sorted(ending))
    for mt_id in plan.release:
        if mt_id in giving_up and mt_id not in desired:
            stopped(mt_id, giving_up[mt_id])
        if mt_id in desired:
            logger.info("Releasing table %s (above this host's share %s)", mt_id, plan.share)
        stream_hosts.release(host, mt_id)
    held = set(plan.keep)
    for mt_id in plan.candidates:
        if len(held) >= plan.share:
            break
        if stream_hosts.claim(host, mt_id):
            logger.info("Claimed table %s", mt_id)
            held.add(mt_id)
    return held

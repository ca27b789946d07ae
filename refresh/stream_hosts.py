"""Streaming hosts and their leases on continuous tables: any number of `manage.py
run_streams` processes, on one machine or several, share the active continuous tables
through the database, and each table's query runs on exactly one of them at a time.

- A host is a `StreamHost` row; it beats every `STREAM_LEASE_SECONDS / 3` and is live while
  its last beat is younger than `STREAM_LEASE_SECONDS`.
- A table's lease is three columns of its row: `stream_host`, `stream_host_since`,
  `stream_lease_until`. Every change of them is a conditional UPDATE (claim: WHERE the
  holder is none, or the lease has expired, or it is the claimant; renew and release:
  WHERE the holder is the host), so two hosts never hold one table, on SQLite and
  PostgreSQL alike. Times are the database's clock (`Now()`), so hosts on machines whose
  clocks disagree still agree on when a lease ends.
- Fair share: a host holds at most ceil(active tables / live hosts); a host above it
  releases the surplus (its streams stopped between micro-batches first, checkpoints kept)
  and a newcomer claims them.
- A holder that stops beating (SIGKILL, a pause, a partition) keeps its tables until their
  leases end; then any live host claims them and resumes their streams from their
  checkpoints. A micro-batch commits only if its host still holds the table, renewing the
  lease just before (`renew`), and the catalog refuses a micro-batch commit stamped by a
  host that no longer holds the table (`check_commit`, the kernel's commit guard): a host
  that comes back after its tables were taken over writes nothing more to them."""

from __future__ import annotations

import math
import os
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import BooleanField, DateTimeField, ExpressionWrapper, Q
from django.db.models.functions import Now

from refresh.core.freshness import RefreshMode
from refresh.models import MaterializedTable, StreamHost

#: The snapshot-summary entry a micro-batch's commit carries: the token of the host that
#: wrote it, which must hold the table's lease when the catalog swaps the pointer.
HOST_PROPERTY = "lakeview.stream-host"


def lease_seconds() -> float:
    return float(settings.STREAM_LEASE_SECONDS)


def _in(seconds: float) -> ExpressionWrapper:
    """The database's now plus `seconds` (negative: minus)."""
    return ExpressionWrapper(Now() + timedelta(seconds=seconds), output_field=DateTimeField())


def default_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


# -- hosts ---------------------------------------------------------------------------------


def register(name: str | None = None) -> StreamHost:
    """A new host (its first beat now)."""
    host = StreamHost.objects.create(name=name or default_name())
    StreamHost.objects.filter(pk=host.pk).update(started_at=Now(), heartbeat_at=Now())
    host.refresh_from_db()
    return host


def beat(host: StreamHost) -> set[int]:
    """The host's heartbeat: it is alive, and every lease it holds is renewed for
    `STREAM_LEASE_SECONDS`. A lease that expired but that no other host claimed is still
    the host's (nobody else wrote the table meanwhile). Returns the tables it holds."""
    with transaction.atomic():
        StreamHost.objects.filter(pk=host.pk).update(heartbeat_at=Now())
        held = MaterializedTable.objects.filter(stream_host=host)
        held.update(stream_lease_until=_in(lease_seconds()))
        return set(held.values_list("pk", flat=True))


def leave(host: StreamHost) -> None:
    """A host that stops cleanly (its streams stopped first): its leases end now, and the
    others take its tables at their next pass instead of after the lease time."""
    with transaction.atomic():
        MaterializedTable.objects.filter(stream_host=host).update(
            stream_host=None, stream_host_since=None, stream_lease_until=None
        )
        StreamHost.objects.filter(pk=host.pk).delete()


def live_hosts() -> int:
    return StreamHost.objects.filter(heartbeat_at__gt=_in(-lease_seconds())).count()


def streams_served() -> bool:
    """Whether the active continuous tables have somewhere to run: there are none, or a
    streaming host is live (readiness, webapp/health.py)."""
    active = MaterializedTable.objects.filter(
        refresh_mode=RefreshMode.CONTINUOUS, state=MaterializedTable.State.ACTIVATED
    )
    return not active.exists() or live_hosts() > 0


def forget_dead(*, after_leases: int = 10) -> int:
    """Delete hosts silent for `after_leases` lease times (their leases ended long ago;
    deleting them frees the tables they still name). Returns how many."""
    dead = StreamHost.objects.filter(heartbeat_at__lt=_in(-after_leases * lease_seconds()))
    return dead.delete()[1].get(StreamHost._meta.label, 0)


# -- leases --------------------------------------------------------------------------------


def claim(host: StreamHost, mt_id: int) -> bool:
    """Take (or keep) table `mt_id`'s lease: only if nobody holds it, its lease expired, or
    `host` holds it already. Whether `host` holds it now."""
    until = _in(lease_seconds())
    mine = MaterializedTable.objects.filter(pk=mt_id, stream_host=host)
    if mine.update(stream_lease_until=until):
        return True
    free = Q(stream_host__isnull=True) | Q(stream_lease_until__isnull=True)
    expired = Q(stream_lease_until__lt=Now())
    taken = MaterializedTable.objects.filter(free | expired, pk=mt_id).update(
        stream_host=host, stream_host_since=Now(), stream_lease_until=until
    )
    return taken == 1


def release(host: StreamHost, mt_id: int) -> bool:
    """Give table `mt_id` up (its stream stopped first); nothing if `host` no longer holds
    it. Whether it did."""
    return bool(
        MaterializedTable.objects.filter(pk=mt_id, stream_host=host).update(
            stream_host=None, stream_host_since=None, stream_lease_until=None
        )
    )


def renew(host: StreamHost, mt_id: int) -> bool:
    """Renew table `mt_id`'s lease if `host` still holds it (expired or not: while no other
    host claimed it, nobody else wrote the table). Asked just before each micro-batch
    commits: the commit then has a whole lease time to land in, however late the last
    heartbeat was. Whether `host` holds it."""
    return bool(
        MaterializedTable.objects.filter(pk=mt_id, stream_host=host).update(
            stream_lease_until=_in(lease_seconds())
        )
    )


def next_expiry(host: StreamHost, active: Iterable[int]) -> float | None:
    """Seconds (the database's clock) until the first lease another host holds on one of
    `active` ends, or None. A holder that beats keeps its leases at least two thirds of the
    lease time ahead, so this is short only when the holder stopped beating: the host then
    looks again as the lease ends rather than at its next pass, and a dead host's tables
    move about half a pass sooner."""
    ends = (
        MaterializedTable.objects.filter(pk__in=list(active), stream_lease_until__gt=Now())
        .exclude(stream_host=host)
        .annotate(now=Now())
        .values_list("stream_lease_until", "now")
    )
    return min(((until - now).total_seconds() for until, now in ends), default=None)


def holds(host_id: int, mt_id: int, *, margin: float | None = None) -> bool:
    """Whether host `host_id` holds table `mt_id` with at least `margin` seconds of its
    lease left (a third of the lease time by default: a commit decided now lands well
    before anyone else may claim the table, even if the host is paused after asking)."""
    if margin is None:
        margin = lease_seconds() / 3
    return MaterializedTable.objects.filter(
        pk=mt_id, stream_host_id=host_id, stream_lease_until__gt=_in(margin)
    ).exists()


def fair_share(active: int, live: int) -> int:
    """The most tables one host takes: ceil(active / live)."""
    return math.ceil(active / max(live, 1)) if active else 0


@dataclass
class Assignment:
    """What one host does in a pass: tables to give up (not active any more, or above its
    fair share), tables to keep, and tables it may try to claim (in this order, until it
    holds `share`)."""

    share: int
    release: list[int] = field(default_factory=list)
    keep: list[int] = field(default_factory=list)
    candidates: list[int] = field(default_factory=list)


def assign(
    *, active: Iterable[int], held: Mapping[int, Any], live: int, free: Iterable[int]
) -> Assignment:
    """Pure rule: the host holds `held` ({table id: since}), the tables in `active` should
    run, `live` hosts share them, and `free` are active tables nobody holds or whose lease
    expired. Surplus goes newest-claimed first, so long-held tables stay put."""
    active = sorted(set(active))
    share = fair_share(len(active), live)
    plan = Assignment(share=share)
    mine = [mt_id for mt_id in held if mt_id in set(active)]
    plan.release = [mt_id for mt_id in held if mt_id not in set(active)]
    # Oldest first; a missing "since" (never in practice) counts as oldest.
    mine.sort(key=lambda mt_id: (held[mt_id] is not None, held[mt_id], mt_id))
    plan.keep, surplus = mine[:share], mine[share:]
    plan.release += surplus
    plan.candidates = [mt_id for mt_id in sorted(set(free)) if mt_id not in held]
    return plan


def plan_for(host: StreamHost, active: Iterable[int]) -> Assignment:
    """`assign` over the database as it is now."""
    active = list(active)
    held = dict(
        MaterializedTable.objects.filter(stream_host=host).values_list("pk", "stream_host_since")
    )
    free = MaterializedTable.objects.filter(
        Q(stream_host__isnull=True)
        | Q(stream_lease_until__isnull=True)
        | Q(stream_lease_until__lt=Now()),
        pk__in=active,
    ).values_list("pk", flat=True)
    return assign(active=active, held=held, live=live_hosts(), free=list(free))


# -- the catalog's commit guard ------------------------------------------------------------


def check_commit(obj: Any, metadata: Any, base: Any) -> None:
    """The kernel's commit guard (registered in refresh/apps.py): a table commit whose new
    snapshots say they were written by a streaming host (`HOST_PROPERTY`) swaps only while
    that host holds the table's lease; otherwise a CommitConflict (409; the Spark writer
    fails the micro-batch). Runs inside the swap's transaction, the table's row locked, so
    a takeover commits either before it (refused) or after it (the new host's first
    micro-batch then finds this one's commit and skips it)."""
    from catalog.core.errors import CommitConflict

    if base is None:
        return
    old = {s.snapshot_id for s in getattr(base, "snapshots", None) or []}
    tokens = {
        (s.summary or {}).get(HOST_PROPERTY)
        for s in getattr(metadata, "snapshots", None) or []
        if s.snapshot_id not in old
    } - {None}
    if not tokens:
        return
    # The row locked: a takeover (an UPDATE of it) waits for this commit, or this waits
    # for the takeover and reads its holder.
    leases = list(
        MaterializedTable.objects.select_for_update()
        .filter(table_id=obj.pk)
        .order_by()
        .annotate(
            live=ExpressionWrapper(Q(stream_lease_until__gt=Now()), output_field=BooleanField())
        )
        .values_list("stream_host_id", "live")
    )
    if not leases:
        # Not a materialized table: no host streams into it, and an engine's commit is
        # stored as sent, whatever its summary says (never stricter than the engines).
        return
    holder_ids = [host_id for host_id, live in leases if live]
    current = {
        str(token)
        for token in StreamHost.objects.filter(pk__in=holder_ids).values_list("token", flat=True)
    }
    if not tokens <= current:
        raise CommitConflict(
            f"Commit failed: the streaming host that wrote this micro-batch no longer holds "
            f"table {obj}'s lease (another host runs its stream now)"
        )

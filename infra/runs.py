"""A run: one piece of background work a worker does for someone (a Spark job of the
catalog, a refresh of a materialized table, a maintenance action), as NetBox's Job is for
its background work. `Run` holds what every kind of run has (its state, when it was queued,
started and finished, the worker that holds it and its heartbeat, who asked for it, who
asked it to stop, its error); each app's model adds only what is its own.

The functions below are a run's lifecycle, the same for every kind: QUEUED -> RUNNING by one
worker (`claim`, a conditional update: a redelivered message or a second worker finds the run
taken), kept alive (`beat`), asked to stop (`request_cancel`, `cancel_asked`), handed back to
the queue (`release`) or to another worker (`hand_on`), and ended once (`finish`); silent
workers' runs are found by `abandoned`. Each is one statement, so one transaction, and each
says whether it changed the row: the caller decides what that means for its own rows (a
table's lock, a history entry, a signal) in its own transaction around it."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

logger = logging.getLogger(__name__)


class Run(models.Model):
    """The fields every kind of run has. A model that names one of them differently keeps
    its column with `db_column`; one with more states declares its own `State` and `state`."""

    class State(models.TextChoices):
        QUEUED = "QUEUED"
        RUNNING = "RUNNING"
        SUCCEEDED = "SUCCEEDED"
        FAILED = "FAILED"
        CANCELLED = "CANCELLED"

    ACTIVE: tuple[str, ...] = (State.QUEUED, State.RUNNING)
    FINISHED: tuple[str, ...] = (State.SUCCEEDED, State.FAILED, State.CANCELLED)

    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    queued_at = models.DateTimeField(default=timezone.now, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    #: Who runs it ("host:pid:thread") and when it last said so; a silent worker's run is
    #: failed (`abandoned`).
    worker = models.TextField(blank=True, default="")
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    #: A stop asked while the run was RUNNING (`request_cancel`): its worker stops the run's
    #: Spark jobs at its next look (`cancel_asked`) and ends it CANCELLED.
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    cancel_requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    #: Why it failed or was cancelled, in words ("" when it succeeded).
    error = models.TextField(blank=True, default="")

    class Meta:
        abstract = True

    @property
    def finished(self) -> bool:
        return self.state not in self.ACTIVE

    @property
    def duration_seconds(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()


def _rows(model: type[Run], pk: int) -> models.QuerySet[Any]:
    return model._default_manager.filter(pk=pk)


def claim(model: type[Run], *, pk: int, worker: str) -> bool:
    """QUEUED -> RUNNING for `worker`, started and beating now; False when the run is not
    QUEUED (taken by another worker, finished, or gone)."""
    now = timezone.now()
    taken = (
        _rows(model, pk)
        .filter(state=Run.State.QUEUED)
        .update(state=Run.State.RUNNING, started_at=now, heartbeat_at=now, worker=worker)
    )
    return taken == 1


def release(model: type[Run], *, pk: int) -> bool:
    """RUNNING -> QUEUED, as if never claimed: the worker that claimed it leaves it to
    another (or to itself, later). False when the run is not RUNNING."""
    return (
        _rows(model, pk)
        .filter(state=Run.State.RUNNING)
        .update(state=Run.State.QUEUED, worker="", started_at=None, heartbeat_at=None)
        == 1
    )


def beat(model: type[Run], *, pk: int) -> None:
    """The running run's worker is alive now."""
    _rows(model, pk).filter(state=Run.State.RUNNING).update(heartbeat_at=timezone.now())


def request_cancel(model: type[Run], *, pk: int, by: Any = None) -> bool:
    """Ask the RUNNING run to stop (`by`: the user who asks, or None). False when it is not
    running or was asked before (the first asker stays)."""
    user = by if getattr(by, "pk", None) else None
    asked = (
        _rows(model, pk)
        .filter(state=Run.State.RUNNING, cancel_requested_at__isnull=True)
        .update(cancel_requested_at=timezone.now(), cancel_requested_by=user)
    )
    return asked == 1


def cancel_asked(model: type[Run], *, pk: int) -> bool:
    """Whether someone asked the run to stop (`request_cancel`)."""
    return _rows(model, pk).filter(cancel_requested_at__isnull=False).exists()


def cancelled_by(model: type[Run], *, pk: int) -> str | None:
    """The user name of who asked the run to stop, if anyone (and still a user)."""
    return _rows(model, pk).values_list("cancel_requested_by__username", flat=True).first()


def finish(model: type[Run], *, pk: int, state: str, **fields: Any) -> bool:
    """An active run (QUEUED or RUNNING) -> `state`, finished now, with the model's own
    `fields` (its error, its figures). False when it had already ended: a run ends once."""
    done = (
        _rows(model, pk)
        .filter(state__in=model.ACTIVE)
        .update(state=state, finished_at=timezone.now(), **fields)
    )
    return done == 1


def queued(model: type[Run], *, pk: int) -> bool:
    return _rows(model, pk).filter(state=Run.State.QUEUED).exists()


def hand_on(model: type[Run], *, pk: int, send: Callable[[], object], what: str) -> bool:
    """Give the QUEUED run to another worker (`send()` puts its message back on the queue);
    False when it is no longer QUEUED (the claim says what became of it) or the broker
    cannot be reached (this worker runs it itself)."""
    if not queued(model, pk=pk):
        return False
    try:
        send()
    except Exception:  # noqa: BLE001 - the broker is down: the caller runs it here instead
        logger.warning("%s could not be handed on; running it here", what)
        return False
    return True


def abandoned(model: type[Run], *, silent_for: timedelta, now: datetime | None = None) -> Any:
    """The RUNNING runs whose worker has not beaten for `silent_for` (it was killed)."""
    cutoff = (now or timezone.now()) - silent_for
    return model._default_manager.filter(state=Run.State.RUNNING, heartbeat_at__lt=cutoff)

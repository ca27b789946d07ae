"""History: who did what to which object, when, and how it ended.

Every write records one `CatalogEvent`: on success inside the transaction that made the
change (so a rolled-back change leaves no success behind), on failure after it (so the
failure stays although the change rolled back). Events point at objects by identity, the
UUID their metadata carries, and keep the name they had at the time for display.

A table written every few seconds (a continuous materialized table's micro-batches) makes
thousands of commit events a day: successful commits older than
HISTORY_FOLD_COMMITS_AFTER_SECONDS are folded per object, actor, action and hour into one
event with their count (`fold_commits`, celery-beat's "fold-commit-events"). Failures,
conflicts and every other action stay as they were."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import models, transaction
from django.db.models import Count
from django.db.models.functions import TruncHour
from django.utils import timezone

from catalog.core.errors import CatalogError, CommitConflict, NotFound
from catalog.models import CatalogEvent, CatalogObject

MESSAGE_LIMIT = 2000
#: Actions that repeat without telling anything new one by one: a writer's commits, and an
#: attached table following its writer's files. Creates, drops, renames, registrations,
#: grants and the like are never folded.
FOLDED_ACTIONS = ("commit_table", "commit_view", "follow_attached_table")
HOUR = timedelta(hours=1)


def record(
    *,
    actor: Any,
    action: str,
    object_type: str,
    object_name: str,
    object_uuid: Any = None,
    metadata_location: str = "",
    result: str = CatalogEvent.Result.OK,
    message: str = "",
) -> CatalogEvent:
    return CatalogEvent.objects.create(
        actor=actor if getattr(actor, "pk", None) else None,
        action=action,
        object_type=object_type,
        object_uuid=object_uuid,
        object_name=object_name,
        metadata_location=metadata_location or "",
        result=result,
        message=message[:MESSAGE_LIMIT],
    )


def record_change(
    obj: CatalogObject, *, actor: Any, action: str, metadata_location: str = "", message: str = ""
) -> CatalogEvent:
    """A change to `obj` that succeeded."""
    return record(
        actor=actor,
        action=action,
        object_type=obj.kind,
        object_name=str(obj),
        object_uuid=obj.uuid,
        metadata_location=metadata_location,
        message=message,
    )


def record_failure(
    error: CatalogError,
    *,
    actor: Any,
    action: str,
    object_type: str,
    object_name: str,
    object_uuid: Any = None,
) -> None:
    """A refused or conflicting attempt. Must run outside the transaction the attempt used,
    or it would roll back with it. Asking for an object that does not exist is not recorded:
    there is nothing whose history it belongs to, and engines probe names all the time."""
    if isinstance(error, NotFound):
        return
    record(
        actor=actor,
        action=action,
        object_type=object_type,
        object_name=object_name,
        object_uuid=object_uuid,
        result=(
            CatalogEvent.Result.CONFLICT
            if isinstance(error, CommitConflict)
            else CatalogEvent.Result.FAILED
        ),
        message=error.message,
    )


@contextmanager
def failures_recorded(
    *, actor: Any, action: str, object_type: str, object_name: str, object_uuid: Any = None
) -> Iterator[None]:
    """Record a `CatalogError` raised inside (see `record_failure`), then let it go on."""
    try:
        yield
    except CatalogError as error:
        record_failure(
            error,
            actor=actor,
            action=action,
            object_type=object_type,
            object_name=object_name,
            object_uuid=object_uuid,
        )
        raise


# -- folding -------------------------------------------------------------------------------


class _Raced(Exception):
    """Another process folded the group meanwhile: this transaction rolls back."""


#: Per process and kind of row: the moment from which the next periodic pass reads (see
#: `fold_per_hour`'s `resume`).
_resume_from: dict[str, datetime] = {}


def fold_per_hour(
    rows: models.QuerySet,
    *,
    at: str,
    before: datetime,
    keys: Sequence[str],
    count: str,
    earliest: Mapping[str, Sequence[str]],
    sums: Sequence[str] = (),
    summed_maps: Sequence[str] = (),
    resume: str | None = None,
) -> int:
    """Fold the `rows` whose `at` is before `before` into one row per value of `keys` and
    hour of `at`: the newest row of each group (by `at`, then id) stays, with `count` the
    sum of the group's counts, each field of `sums` the group's sum (unset where no row set
    it), each field of `summed_maps` (a JSON object of numbers) the group's sums key by key,
    and each field of `earliest` the group's earliest value of its sources (the first
    of them that is set, row by row); the others are deleted. A folded
    row folds again with rows of its hour that pass `before` later, so each group ends as
    one row, and a second pass over the same rows changes nothing. Returns how many rows
    were deleted.

    Each group is one transaction; its rows are locked (PostgreSQL; SQLite's transactions
    take the write lock at BEGIN), and a group another process folded meanwhile is left
    to it. Used for catalog events here and for refresh runs (refresh.services).

    A periodic pass names itself with `resume`: it then reads only the rows from an hour
    before the hour its previous pass in this process stopped at (rows are stamped when
    they are written, so no older one appears later; the hour allows for clocks of other
    machines), not every folded row of months (a year of 100 tables' folded rows took
    5 s to read on SQLite). A process's first pass reads them all, folding any backlog."""
    model = rows.model
    rows = rows.filter(**{f"{at}__lt": before})
    if resume is not None and resume in _resume_from:
        rows = rows.filter(**{f"{at}__gte": _resume_from[resume]})
    groups = (
        rows.order_by()
        .annotate(fold_hour=TruncHour(at))
        .values(*keys, "fold_hour")
        .annotate(fold_rows=Count("id"))
        .filter(fold_rows__gt=1)
        .order_by("fold_hour")
    )
    sources = sorted(
        {field for fields in earliest.values() for field in fields} | set(sums) | set(summed_maps)
    )
    deleted = 0
    for group in groups:
        hour = group["fold_hour"]
        members = rows.filter(
            **{key: group[key] for key in keys},
            **{f"{at}__gte": hour, f"{at}__lt": hour + HOUR},
        )
        try:
            with transaction.atomic():
                found = list(
                    members.select_for_update()
                    .order_by(f"-{at}", "-id")
                    .values("id", count, *sources)
                )
                if len(found) < 2:
                    continue
                newest, others = found[0], found[1:]
                changes: dict[str, Any] = {count: sum(row[count] for row in found)}
                for field in sums:
                    values = [row[field] for row in found if row[field] is not None]
                    changes[field] = sum(values) if values else None
                for field in summed_maps:
                    total: dict[str, Any] = {}
                    for row in found:
                        for key, value in (row[field] or {}).items():
                            total[key] = total.get(key, 0) + value
                    changes[field] = total
                for field, candidates in earliest.items():
                    moments = [_first_set(row, candidates) for row in found]
                    changes[field] = min((m for m in moments if m is not None), default=None)
                gone = model.objects.filter(id__in=[row["id"] for row in others]).delete()[1]
                if gone.get(model._meta.label, 0) != len(others):
                    raise _Raced
                model.objects.filter(id=newest["id"]).update(**changes)
        except _Raced:
            continue
        deleted += len(others)
    if resume is not None:
        _resume_from[resume] = before.replace(minute=0, second=0, microsecond=0) - HOUR
    return deleted


def _first_set(row: Mapping[str, Any], fields: Sequence[str]) -> Any:
    return next((row[f] for f in fields if row[f] is not None), None)


def fold_commits(
    *, now: datetime | None = None, older_than: timedelta | None = None, periodic: bool = False
) -> int:
    """Fold successful commit events (FOLDED_ACTIONS) older than `older_than`
    (HISTORY_FOLD_COMMITS_AFTER_SECONDS) per object, actor, action and hour: one event
    with their count, the first one's time (`first_occurred_at`) and the newest one's time
    and metadata location. `periodic` (celery-beat's pass) reads only what the previous
    pass left (`fold_per_hour`). Returns how many events were folded away."""
    if older_than is None:
        older_than = timedelta(seconds=settings.HISTORY_FOLD_COMMITS_AFTER_SECONDS)
    rows = CatalogEvent.objects.filter(
        result=CatalogEvent.Result.OK, action__in=FOLDED_ACTIONS, object_uuid__isnull=False
    )
    return fold_per_hour(
        rows,
        at="occurred_at",
        before=(now or timezone.now()) - older_than,
        keys=("object_uuid", "object_type", "actor_id", "action"),
        count="count",
        earliest={"first_occurred_at": ("first_occurred_at", "occurred_at")},
        resume="commit events" if periodic else None,
    )

"""History: who did what to which object, when, and how it ended.

Every write records one `CatalogEvent`: on success inside the transaction that made the
change (so a rolled-back change leaves no success behind), on failure after it (so the
failure stays although the change rolled back). Events point at objects by identity, the
UUID their metadata carries, and keep the name they had at the time for display."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from catalog.core.errors import CatalogError, CommitConflict, NotFound
from catalog.models import CatalogEvent, CatalogObject

MESSAGE_LIMIT = 2000


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

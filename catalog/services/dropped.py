"""Bringing back a dropped table or view, as Snowflake's UNDROP and Lakekeeper's soft
deletion do. Iceberg's drop (without purge) forgets the object and keeps its files, and the
drop's history event names the metadata file it pointed at; restoring registers that file
again, through the one commit path (kernel.commit_one, as register does), under its old
name or a new one. A purged object's files are gone: it cannot come back."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from catalog import history, selectors
from catalog.core.errors import AlreadyExists, NotFound
from catalog.models import CatalogObject
from catalog.services.sql_views import register_view
from catalog.services.tables import register_table


def restore_dropped(
    *, namespace: str, uuid: str, name: str | None = None, actor: Any = None
) -> CatalogObject:
    """The table or view `uuid` dropped from `namespace`, in the catalog again at its
    metadata file of the drop, as `name` (default: its old name). NotFound when it was not
    dropped there (or was purged); AlreadyExists when it is in the catalog already, or the
    name is taken; the register's own checks for the file and its location."""
    event = next((e for e in selectors.dropped(namespace) if str(e.object_uuid) == uuid), None)
    if event is None:
        raise NotFound(
            f"No table or view with UUID {uuid[:40]} was dropped from {namespace} with its "
            "files kept (a purged one cannot come back, nor one whose files an engine "
            "deleted, as Spark's DROP TABLE ... PURGE does)",
            field="uuid",
        )
    holder = CatalogObject.objects.filter(uuid=event.object_uuid).select_related("namespace")
    if (live := holder.first()) is not None:
        raise AlreadyExists(f"{event.object_name} is in the catalog again, as {live}")
    old_name = event.object_name.rpartition(".")[2]
    register = register_table if event.action == "drop_table" else register_view
    with transaction.atomic():
        restored = register(
            namespace=namespace,
            name=old_name if name is None else name,
            metadata_location=event.metadata_location,
            actor=actor,
        )
        obj = restored.obj if hasattr(restored, "obj") else restored
        history.record_change(
            obj,
            actor=actor,
            action=f"restore_{obj.kind}",
            metadata_location=obj.metadata_location,
            message=f"dropped {event.occurred_at:%Y-%m-%d %H:%M:%S} UTC as {event.object_name}",
        )
    return obj

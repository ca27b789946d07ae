"""Tables attached read-only from folders that other systems write (Spark, Flink, another
catalog), read as ClickHouse's Iceberg engine reads them (`catalog.core.attached`).

An attached table is a catalog Table whose pointer names a metadata file in its folder and
whose `Attachment` row holds the options that chose it. It moves only by `follow`, which
looks for a newer metadata file on every read (a directory listing and one file read) and
moves the pointer through the kernel's one commit path when the writer wrote one. Every
other write (a REST commit, a drop with purge, a registration over it) is refused by the
kernel (`kernel.refuse_if_attached`); detaching forgets the table and touches no file."""

from __future__ import annotations

import contextlib
import uuid as uuid_module
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from pyiceberg.table.metadata import TableMetadata

from catalog.core import attached as attached_core
from catalog.core import metadata_io, tables
from catalog.core.errors import CatalogError, CommitConflict, InvalidInput, NotFound
from catalog.core.inputs import check_namespace_name
from catalog.models import Attachment, Table
from catalog.services import kernel
from catalog.services.kernel import TABLE, Change, Mode

NEWEST_BY = {choice.value for choice in Attachment.NewestBy}


@dataclass(frozen=True)
class Options:
    """How the metadata file is chosen (ClickHouse's settings, by our names)."""

    metadata_file_path: str = ""
    table_uuid: uuid_module.UUID | None = None
    newest_by: str = Attachment.NewestBy.VERSION


def check_location(location: Any) -> str:
    """The folder in its normal form, strictly inside one of ATTACH_LOCATIONS (resolved as
    the filesystem will read it, symbolic links included), else InvalidInput."""
    if not isinstance(location, str) or not location.strip():
        raise InvalidInput("A location is required: the table's folder", field="location")
    normal = metadata_io.normalize_location(location.strip())
    for root in settings.ATTACH_LOCATIONS:
        try:
            return metadata_io.ensure_within(normal, root, strictly=True)
        except InvalidInput:
            continue
    allowed = ", ".join(settings.ATTACH_LOCATIONS) or "none configured"
    raise InvalidInput(
        f"Location {location[:200]} is outside the locations tables may be attached from "
        f"({allowed}; set ATTACH_LOCATIONS to change them)",
        field="location",
    )


def check_options(
    *, metadata_file_path: Any = "", table_uuid: Any = None, newest_by: Any = "version"
) -> Options:
    path = metadata_file_path or ""
    if not isinstance(path, str):
        raise InvalidInput("The metadata file path must be text", field="metadata_file_path")
    if path:
        path = attached_core.relative_path(path)
    parsed = None
    if table_uuid not in (None, ""):
        try:
            parsed = uuid_module.UUID(str(table_uuid))
        except ValueError:
            raise InvalidInput(
                f"Table UUID {str(table_uuid)[:64]!r} is not a UUID", field="table_uuid"
            ) from None
    if newest_by not in NEWEST_BY:
        raise InvalidInput(
            f"newest_by must be one of {', '.join(sorted(NEWEST_BY))}", field="newest_by"
        )
    return Options(path, parsed, newest_by)


def _options_of(attachment: Attachment) -> Options:
    return Options(attachment.metadata_file_path, attachment.table_uuid, attachment.newest_by)


def _resolve(folder: str, options: Options) -> attached_core.Resolution:
    try:
        return attached_core.resolve_metadata_file(
            folder,
            metadata_file_path=options.metadata_file_path or None,
            table_uuid=str(options.table_uuid) if options.table_uuid else None,
            by_last_updated_ms=options.newest_by == Attachment.NewestBy.LAST_UPDATED,
        )
    except NotFound as error:
        # For an attach request the folder is the input that is wrong: a 400, not a 404.
        field = "metadata_file_path" if options.metadata_file_path else "location"
        raise InvalidInput(error.message, field=field) from None


def _as_attached(resolution: attached_core.Resolution, folder: str) -> TableMetadata:
    """The chosen file's metadata, with the attached folder as the row's location (the
    file itself is served to engines as it is on disk)."""
    metadata = tables.parse_table_metadata(resolution.document, source=resolution.location)
    return metadata.model_copy(update={"location": folder})


def attach_table(
    *,
    namespace: str,
    name: str,
    location: Any,
    metadata_file_path: Any = "",
    table_uuid: Any = None,
    newest_by: Any = "version",
    actor: Any = None,
) -> Table:
    """Attach the Iceberg table in `location` read-only under `namespace.name`."""
    namespace = check_namespace_name(namespace)
    folder = check_location(location)
    options = check_options(
        metadata_file_path=metadata_file_path, table_uuid=table_uuid, newest_by=newest_by
    )
    resolution = _resolve(folder, options)
    metadata = _as_attached(resolution, folder)

    def remember_options(table: Any) -> None:
        Attachment.objects.create(
            table_id=table.pk,
            metadata_file_path=options.metadata_file_path,
            table_uuid=options.table_uuid,
            newest_by=options.newest_by,
            checked_at=timezone.now(),
            reported=[list(item) for item in resolution.reported],
        )

    change = Change(
        TABLE,
        namespace,
        name.strip() if isinstance(name, str) else "",
        lambda base, obj: metadata,
        mode=Mode.CREATE,
        adopt_metadata_location=resolution.location,
        follows_files=True,
        after_swap=remember_options,
    )
    committed = kernel.commit_one(change, actor=actor, action="attach_table")
    return committed.obj


def follow(table: Table, *, actor: Any = None) -> Table:
    """Check whether the table's writer wrote a newer metadata file, and point at it.

    A table that is not attached is returned as it is. A look that fails (the folder gone,
    a broken file) never fails the read: the last file read stays the table, and the
    failure is kept on the attachment for the page to show."""
    attachment = Attachment.objects.filter(table_id=table.pk).first()
    if attachment is None:
        return table
    error, reported = "", attachment.reported
    unchanged = False
    try:
        resolution = _resolve(table.location, _options_of(attachment))
        reported = [list(item) for item in resolution.reported]
        document = resolution.document
        same = (
            resolution.location == table.metadata_location
            and str(document.get("table-uuid", "")).lower() == str(table.uuid)
            and int(document.get("last-updated-ms", -1)) == table.last_updated_ms
        )
        unchanged = same
        if not same:
            _move_pointer(table, resolution, actor=actor)
    except CatalogError as failure:
        error = failure.message
    Attachment.objects.filter(pk=attachment.pk).update(
        checked_at=timezone.now(), check_error=error[:2000], reported=reported
    )
    if not unchanged:
        # The row is read again only when the pointer may have moved (by this read or a
        # concurrent one): a read that found the row's own file has nothing new to load.
        table.refresh_from_db()
    return table


def _move_pointer(table: Table, resolution: attached_core.Resolution, *, actor: Any) -> None:
    """Point the table at the file found, once: readers that found the same new file at
    the same moment wait for each other on the attachment's row, and the ones after the
    first find the pointer already moved (no commit, no conflict recorded)."""
    metadata = _as_attached(resolution, table.location)
    with transaction.atomic():
        Attachment.objects.select_for_update().filter(table_id=table.pk).first()
        current = (
            Table.objects.filter(pk=table.pk)
            .values("metadata_location", "uuid", "last_updated_ms")
            .first()
        )
        if current is None or (
            current["metadata_location"] == resolution.location
            and str(current["uuid"]) == str(metadata.table_uuid)
            and current["last_updated_ms"] == metadata.last_updated_ms
        ):
            return  # detached meanwhile, or another reader moved it there already
        change = Change(
            TABLE,
            table.namespace.name,
            table.name,
            lambda base, obj: metadata,
            mode=Mode.UPDATE,
            adopt_metadata_location=resolution.location,
            follows_files=True,
        )
        # A writer outside this lock (none today) could still move it first.
        with contextlib.suppress(CommitConflict):
            kernel.commit_one(change, actor=actor, action="follow_attached_table")


def detach_table(*, namespace: str, name: str, actor: Any = None) -> None:
    """Forget an attached table; its folder and files are left exactly as they are."""
    table = TABLE.get(namespace, name)
    if not Attachment.objects.filter(table_id=table.pk).exists():
        raise InvalidInput(f"Table {table} is not attached; drop it instead", field="name")
    kernel.drop(TABLE, namespace=namespace, name=name, actor=actor, action="detach_table")

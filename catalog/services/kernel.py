"""The catalog kernel: the one commit path for every object the catalog holds.

Views and tables (and, next, materialized tables) differ only in how their metadata is read,
changed and written, which a `Kind` names. Everything else is here, once:

1. **Read the pointer.** The object's row names its current metadata file; the file is read
   and its UUID must be the one the row knows (else another writer replaced the object:
   a conflict).
2. **Apply the change** with the object's own rules (`Change.apply`), or adopt an existing
   file (registration).
3. **Write a new file**, never overwriting one (`NNNNN-<uuid>.metadata.json`).
4. **Swap the pointer** in one transaction with a conditional UPDATE that matches only the
   file read in step 1; a new object is an INSERT that the database's one-object-per-name
   constraint guards. Several changes (a multi-table transaction) swap in that same
   transaction: all pointers move, or none does.
5. **Sync the mirror** (`catalog.mirror`) and **record the event** (`catalog.history`) in
   that transaction.

A writer that loses the race gets `CommitConflict` (HTTP 409, Iceberg's
`CommitFailedException`) whatever the object, and the files it wrote are deleted, never
having been referenced. A failure of any kind is recorded in the history after the
transaction rolled back."""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from catalog import counts, history, mirror, selectors
from catalog.core import metadata_io, purge, tables, view_metadata
from catalog.core.errors import (
    AlreadyExists,
    CatalogError,
    CommitConflict,
    InvalidInput,
    NoSuchTable,
    NoSuchView,
    NotFound,
    ReadOnly,
)
from catalog.core.inputs import check_name, check_namespace_name, folder_name
from catalog.models import Attachment, CatalogObject, Namespace, Table, View
from infra import metrics

logger = logging.getLogger(__name__)

Metadata = Any  # ViewMetadata | TableMetadata: whatever the kind's rules read and write

#: Checks a table commit must pass inside its swap's transaction (the table's row locked):
#: `guard(obj, metadata, base)` raises a CatalogError (a CommitConflict, 409) to refuse it.
#: Other apps register theirs (refresh: a streaming host's micro-batch commits only while
#: it holds the table's lease); the catalog itself imports none of them.
COMMIT_GUARDS: list[Callable[[CatalogObject, Metadata, Metadata], None]] = []


@dataclass(frozen=True)
class Kind:
    """How one kind of object reads, writes and identifies its metadata."""

    name: str
    model: type[CatalogObject]
    read: Callable[[str], Metadata]
    write: Callable[[Metadata, str | None], str]
    uuid_of: Callable[[Metadata], str]
    not_found: type[NotFound]
    label: str

    def get(self, namespace: str, name: str) -> CatalogObject:
        obj = (
            self.model.objects.select_related("namespace")
            .filter(namespace__name=namespace, name=name)
            .first()
        )
        if obj is None:
            raise self.missing(namespace, name)
        return obj

    def missing(self, namespace: str, name: str) -> NotFound:
        """The error for an object that is not there (or that the asker may not see: the
        two answer alike)."""
        return self.not_found(f"{self.label} does not exist: {namespace}.{name}", field="name")


VIEW = Kind(
    name=CatalogObject.Kind.VIEW,
    model=View,
    read=view_metadata.read_view_metadata,
    write=view_metadata.write_view_metadata,
    uuid_of=lambda metadata: str(metadata.view_uuid),
    not_found=NoSuchView,
    label="View",
)
TABLE = Kind(
    name=CatalogObject.Kind.TABLE,
    model=Table,
    read=tables.read_table_metadata,
    write=tables.write_table_metadata,
    uuid_of=lambda metadata: str(metadata.table_uuid),
    not_found=NoSuchTable,
    label="Table",
)
KINDS = {kind.name: kind for kind in (VIEW, TABLE)}


class Mode(enum.Enum):
    CREATE = "create"  # the name must be free
    UPDATE = "update"  # the object must exist
    UPSERT = "upsert"  # either: `apply` gets no base when the object does not exist yet


@dataclass(frozen=True)
class Change:
    """One object's part of a commit.

    `apply(base, obj)` returns the new metadata from the current one (`base`, None for a
    new object), or `base` itself for no change; it raises a `CatalogError` to refuse."""

    kind: Kind
    namespace: str
    name: str
    apply: Callable[[Metadata | None, CatalogObject | None], Metadata]
    mode: Mode = Mode.UPDATE
    #: The pointer the writer last saw (a page's edit form): anything else is a conflict.
    expected_metadata_location: str | None = None
    #: Registration: point at this existing file instead of writing a new one.
    adopt_metadata_location: str | None = None
    #: An attached table following the files another system writes (the only change an
    #: attached table takes, `catalog.services.attached`): the file is adopted, never
    #: written; the old one is not read (its writer may have deleted it) and the UUID may
    #: change (a table recreated in place). Its location was checked by the caller against
    #: ATTACH_LOCATIONS instead of the warehouse.
    follows_files: bool = False
    #: Runs inside the swap's transaction with the object as committed (an attachment's
    #: own row is created there, so that the table and its options appear together).
    after_swap: Callable[[CatalogObject], None] | None = None


def creation(
    kind: Kind,
    *,
    namespace: str,
    name: str,
    location: str | None,
    build: Callable[[str], Metadata],
) -> Change:
    """The change that creates an object: `build(location)` makes its first metadata, at
    the location asked for (or the default one), once that location is checked."""
    namespace = check_namespace_name(namespace)
    name = (name or "").strip()

    def apply(base: None, obj: None) -> Metadata:
        return build(check_location(location or default_location(namespace, name)))

    return Change(kind, namespace, name, apply, mode=Mode.CREATE)


@dataclass(frozen=True)
class Committed:
    """The object after a commit, its metadata and the file that holds it."""

    obj: CatalogObject | None
    metadata: Metadata
    metadata_location: str | None


@dataclass
class _Prepared:
    change: Change
    obj: CatalogObject | None
    namespace: Namespace
    base_location: str | None
    metadata: Metadata
    new_location: str | None
    written: bool = False
    #: The metadata the change was applied to (None for a create or followed files).
    base: Metadata | None = None

    @property
    def unchanged(self) -> bool:
        return self.new_location is None


# -- names and locations -------------------------------------------------------------------


def default_location(namespace: str, name: str) -> str:
    """Where a new object's files go when its creator names no location."""
    levels = namespace.split(".")
    return metadata_io.join(settings.WAREHOUSE, *map(folder_name, [*levels, name]))


def check_location(location: str) -> str:
    """An object's location in its normal form, refused unless it is strictly inside the
    warehouse (the warehouse itself would make the object own every other's files)."""
    return metadata_io.ensure_within(location, settings.WAREHOUSE, strictly=True)


#: Table properties that send a writer's files elsewhere than `<location>/data` (Iceberg's
#: TableProperties). Refresh workers write through them, so they may name only folders
#: inside the table's own location, where its purge and this catalog's rules reach.
WRITE_PATH_PROPERTIES = (
    "write.data.path",
    "write.metadata.path",
    "write.object-storage.path",
    "write.folder-storage.path",
)


def check_write_paths(metadata: Any, base: Any) -> None:
    """Refuse a write-path property (new or changed) that leads outside the table's own
    location, as a location outside the warehouse is refused."""
    before = dict(base.properties) if base is not None else {}
    for key in WRITE_PATH_PROPERTIES:
        value = metadata.properties.get(key)
        if value is None or before.get(key) == value:
            continue
        try:
            metadata_io.ensure_within(value, metadata.location)
        except InvalidInput:
            raise InvalidInput(
                f"Table property {key} must name a folder inside the table's location "
                f"{metadata.location}, not {value[:200]}",
                field="properties",
            ) from None


def check_metadata_file(metadata_location: str | None) -> str:
    """A metadata file to register: named, and inside the warehouse."""
    if not metadata_location or not metadata_location.strip():
        raise InvalidInput("A metadata file location is required", field="metadata_location")
    try:
        return metadata_io.ensure_within(metadata_location, settings.WAREHOUSE, strictly=True)
    except InvalidInput as error:
        raise InvalidInput(error.message, field="metadata_location") from error


def read_adoptable(kind: Kind, path: str) -> Metadata:
    """A registered file's metadata, whose own location (where its next files go) must be
    inside the warehouse too."""
    metadata = kind.read(path)
    try:
        check_location(metadata.location)
    except InvalidInput as error:
        raise InvalidInput(
            f"The {kind.name}'s location is not usable: {error.message}", field="metadata_location"
        ) from error
    return metadata


def name_taken_error(namespace: Namespace, name: str, *, creating: Kind) -> AlreadyExists:
    """Iceberg's Java catalogs' words for a name another object holds."""
    qualified = f"{namespace.name}.{name}"
    holder = selectors.holder_of(namespace, name)
    holder_kind = KINDS.get(holder.kind) if holder is not None else creating
    if holder_kind is creating:
        message = f"{creating.label} already exists: {qualified}"
    else:
        message = f"{holder_kind.label} with same name already exists: {qualified}"
    return AlreadyExists(message, field="name")


def check_name_free(namespace: Namespace, name: str, *, creating: Kind) -> None:
    """Fail early, before any file is written; the database's constraint has the last word."""
    if selectors.holder_of(namespace, name) is not None:
        raise name_taken_error(namespace, name, creating=creating)


# -- the commit path -----------------------------------------------------------------------


def commit(changes: Sequence[Change], *, actor: Any, action: str) -> list[Committed]:
    """Apply every change and swap every pointer in one transaction, or none of them."""
    names = [(c.kind.name, c.namespace, c.name) for c in changes]
    if len(set(names)) != len(names):
        raise InvalidInput("A commit names the same object twice")
    prepared: list[_Prepared] = []
    swapped = False
    try:
        for change in changes:
            try:
                prepared.append(_prepare(change))
            except CatalogError as error:
                _record_failure(change, obj=None, actor=actor, action=action, error=error)
                _count_conflict(error, [change])
                raise
        if all(p.unchanged for p in prepared):
            return [Committed(p.obj, p.metadata, p.base_location) for p in prepared]
        try:
            # Rows are locked in one order whatever the request's, so that two transactions
            # over the same tables wait for each other instead of deadlocking.
            order = sorted(range(len(prepared)), key=lambda i: names[i])
            results: list[Committed | None] = [None] * len(prepared)
            with transaction.atomic():
                for i in order:
                    results[i] = _swap(prepared[i], actor=actor, action=action)
                swapped = True
                for p in prepared:
                    _delete_superseded_metadata_on_commit(p)
                _count_commits(prepared)
        except CatalogError as error:
            for p in prepared:
                _record_failure(p.change, obj=p.obj, actor=actor, action=action, error=error)
            _count_conflict(error, [p.change for p in prepared])
            raise
        return results
    finally:
        # Files of a commit that did not swap were never referenced. After the swap began
        # to commit (swapped is True), a failure means "state unknown": keep them.
        if not swapped:
            for p in prepared:
                if p.written:
                    metadata_io.delete_file(p.new_location)


def _count_commits(prepared: list[_Prepared]) -> None:
    """Each object whose pointer moved counts once the outermost transaction commits (a
    commit inside a caller's transaction that rolls back never happened)."""
    kinds = [p.change.kind.name for p in prepared if not p.unchanged]
    transaction.on_commit(lambda: [metrics.committed(kind) for kind in kinds])


def _count_conflict(error: CatalogError, changes: Sequence[Change]) -> None:
    if isinstance(error, CommitConflict):
        for change in changes:
            metrics.commit_conflict(change.kind.name)


def _delete_superseded_metadata_on_commit(p: _Prepared) -> None:
    """Once the swap is durable (the outermost transaction committed), delete the metadata
    files a table's metadata asks to drop (purge.superseded_metadata_files). Never for an
    attached table (its files are its writer's); a file that cannot be deleted is logged
    and left, never a failed commit."""
    if p.unchanged or p.change.kind is not TABLE or p.change.follows_files or p.base is None:
        return
    superseded = purge.superseded_metadata_files(
        p.base, p.base_location or "", p.metadata, p.new_location or ""
    )
    if not superseded:
        return

    def delete() -> None:
        for path in superseded:
            try:
                metadata_io.delete_file(path)
            except FileNotFoundError:
                pass
            except OSError as error:
                logger.warning("An old metadata file could not be deleted: %s (%s)", path, error)

    transaction.on_commit(delete)


def commit_one(change: Change, *, actor: Any, action: str) -> Committed:
    [committed] = commit([change], actor=actor, action=action)
    return committed


def _record_failure(
    change: Change, *, obj: CatalogObject | None, actor: Any, action: str, error: CatalogError
) -> None:
    if obj is None:
        obj = change.kind.model.objects.filter(
            namespace__name=change.namespace, name=change.name
        ).first()
    history.record_failure(
        error,
        actor=actor,
        action=action,
        object_type=change.kind.name,
        object_name=f"{change.namespace}.{change.name}",
        object_uuid=obj.uuid if obj is not None else None,
    )


def stage(change: Change) -> Committed:
    """What a create would make, without writing or recording anything (a staged create:
    the client creates the table later with a commit that asserts it does not exist)."""
    _namespace_for_new(change)
    metadata = change.apply(None, None)
    check_location(metadata.location)
    return Committed(None, metadata, None)


def _namespace_for_new(change: Change) -> Namespace:
    namespace = selectors.get_namespace(check_namespace_name(change.namespace))
    check_name(change.name)
    check_name_free(namespace, change.name, creating=change.kind)
    return namespace


def _prepare(change: Change) -> _Prepared:
    kind = change.kind
    obj = (
        kind.model.objects.select_related("namespace")
        .filter(namespace__name=change.namespace, name=change.name)
        .first()
    )
    if obj is None:
        if change.mode is Mode.UPDATE:
            raise kind.missing(change.namespace, change.name)
        namespace = _namespace_for_new(change)
        base, base_location = None, None
    else:
        if change.mode is Mode.CREATE:
            raise name_taken_error(obj.namespace, obj.name, creating=kind)
        namespace = obj.namespace
        base_location = obj.metadata_location
        if not change.follows_files:
            refuse_if_attached(obj, "commit to")
        if change.expected_metadata_location not in (None, base_location):
            raise CommitConflict(
                f"Commit failed: {kind.name} {obj} has changed since it was loaded; "
                "reload it and try again"
            )
        base = None if change.follows_files else kind.read(base_location)
        if base is not None and kind.uuid_of(base) != str(obj.uuid):
            raise CommitConflict(
                f"Commit failed: {kind.name} {obj} was replaced (UUID {obj.uuid} is now "
                f"{kind.uuid_of(base)}); reload it and try again"
            )
    metadata = change.apply(base, obj)
    if metadata is base and change.adopt_metadata_location is None:
        return _Prepared(change, obj, namespace, base_location, base, None)
    if kind is TABLE and not change.follows_files:
        check_write_paths(metadata, base)
    if change.follows_files:
        if obj is None or metadata.location != obj.location:
            _check_location_free(metadata.location, owner=obj, lock=False)
    elif base is None or metadata.location != base.location:
        check_location(metadata.location)
        # Checked again, under a lock, in the swap's transaction; here it fails before any
        # file (or folder) is written.
        _check_location_free(metadata.location, owner=obj, lock=False)
    prepared = _Prepared(change, obj, namespace, base_location, metadata, None, base=base)
    if change.adopt_metadata_location is not None:
        prepared.new_location = change.adopt_metadata_location
    else:
        prepared.new_location = kind.write(metadata, base_location)
        prepared.written = True
    return prepared


def _swap(p: _Prepared, *, actor: Any, action: str) -> Committed:
    """Inside the commit's transaction: move (or insert) the pointer, sync, record."""
    if p.unchanged:
        return Committed(p.obj, p.metadata, p.base_location)
    kind = p.change.kind
    user = actor if getattr(actor, "pk", None) else None
    if p.obj is None or p.metadata.location != p.obj.location:
        _check_location_free(p.metadata.location, owner=p.obj)
    if p.obj is None:
        try:
            # A savepoint: the loser of a race for the name rolls back only this insert.
            with transaction.atomic():
                obj = kind.model.objects.create(
                    kind=kind.name,
                    namespace=p.namespace,
                    name=p.change.name,
                    uuid=kind.uuid_of(p.metadata),
                    location=p.metadata.location,
                    metadata_location=p.new_location,
                    created_by=user,
                    updated_by=user,
                    owner=user,
                )
        except IntegrityError:
            if selectors.holder_of(p.namespace, p.change.name) is None:
                raise  # not the name: a bug, not a conflict
            raise name_taken_error(p.namespace, p.change.name, creating=kind) from None
    else:
        obj = p.obj
        moved = CatalogObject.objects.filter(pk=obj.pk, metadata_location=p.base_location).update(
            metadata_location=p.new_location, updated_at=timezone.now(), updated_by=user
        )
        if moved != 1:
            raise CommitConflict(
                f"Commit failed: {kind.name} {obj} was changed by another writer; "
                "reload it and try again"
            )
        obj.refresh_from_db()
        if kind is TABLE:
            for guard in COMMIT_GUARDS:
                guard(obj, p.metadata, p.base)
    if str(obj.uuid) != kind.uuid_of(p.metadata):
        # Only an attached table's followed files get here: a table recreated in place by
        # its writer, of which nothing carries over.
        mirror.rebuild(obj, p.metadata)
    else:
        mirror.sync(obj, p.metadata)
    if p.change.after_swap is not None:
        p.change.after_swap(obj)
    history.record_change(obj, actor=actor, action=action, metadata_location=p.new_location)
    return Committed(obj, p.metadata, p.new_location)


# -- renames and drops ---------------------------------------------------------------------


def move(
    kind: Kind,
    *,
    namespace: str,
    name: str,
    new_namespace: str,
    new_name: str,
    fields: tuple[str, str],
    actor: Any,
) -> CatalogObject:
    """Rename an object, possibly into another namespace where the name must be free. Only
    the row moves: locations and metadata files stay as they are, and so does its history,
    which follows its UUID. `fields` names the inputs (namespace, name) in errors."""
    obj = kind.get(namespace, name)
    with history.failures_recorded(
        actor=actor,
        action=f"rename_{kind.name}",
        object_type=kind.name,
        object_name=str(obj),
        object_uuid=obj.uuid,
    ):
        target = selectors.get_namespace(check_namespace_name(new_namespace, field=fields[0]))
        new_name = check_name(new_name, field=fields[1])
        if (target.pk, new_name) == (obj.namespace_id, obj.name):
            return obj
        check_name_free(target, new_name, creating=kind)
        old = str(obj)
        try:
            with transaction.atomic():
                renamed = CatalogObject.objects.filter(
                    pk=obj.pk, namespace_id=obj.namespace_id, name=obj.name
                ).update(
                    namespace=target,
                    name=new_name,
                    updated_at=timezone.now(),
                    updated_by=actor if getattr(actor, "pk", None) else None,
                )
                if renamed != 1:
                    raise CommitConflict(f"Rename failed: {old} was renamed by another writer")
                counts.moved(obj, source_id=obj.namespace_id, target_id=target.pk)
                obj.refresh_from_db()
                history.record_change(
                    obj, actor=actor, action=f"rename_{kind.name}", message=f"renamed from {old}"
                )
        except IntegrityError:
            if selectors.holder_of(target, new_name) is None:
                raise  # not the name: a bug, not a conflict
            raise name_taken_error(target, new_name, creating=kind) from None
    return obj


def drop(kind: Kind, *, namespace: str, name: str, actor: Any, action: str) -> CatalogObject:
    """Forget the object (its files stay); returns the row as it was."""
    obj = kind.get(namespace, name)
    with transaction.atomic():
        history.record_change(
            obj, actor=actor, action=action, metadata_location=obj.metadata_location
        )
        obj.delete()
    return obj


def refuse_if_attached(obj: CatalogObject, what: str) -> None:
    """Attached tables are read-only: their files belong to the system that writes them."""
    if obj.kind != CatalogObject.Kind.TABLE:
        return
    if Attachment.objects.filter(table_id=obj.pk).exists():
        raise ReadOnly(
            f"Cannot {what} table {obj}: it is attached read-only from {obj.location}, and "
            "its files belong to the system that writes them. Write with that system; "
            "detach it (drop without purge) to forget it here."
        )


#: The folder beside an object's location that belongs to it too: a continuous table's
#: streams keep their checkpoints in `<location>.checkpoints`, and its drop removes that
#: folder whole (refresh.streams). No other object may live in it, nor hold it.
SIDE_FOLDER = ".checkpoints"


def _check_location_free(location: str, *, owner: CatalogObject | None, lock: bool = True) -> None:
    """No two live objects own overlapping locations (the same folder, or one inside the
    other), counting each one's `SIDE_FOLDER`: a purge of one, or the drop of a continuous
    table, would delete the other's files. Checked inside the commit's transaction, with
    the writers that give out locations serialized."""
    if lock:
        _lock_for_locations()
    normal = metadata_io.normalize_location(location)
    ancestors = []
    path = normal
    while "/" in path.rstrip("/"):
        path = path.rsplit("/", 1)[0] or "/"
        ancestors.append(path)
    # Owners of a side folder that holds this location.
    side_owners = [
        folder.removesuffix(SIDE_FOLDER)
        for folder in [normal, *ancestors]
        if folder.endswith(SIDE_FOLDER) and len(folder) > len(SIDE_FOLDER)
    ]
    side = normal + SIDE_FOLDER
    candidates = (
        CatalogObject.objects.filter(
            Q(location=normal)
            | Q(location__startswith=normal + "/")
            | Q(location__in=[*ancestors, *side_owners])
            | Q(location=side)
            | Q(location__startswith=side + "/")
        )
        .exclude(pk=owner.pk if owner is not None else None)
        .select_related("namespace")
    )
    # The query narrows (SQLite's LIKE ignores case); the comparison decides.
    for other in candidates:
        if metadata_io.locations_overlap(normal, other.location):
            raise AlreadyExists(
                f"Location {location} overlaps the location of {other.kind} {other} "
                f"({other.location}); choose a location of its own",
                field="location",
            )
        if metadata_io.locations_overlap(normal, other.location + SIDE_FOLDER):
            raise AlreadyExists(
                f"Location {location} lies in {other.location}{SIDE_FOLDER}, the folder kept "
                f"beside {other.kind} {other} for its stream checkpoints; choose a location "
                "of its own",
                field="location",
            )
        if metadata_io.locations_overlap(side, other.location):
            raise AlreadyExists(
                f"Location {location} would keep its stream checkpoints in {side}, where "
                f"{other.kind} {other} lives ({other.location}); choose another location",
                field="location",
            )


def _lock_for_locations() -> None:
    """Serialize the writers that give objects new locations (creates, registrations and
    location changes), so that overlap checks see each other. SQLite already serializes
    writers; PostgreSQL takes a transaction-scoped advisory lock."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [0x1A4E])

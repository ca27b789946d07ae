"""Every write to the catalog goes through these functions.

Each takes keyword arguments, runs in one transaction, and raises a `CatalogError` that names
the problem. A change to a view follows the View Spec's optimistic protocol:

1. read the metadata file the pointer names (checking the view UUID did not change);
2. build the new metadata and write it to a new file;
3. in one transaction, swap the pointer with a conditional UPDATE that matches only the
   metadata location read in step 1, and update the mirror.

A writer whose UPDATE matched no row lost the race: it gets `CommitConflict`, and its file is
deleted, never having been referenced."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from django.conf import settings
from django.db import transaction
from pyiceberg.schema import Schema
from pyiceberg.types import NestedField
from pyiceberg.view.metadata import ViewMetadata

from catalog import mirror
from catalog.core import metadata_io
from catalog.core.errors import (
    AlreadyExists,
    CatalogError,
    CommitConflict,
    InvalidInput,
    InvalidMetadata,
    NamespaceNotEmpty,
    NoSuchNamespace,
    NoSuchVersion,
    NoSuchView,
)
from catalog.core.sql import (
    AnalyzedQuery,
    analyze_view_query,
    check_dialect,
    dependencies,
    parse_query,
    transpile_all,
)
from catalog.core.types import sqlglot_type_from_iceberg
from catalog.core.view_metadata import (
    ORIGINAL_DIALECT,
    REPLACE_DROP_DIALECT_ALLOWED,
    ViewMetadataBuilder,
    apply_updates_to_builder,
    apply_view_updates,
    check_view_requirements,
    current_version,
    make_version,
    read_view_metadata,
    representation_for,
    sql_representations,
    write_view_metadata,
)
from catalog.models import CatalogEvent, Namespace, Table, View, ViewSchemaField

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]{0,127}$")
ENGINE_NAME = "lakeview"


# -- names --------------------------------------------------------------------------------


def check_name(value: str, *, field: str = "name", what: str = "name") -> str:
    value = (value or "").strip()
    if not _NAME.match(value):
        raise InvalidInput(
            f"Invalid {what} {value!r}: use letters, digits, '_' or '-', starting with a "
            "letter or '_' (at most 128 characters)",
            field=field,
        )
    return value


def check_namespace_name(value: str | Sequence[str], *, field: str = "namespace") -> str:
    levels = value.split(".") if isinstance(value, str) else list(value)
    if not levels or levels == [""]:
        raise InvalidInput("A namespace name is required", field=field)
    return ".".join(check_name(level, field=field, what="namespace level") for level in levels)


def get_namespace(name: str) -> Namespace:
    try:
        return Namespace.objects.get(name=name)
    except Namespace.DoesNotExist:
        raise NoSuchNamespace(f"Namespace does not exist: {name}", field="namespace") from None


def get_view(namespace: str, name: str) -> View:
    try:
        return View.objects.select_related("namespace").get(namespace__name=namespace, name=name)
    except View.DoesNotExist:
        raise NoSuchView(f"View does not exist: {namespace}.{name}", field="name") from None


def ensure_name_free(namespace: Namespace, name: str, *, creating: str = "view") -> None:
    """Refuse a name a table or a view holds, in the words of Iceberg's Java catalogs."""
    table_taken = Table.objects.filter(namespace=namespace, name=name).exists()
    view_taken = View.objects.filter(namespace=namespace, name=name).exists()
    qualified = f"{namespace.name}.{name}"
    if table_taken:
        message = (
            f"Table already exists: {qualified}"
            if creating == "table"
            else f"Table with same name already exists: {qualified}"
        )
        raise AlreadyExists(message, field="name")
    if view_taken:
        message = (
            f"View already exists: {qualified}"
            if creating == "view"
            else f"View with same name already exists: {qualified}"
        )
        raise AlreadyExists(message, field="name")


def record_event(
    *,
    actor: Any,
    action: str,
    object_type: str,
    object_name: str,
    metadata_location: str = "",
    result: str = CatalogEvent.Result.OK,
    message: str = "",
) -> None:
    CatalogEvent.objects.create(
        actor=actor if getattr(actor, "pk", None) else None,
        action=action,
        object_type=object_type,
        object_name=object_name,
        metadata_location=metadata_location,
        result=result,
        message=message[:2000],
    )


# -- namespaces ---------------------------------------------------------------------------


@transaction.atomic
def create_namespace(
    *, name: str | Sequence[str], properties: Mapping[str, str] | None = None, actor: Any = None
) -> Namespace:
    name = check_namespace_name(name)
    if Namespace.objects.filter(name=name).exists():
        raise AlreadyExists(f"Namespace already exists: {name}", field="name")
    namespace = Namespace.objects.create(
        name=name, properties={str(k): str(v) for k, v in (properties or {}).items()}
    )
    record_event(actor=actor, action="create_namespace", object_type="namespace", object_name=name)
    return namespace


@transaction.atomic
def update_namespace_properties(
    *,
    name: str,
    updates: Mapping[str, str] | None = None,
    removals: Iterable[str] | None = None,
    actor: Any = None,
) -> Namespace:
    namespace = Namespace.objects.select_for_update().filter(name=name).first()
    if namespace is None:
        raise NoSuchNamespace(f"Namespace does not exist: {name}", field="namespace")
    updates = {str(k): str(v) for k, v in (updates or {}).items()}
    removals = list(removals or [])
    overlap = set(updates) & set(removals)
    if overlap:
        raise InvalidInput(
            f"Properties both set and removed: {', '.join(sorted(overlap))}", field="properties"
        )
    properties = dict(namespace.properties)
    properties.update(updates)
    for key in removals:
        properties.pop(key, None)
    namespace.properties = properties
    namespace.save(update_fields=["properties", "updated_at"])
    record_event(actor=actor, action="update_namespace", object_type="namespace", object_name=name)
    return namespace


@transaction.atomic
def drop_namespace(*, name: str, actor: Any = None) -> None:
    namespace = get_namespace(name)
    if namespace.views.exists() or namespace.tables.exists():
        raise NamespaceNotEmpty(f"Namespace {name} is not empty", field="namespace")
    if Namespace.objects.filter(name__startswith=f"{name}.").exists():
        raise NamespaceNotEmpty(f"Namespace {name} has child namespaces", field="namespace")
    namespace.delete()
    record_event(actor=actor, action="drop_namespace", object_type="namespace", object_name=name)


# -- view definitions ---------------------------------------------------------------------


def _schema_lookup(catalog_names: set[str]) -> Callable[[tuple[str, ...]], list | None]:
    """Columns of the tables and views this catalog holds, for typing queries."""

    def lookup(parts: tuple[str, ...]) -> list[tuple[str, str]] | None:
        catalog, *namespace, name = parts
        if catalog and catalog not in catalog_names:
            return None
        namespace_name = ".".join(namespace)
        table = Table.objects.filter(namespace__name=namespace_name, name=name).first()
        if table is not None:
            return [(f.name, sqlglot_type_from_iceberg(f.type)) for f in table.schema_fields()]
        view = View.objects.filter(namespace__name=namespace_name, name=name).first()
        if view is None:
            return None
        version = view.current_version()
        if version is None:
            return None
        return [
            (f.name, sqlglot_type_from_iceberg(f.type))
            for f in ViewSchemaField.objects.filter(view=view, schema_id=version.schema_id)
        ]

    return lookup


def _analyze(
    *,
    sql: str,
    dialect: str,
    namespace: Namespace,
    default_catalog: str | None,
    default_namespace: Sequence[str] | None,
    column_aliases: Sequence[str] | None,
    column_comments: Sequence[str | None] | None,
) -> tuple[AnalyzedQuery, list[str]]:
    dialect = check_dialect(dialect)
    default_ns = list(default_namespace) if default_namespace else namespace.levels
    check_namespace_name(default_ns, field="default_namespace")
    if default_catalog is not None:
        default_catalog = check_name(default_catalog, field="default_catalog", what="catalog")
    aliases = [
        check_name(a, field="column_aliases", what="column name") for a in column_aliases or []
    ]
    analyzed = analyze_view_query(
        sql,
        dialect=dialect,
        catalog=default_catalog,
        namespace=default_ns,
        lookup=_schema_lookup({"", settings.CATALOG_NAME, default_catalog or ""}),
        column_aliases=aliases or None,
        column_comments=column_comments,
    )
    return analyzed, default_ns


def _schema_of(analyzed: AnalyzedQuery) -> Schema:
    from pyiceberg.types import IcebergType

    fields = []
    for index, column in enumerate(analyzed.columns, start=1):
        field_type = IcebergType.model_validate(column.iceberg_type)
        fields.append(
            NestedField(
                field_id=index,
                name=column.name,
                field_type=field_type,
                required=False,
                doc=column.doc,
            )
        )
    return Schema(*fields, schema_id=0)


def _version_from(
    analyzed: AnalyzedQuery, *, default_catalog: str | None, default_namespace: list[str]
):
    representations = transpile_all(
        analyzed.sql, source=analyzed.dialect, targets=settings.VIEW_DIALECTS
    )
    return make_version(
        representations=representations,
        schema_id=-1,
        default_namespace=default_namespace,
        default_catalog=default_catalog,
        summary={"engine-name": ENGINE_NAME, ORIGINAL_DIALECT: analyzed.dialect},
    )


def _location_for(namespace: Namespace, name: str) -> str:
    return metadata_io.join(settings.WAREHOUSE, *namespace.levels, name)


# -- view changes -------------------------------------------------------------------------


def _load_metadata(view: View) -> ViewMetadata:
    metadata = read_view_metadata(view.metadata_location)
    if str(metadata.view_uuid) != str(view.view_uuid):
        raise InvalidMetadata(
            f"View UUID changed for {view}: expected {view.view_uuid}, found {metadata.view_uuid}"
        )
    return metadata


def _swap_pointer(
    *,
    view: View,
    expected_location: str,
    metadata: ViewMetadata,
    new_location: str,
    actor: Any,
    action: str,
    dependencies: list | None = None,
) -> View:
    """The compare-and-swap: in one transaction, move the pointer and update the mirror."""
    try:
        with transaction.atomic():
            changes: dict[str, Any] = {
                "metadata_location": new_location,
                "current_version_id": metadata.current_version_id,
                "properties": dict(metadata.properties),
                "location": metadata.location,
            }
            if dependencies is not None:
                changes["dependencies"] = dependencies
            if getattr(actor, "pk", None):
                changes["updated_by"] = actor
            swapped = View.objects.filter(pk=view.pk, metadata_location=expected_location).update(
                **changes
            )
            if swapped != 1:
                raise CommitConflict(
                    f"Commit failed: view {view} was changed by another writer; "
                    "reload it and try again"
                )
            view.refresh_from_db()
            mirror.sync_view(view, metadata)
            record_event(
                actor=actor,
                action=action,
                object_type="view",
                object_name=str(view),
                metadata_location=new_location,
            )
    except CommitConflict as error:
        metadata_io.delete_file(new_location)
        record_event(
            actor=actor,
            action=action,
            object_type="view",
            object_name=str(view),
            result=CatalogEvent.Result.CONFLICT,
            message=error.message,
        )
        raise
    return view


def _change_view(
    *,
    namespace: str,
    name: str,
    actor: Any,
    action: str,
    change: Callable[[ViewMetadataBuilder, View], None],
    expected_metadata_location: str | None = None,
) -> View:
    view = get_view(namespace, name)
    base_location = view.metadata_location
    if expected_metadata_location and expected_metadata_location != base_location:
        raise CommitConflict(
            f"Commit failed: view {view} has changed since it was loaded; reload it and try again"
        )
    builder = ViewMetadataBuilder(_load_metadata(view))
    change(builder, view)
    if not builder.changes:
        return view
    metadata = builder.build()
    # What the view reads follows its current version: replaced, rolled back or committed.
    dependencies = (
        dependencies_of_current(metadata)
        if metadata.current_version_id != view.current_version_id
        else None
    )
    new_location = write_view_metadata(metadata, base_location)
    return _swap_pointer(
        view=view,
        expected_location=base_location,
        metadata=metadata,
        new_location=new_location,
        actor=actor,
        action=action,
        dependencies=dependencies,
    )


def create_view(
    *,
    namespace: str,
    name: str,
    sql: str,
    dialect: str = "spark",
    column_aliases: Sequence[str] | None = None,
    column_comments: Sequence[str | None] | None = None,
    comment: str | None = None,
    properties: Mapping[str, str] | None = None,
    default_catalog: str | None = None,
    default_namespace: Sequence[str] | None = None,
    location: str | None = None,
    actor: Any = None,
) -> View:
    name = check_name(name)
    ns = get_namespace(check_namespace_name(namespace))
    ensure_name_free(ns, name)
    analyzed, default_ns = _analyze(
        sql=sql,
        dialect=dialect,
        namespace=ns,
        default_catalog=default_catalog,
        default_namespace=default_namespace,
        column_aliases=column_aliases,
        column_comments=column_comments,
    )
    location = metadata_io.ensure_within(location or _location_for(ns, name), settings.WAREHOUSE)
    props = {str(k): str(v) for k, v in (properties or {}).items()}
    # The other dialects are transpiled, not written by anyone: an engine that replaces the
    # view with its own dialect only (as Spark does) may drop them.
    props.setdefault(REPLACE_DROP_DIALECT_ALLOWED, "true")
    if comment:
        props["comment"] = comment
    builder = ViewMetadataBuilder.new(location=location)
    builder.set_properties(props)
    builder.add_schema(_schema_of(analyzed))
    builder.add_version(
        _version_from(analyzed, default_catalog=default_catalog, default_namespace=default_ns)
    )
    builder.set_current_version(-1)
    metadata = builder.build()
    metadata_location = write_view_metadata(metadata, None)
    try:
        return _insert_view(
            namespace=ns,
            name=name,
            metadata=metadata,
            metadata_location=metadata_location,
            dependencies=[list(d) for d in analyzed.dependencies],
            actor=actor,
            action="create_view",
        )
    except CatalogError:
        metadata_io.delete_file(metadata_location)
        raise


@transaction.atomic
def _insert_view(
    *,
    namespace: Namespace,
    name: str,
    metadata: ViewMetadata,
    metadata_location: str,
    dependencies: list,
    actor: Any,
    action: str,
) -> View:
    # Checked again inside the transaction: another writer may have taken the name meanwhile.
    ensure_name_free(namespace, name)
    user = actor if getattr(actor, "pk", None) else None
    view = View.objects.create(
        namespace=namespace,
        name=name,
        view_uuid=uuid.UUID(str(metadata.view_uuid)),
        location=metadata.location,
        metadata_location=metadata_location,
        current_version_id=metadata.current_version_id,
        properties=dict(metadata.properties),
        dependencies=dependencies,
        created_by=user,
        updated_by=user,
    )
    mirror.sync_view(view, metadata)
    record_event(
        actor=actor,
        action=action,
        object_type="view",
        object_name=str(view),
        metadata_location=metadata_location,
    )
    return view


def replace_view(
    *,
    namespace: str,
    name: str,
    sql: str,
    dialect: str = "spark",
    column_aliases: Sequence[str] | None = None,
    column_comments: Sequence[str | None] | None = None,
    comment: str | None = None,
    default_catalog: str | None = None,
    default_namespace: Sequence[str] | None = None,
    expected_metadata_location: str | None = None,
    actor: Any = None,
) -> View:
    """A new version from new SQL; an identical definition reuses the existing version id."""
    ns = get_namespace(namespace)
    analyzed, default_ns = _analyze(
        sql=sql,
        dialect=dialect,
        namespace=ns,
        default_catalog=default_catalog,
        default_namespace=default_namespace,
        column_aliases=column_aliases,
        column_comments=column_comments,
    )
    version = _version_from(analyzed, default_catalog=default_catalog, default_namespace=default_ns)

    def change(builder: ViewMetadataBuilder, view: View) -> None:
        if comment is not None:
            if comment:
                builder.set_properties({"comment": comment})
            elif "comment" in builder.properties:
                builder.remove_properties(["comment"])
        builder.add_schema(_schema_of(analyzed))
        builder.add_version(version)
        builder.set_current_version(-1)

    return _change_view(
        namespace=namespace,
        name=name,
        actor=actor,
        action="replace_view",
        change=change,
        expected_metadata_location=expected_metadata_location,
    )


def rollback_view(
    *,
    namespace: str,
    name: str,
    version_id: int,
    expected_metadata_location: str | None = None,
    actor: Any = None,
) -> View:
    """Make a retained version current again: a new version-log entry pointing at it."""

    def change(builder: ViewMetadataBuilder, view: View) -> None:
        if not any(v.version_id == version_id for v in builder.versions):
            raise NoSuchVersion(
                f"View {view} has no retained version {version_id}", field="version_id"
            )
        if version_id == builder.current_version_id:
            raise InvalidInput(
                f"Version {version_id} is already the current version of {view}",
                field="version_id",
            )
        builder.set_current_version(version_id)

    return _change_view(
        namespace=namespace,
        name=name,
        actor=actor,
        action="rollback_view",
        change=change,
        expected_metadata_location=expected_metadata_location,
    )


def update_view_properties(
    *,
    namespace: str,
    name: str,
    updates: Mapping[str, str] | None = None,
    removals: Iterable[str] | None = None,
    actor: Any = None,
) -> View:
    """Set and remove view properties in one commit (one new metadata file)."""
    updates = {str(k): str(v) for k, v in (updates or {}).items()}
    removals = list(removals or [])
    if not updates and not removals:
        raise InvalidInput("No properties given", field="properties")
    if any(not key.strip() for key in updates):
        raise InvalidInput("A property name must not be empty", field="properties")
    overlap = set(updates) & set(removals)
    if overlap:
        raise InvalidInput(
            f"Properties both set and removed: {', '.join(sorted(overlap))}", field="properties"
        )

    def change(builder: ViewMetadataBuilder, view: View) -> None:
        if updates:
            builder.set_properties(updates)
        if removals:
            builder.remove_properties(removals)

    return _change_view(
        namespace=namespace, name=name, actor=actor, action="update_view_properties", change=change
    )


def set_view_properties(
    *, namespace: str, name: str, updates: Mapping[str, str], actor: Any = None
) -> View:
    return update_view_properties(namespace=namespace, name=name, updates=updates, actor=actor)


def remove_view_properties(
    *, namespace: str, name: str, keys: Iterable[str], actor: Any = None
) -> View:
    return update_view_properties(namespace=namespace, name=name, removals=keys, actor=actor)


def add_view_representation(
    *, namespace: str, name: str, sql: str, dialect: str, actor: Any = None
) -> View:
    """A new version equal to the current one plus a representation for a new dialect."""
    dialect = check_dialect(dialect)
    parse_query(sql, dialect)

    def change(builder: ViewMetadataBuilder, view: View) -> None:
        current = next(v for v in builder.versions if v.version_id == builder.current_version_id)
        if representation_for(current, dialect) is not None:
            raise AlreadyExists(
                f"Version {current.version_id} of {view} already has a {dialect} representation",
                field="dialect",
            )
        sqls = {r.dialect: r.sql for r in sql_representations(current)}
        sqls[dialect] = sql.strip()
        builder.add_version(
            make_version(
                representations=sqls,
                schema_id=current.schema_id,
                default_namespace=current.default_namespace,
                default_catalog=current.default_catalog,
                summary={**current.summary, "engine-name": ENGINE_NAME},
            )
        )
        builder.set_current_version(-1)

    return _change_view(
        namespace=namespace, name=name, actor=actor, action="add_view_representation", change=change
    )


def move(
    obj: View | Table,
    *,
    kind: str,
    new_namespace: str,
    new_name: str,
    fields: tuple[str, str],
    actor: Any,
) -> View | Table:
    """Rename a view or a table, possibly into another namespace, where the name must be
    free. Only the pointer's row moves: locations and metadata files stay as they are.
    `fields` names the inputs (namespace, name) in errors."""
    target = get_namespace(check_namespace_name(new_namespace, field=fields[0]))
    new_name = check_name(new_name, field=fields[1])
    if (target.pk, new_name) == (obj.namespace_id, obj.name):
        return obj
    ensure_name_free(target, new_name, creating=kind)
    old = str(obj)
    obj.namespace = target
    obj.name = new_name
    obj.save(update_fields=["namespace", "name", "updated_at"])
    record_event(
        actor=actor,
        action=f"rename_{kind}",
        object_type=kind,
        object_name=str(obj),
        message=f"renamed from {old}",
    )
    return obj


@transaction.atomic
def rename_view(
    *, namespace: str, name: str, new_namespace: str, new_name: str, actor: Any = None
) -> View:
    return move(
        get_view(namespace, name),
        kind="view",
        new_namespace=new_namespace,
        new_name=new_name,
        fields=("new_namespace", "new_name"),
        actor=actor,
    )


@transaction.atomic
def drop_view(*, namespace: str, name: str, actor: Any = None) -> None:
    """Forget the view. Its metadata files stay, so it can be registered again."""
    view = get_view(namespace, name)
    record_event(
        actor=actor,
        action="drop_view",
        object_type="view",
        object_name=str(view),
        metadata_location=view.metadata_location,
    )
    view.delete()


def register_view(*, namespace: str, name: str, metadata_location: str, actor: Any = None) -> View:
    """Adopt an existing view metadata file (it must lie inside the warehouse)."""
    name = check_name(name)
    ns = get_namespace(check_namespace_name(namespace))
    ensure_name_free(ns, name)
    if not metadata_location or not metadata_location.strip():
        raise InvalidInput("A metadata file location is required", field="metadata_location")
    try:
        path = metadata_io.ensure_within(metadata_location, settings.WAREHOUSE)
    except InvalidInput as error:
        raise InvalidInput(error.message, field="metadata_location") from error
    metadata = read_view_metadata(path)
    try:
        # The view's own location is where its next metadata files go: it must be ours too.
        metadata_io.ensure_within(metadata.location, settings.WAREHOUSE)
    except InvalidInput as error:
        raise InvalidInput(
            f"The view's location is not usable: {error.message}", field="metadata_location"
        ) from error
    dependencies = dependencies_of_current(metadata)
    return _insert_view(
        namespace=ns,
        name=name,
        metadata=metadata,
        metadata_location=path,
        dependencies=dependencies,
        actor=actor,
        action="register_view",
    )


def dependencies_of_current(metadata: ViewMetadata) -> list[list[str]]:
    """What the current version's SQL reads, as [catalog, *namespace, name] lists."""
    version = current_version(metadata)
    representations = sql_representations(version)
    if not representations:
        return []
    first = representations[0]
    try:
        query = parse_query(first.sql, first.dialect.lower())
    except CatalogError:
        return []
    default = (version.default_catalog or "", *version.default_namespace)
    return [list(parts) for parts in dependencies(query, default)]


# -- the Iceberg REST protocol's view operations --------------------------------------------


def create_view_from_parts(
    *,
    namespace: str,
    name: str,
    schema: Mapping[str, Any],
    view_version: Mapping[str, Any],
    properties: Mapping[str, str] | None = None,
    location: str | None = None,
    actor: Any = None,
) -> View:
    """Create a view from an engine's own schema and version (REST CreateViewRequest)."""
    name = check_name(name)
    ns = get_namespace(check_namespace_name(namespace))
    ensure_name_free(ns, name)
    location = metadata_io.ensure_within(location or _location_for(ns, name), settings.WAREHOUSE)
    updates = [
        {"action": "set-properties", "updates": dict(properties or {})},
        {"action": "add-schema", "schema": dict(schema)},
        {"action": "add-view-version", "view-version": {**view_version, "schema-id": -1}},
        {"action": "set-current-view-version", "view-version-id": -1},
    ]
    metadata = apply_view_updates(None, updates, location=location)
    metadata_location = write_view_metadata(metadata, None)
    try:
        return _insert_view(
            namespace=ns,
            name=name,
            metadata=metadata,
            metadata_location=metadata_location,
            dependencies=dependencies_of_current(metadata),
            actor=actor,
            action="create_view",
        )
    except CatalogError:
        metadata_io.delete_file(metadata_location)
        raise


def commit_view(
    *,
    namespace: str,
    name: str,
    requirements: Sequence[Mapping[str, Any]],
    updates: Sequence[Mapping[str, Any]],
    actor: Any = None,
) -> View:
    """Apply a REST view commit: check the requirements, apply the updates, swap."""

    def change(builder: ViewMetadataBuilder, view: View) -> None:
        check_view_requirements(builder.base, requirements)
        apply_updates_to_builder(builder, updates)
        if builder.location != view.location:
            metadata_io.ensure_within(builder.location, settings.WAREHOUSE)

    return _change_view(
        namespace=namespace, name=name, actor=actor, action="commit_view", change=change
    )

"""Writes to Iceberg views (View Spec): create from SQL, replace, roll back, properties,
dialects, rename, drop, register, and the REST protocol's create and commit.

Each operation is a `kernel.Change` whose `apply` edits the metadata with
`ViewMetadataBuilder` (the View Spec's rules, in `catalog.core.view_metadata`); the kernel
reads the pointer, writes the new file, swaps, syncs the mirror and records the event."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from django.conf import settings
from pyiceberg.schema import Schema
from pyiceberg.types import IcebergType, NestedField
from pyiceberg.view.metadata import ViewMetadata, ViewVersion

from catalog import selectors
from catalog.core.errors import AlreadyExists, InvalidInput, NoSuchVersion
from catalog.core.inputs import check_name, check_namespace_name, check_property_changes
from catalog.core.sql import (
    AnalyzedQuery,
    analyze_view_query,
    check_dialect,
    parse_query,
    transpile_all,
)
from catalog.core.view_metadata import (
    ORIGINAL_DIALECT,
    REPLACE_DROP_DIALECT_ALLOWED,
    ViewMetadataBuilder,
    apply_updates_to_builder,
    apply_view_updates,
    check_view_requirements,
    make_version,
    representation_for,
    sql_representations,
)
from catalog.models import View
from catalog.services import kernel
from catalog.services.kernel import VIEW, Change, Mode

ENGINE_NAME = "lakeview"
#: Version summary keys of this catalog: the SQL as the user typed it (when the stored,
#: qualified SQL differs from it), so that an edit starts from their own text; and the
#: dialects whose SQL someone wrote by hand (comma-separated), which are not transpiled.
SQL_AS_WRITTEN = "lakeview.sql-as-written"
WRITTEN_DIALECTS = "lakeview.written-dialects"

#: Engines that derive a query's column types better than sqlglot can: each takes the query
#: in Spark's dialect and its default namespace levels, and returns the Iceberg schema (REST
#: JSON) of its result, or None when it cannot answer now. The refresh app registers its
#: workers' Spark analyzer here (refresh.apps); they are asked only when sqlglot had to
#: guess a type.
TYPE_DERIVERS: list[Callable[[str, Sequence[str]], dict | None]] = []


# -- definitions from SQL -------------------------------------------------------------------


def _analyze(
    *,
    sql: str,
    dialect: str,
    namespace: str,
    default_catalog: str | None,
    default_namespace: Sequence[str] | None,
    column_aliases: Sequence[str] | None,
    column_comments: Sequence[str | None] | None,
    allow_unknown_sources: bool = False,
) -> tuple[AnalyzedQuery, list[str]]:
    dialect = check_dialect(dialect)
    default_ns = list(default_namespace) if default_namespace else namespace.split(".")
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
        lookup=selectors.column_lookup({"", settings.CATALOG_NAME, default_catalog or ""}),
        column_aliases=aliases or None,
        column_comments=column_comments,
        allow_unknown_sources=allow_unknown_sources,
    )
    return analyzed, default_ns


def _schema_of(analyzed: AnalyzedQuery, default_ns: Sequence[str]) -> Schema:
    if any(column.type_guessed for column in analyzed.columns):
        derived = _derived_schema(analyzed, default_ns)
        if derived is not None:
            return derived
    fields = [
        NestedField(
            field_id=index,
            name=column.name,
            field_type=IcebergType.model_validate(column.iceberg_type),
            required=False,
            doc=column.doc,
        )
        for index, column in enumerate(analyzed.columns, start=1)
    ]
    return Schema(*fields, schema_id=0)


def _derived_schema(analyzed: AnalyzedQuery, default_ns: Sequence[str]) -> Schema | None:
    """The schema an engine's analyzer gives (exact and nested types), with the names and
    docs of the view's own analysis; None if no engine answered."""
    from pyiceberg.schema import assign_fresh_schema_ids

    spark_sql = transpile_all(analyzed.sql, source=analyzed.dialect, targets=["spark"])["spark"]
    for derive in TYPE_DERIVERS:
        document = derive(spark_sql, list(default_ns))
        if document is None or len(document["fields"]) != len(analyzed.columns):
            continue
        fields = [
            {**field, "name": column.name, "doc": column.doc, "required": False}
            for field, column in zip(document["fields"], analyzed.columns, strict=True)
        ]
        schema = Schema.model_validate({"type": "struct", "schema-id": 0, "fields": fields})
        return assign_fresh_schema_ids(schema)
    return None


def _definition(
    namespace: str,
    sql: str,
    dialect: str,
    column_aliases: Sequence[str] | None,
    column_comments: Sequence[str | None] | None,
    default_catalog: str | None,
    default_namespace: Sequence[str] | None,
    allow_unknown_sources: bool = False,
) -> tuple[Schema, ViewVersion]:
    """The schema and the version (SQL in every configured dialect) of a query."""
    analyzed, default_ns = _analyze(
        sql=sql,
        dialect=dialect,
        namespace=namespace,
        default_catalog=default_catalog,
        default_namespace=default_namespace,
        column_aliases=column_aliases,
        column_comments=column_comments,
        allow_unknown_sources=allow_unknown_sources,
    )
    version = make_version(
        representations=transpile_all(
            analyzed.sql, source=analyzed.dialect, targets=settings.VIEW_DIALECTS
        ),
        schema_id=-1,
        default_namespace=default_ns,
        default_catalog=default_catalog,
        summary={
            "engine-name": ENGINE_NAME,
            ORIGINAL_DIALECT: analyzed.dialect,
            **({SQL_AS_WRITTEN: sql.strip()} if sql.strip() != analyzed.sql else {}),
        },
    )
    return _schema_of(analyzed, default_ns), version


def _edit(
    *,
    namespace: str,
    name: str,
    actor: Any,
    action: str,
    edit: Callable[[ViewMetadataBuilder, View], None],
    expected_metadata_location: str | None = None,
) -> View:
    """A change to an existing view, made with the View Spec's builder."""

    def apply(base: ViewMetadata, view: View) -> ViewMetadata:
        builder = ViewMetadataBuilder(base)
        edit(builder, view)
        return builder.build() if builder.changes else base

    change = Change(
        VIEW,
        namespace,
        name,
        apply,
        expected_metadata_location=expected_metadata_location,
    )
    return kernel.commit_one(change, actor=actor, action=action).obj


# -- operations -----------------------------------------------------------------------------


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
    allow_unknown_sources: bool = False,
    actor: Any = None,
) -> View:
    """A new view from SQL. A table or view the catalog does not know is refused (line and
    column), unless `allow_unknown_sources`: a view made before its sources."""

    def build(target: str) -> ViewMetadata:
        # Built before the kernel's transaction opens (an engine asked for types may take
        # a moment), and inside its history: a refusal here is recorded like any.
        schema, version = _definition(
            namespace, sql, dialect, column_aliases, column_comments, default_catalog,
            default_namespace, allow_unknown_sources,
        )  # fmt: skip
        props, _ = check_property_changes(properties, None)
        # The other dialects are transpiled, not written by anyone: an engine that replaces
        # the view with its own dialect only (as Spark does) may drop them.
        props.setdefault(REPLACE_DROP_DIALECT_ALLOWED, "true")
        if comment:
            props["comment"] = comment
        builder = ViewMetadataBuilder.new(location=target)
        builder.set_properties(props)
        builder.add_schema(schema)
        builder.add_version(version)
        builder.set_current_version(-1)
        return builder.build()

    change = kernel.creation(VIEW, namespace=namespace, name=name, location=location, build=build)
    return kernel.commit_one(change, actor=actor, action="create_view").obj


def replace_view(
    *,
    namespace: str,
    name: str,
    expected_metadata_location: str | None = None,
    sql: str,
    comment: str | None = None,
    dialect: str = "spark",
    column_aliases: Sequence[str] | None = None,
    column_comments: Sequence[str | None] | None = None,
    default_catalog: str | None = None,
    default_namespace: Sequence[str] | None = None,
    allow_unknown_sources: bool = False,
    actor: Any = None,
) -> View:
    """A new version from new SQL; an identical definition reuses the existing version id.
    Unknown sources are refused as in `create_view`."""

    def edit(builder: ViewMetadataBuilder, view: View) -> None:
        schema, version = _definition(
            view.namespace.name, sql, dialect, column_aliases, column_comments, default_catalog,
            default_namespace, allow_unknown_sources,
        )  # fmt: skip
        if comment is not None:
            if comment:
                builder.set_properties({"comment": comment})
            elif "comment" in builder.properties:
                builder.remove_properties(["comment"])
        builder.add_schema(schema)
        builder.add_version(version)
        builder.set_current_version(-1)

    return _edit(
        namespace=namespace,
        name=name,
        actor=actor,
        action="replace_view",
        edit=edit,
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

    def edit(builder: ViewMetadataBuilder, view: View) -> None:
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

    return _edit(
        namespace=namespace,
        name=name,
        actor=actor,
        action="rollback_view",
        edit=edit,
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
    updates, removals = check_property_changes(updates, removals)
    if not updates and not removals:
        raise InvalidInput("No properties given", field="properties")

    def edit(builder: ViewMetadataBuilder, view: View) -> None:
        if updates:
            builder.set_properties(updates)
        if removals:
            builder.remove_properties(removals)

    return _edit(
        namespace=namespace, name=name, actor=actor, action="update_view_properties", edit=edit
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

    def edit(builder: ViewMetadataBuilder, view: View) -> None:
        new_dialect = check_dialect(dialect)
        parse_query(sql, new_dialect)
        current = next(v for v in builder.versions if v.version_id == builder.current_version_id)
        if representation_for(current, new_dialect) is not None:
            raise AlreadyExists(
                f"Version {current.version_id} of {view} already has a {new_dialect} "
                "representation",
                field="dialect",
            )
        sqls = {r.dialect: r.sql for r in sql_representations(current)}
        sqls[new_dialect] = sql.strip()
        builder.add_version(
            make_version(
                representations=sqls,
                schema_id=current.schema_id,
                default_namespace=current.default_namespace,
                default_catalog=current.default_catalog,
                summary={
                    **current.summary,
                    "engine-name": ENGINE_NAME,
                    WRITTEN_DIALECTS: ",".join(
                        [*split_dialects(current.summary.get(WRITTEN_DIALECTS)), new_dialect]
                    ),
                },
            )
        )
        builder.set_current_version(-1)

    return _edit(
        namespace=namespace, name=name, actor=actor, action="add_view_representation", edit=edit
    )


def split_dialects(text: str | None) -> list[str]:
    """The dialects of a comma-separated summary value."""
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def rename_view(
    *, namespace: str, name: str, new_namespace: str, new_name: str, actor: Any = None
) -> View:
    return kernel.move(
        VIEW,
        namespace=namespace,
        name=name,
        new_namespace=new_namespace,
        new_name=new_name,
        fields=("new_namespace", "new_name"),
        actor=actor,
    )


def drop_view(*, namespace: str, name: str, actor: Any = None) -> None:
    """Forget the view. Its metadata files stay, so it can be registered again."""
    kernel.drop(VIEW, namespace=namespace, name=name, actor=actor, action="drop_view")


def register_view(*, namespace: str, name: str, metadata_location: str, actor: Any = None) -> View:
    """Adopt an existing view metadata file (it must lie inside the warehouse)."""
    path = kernel.check_metadata_file(metadata_location)

    def apply(base: None, view: None) -> ViewMetadata:
        return kernel.read_adoptable(VIEW, path)

    change = Change(
        VIEW, namespace, (name or "").strip(), apply, mode=Mode.CREATE, adopt_metadata_location=path
    )
    return kernel.commit_one(change, actor=actor, action="register_view").obj


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

    def build(target: str) -> ViewMetadata:
        updates = [
            {"action": "set-properties", "updates": dict(properties or {})},
            {"action": "add-schema", "schema": dict(schema)},
            {"action": "add-view-version", "view-version": {**view_version, "schema-id": -1}},
            {"action": "set-current-view-version", "view-version-id": -1},
        ]
        return apply_view_updates(None, updates, location=target)

    change = kernel.creation(VIEW, namespace=namespace, name=name, location=location, build=build)
    return kernel.commit_one(change, actor=actor, action="create_view").obj


def commit_view(
    *,
    namespace: str,
    name: str,
    requirements: Sequence[Mapping[str, Any]],
    updates: Sequence[Mapping[str, Any]],
    actor: Any = None,
) -> View:
    """Apply a REST view commit: check the requirements, apply the updates, swap."""

    def edit(builder: ViewMetadataBuilder, view: View) -> None:
        check_view_requirements(builder.base, requirements)
        apply_updates_to_builder(builder, updates)

    return _edit(namespace=namespace, name=name, actor=actor, action="commit_view", edit=edit)

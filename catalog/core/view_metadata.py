"""Iceberg view metadata (View Spec, format-version 1): building, changing, validating.

pyiceberg models the metadata (`pyiceberg.view.metadata`, frozen pydantic models whose fields
follow the spec's names) but applies no view updates, so the rules for applying them live
here, following the semantics of Iceberg's Java `ViewMetadata.Builder`:

- an added schema or version equal to an existing one reuses that one's id;
- `-1` as a schema id or version id means "the last one added in this change";
- setting the current version appends a version-log entry, unless it is already current;
- `version.history.num-entries` (default 10) caps the versions kept; the version log keeps
  only the entries after the newest one whose version was expired.

Every service operation and every REST commit goes through `ViewMetadataBuilder`, so there is
one set of rules, and one place that refuses what engines cannot read: every added schema is
checked as Java's `Schema` checks it (`core.validation`), and the REST updates are read as
strictly as Java's parsers read them, malformed JSON being a 400, never a crash.

A version's SQL is not checked here: the engine that sent it parsed and analyzed it (Spark
reads namespaces called `inner` or `select` that sqlglot cannot), so it is stored as sent;
the mirror records when sqlglot cannot read it ("not transpiled"). The app's own create
paths parse and analyze their SQL before they get here (`services.sql_views`)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError
from pydantic_core import to_jsonable_python
from pyiceberg.schema import Schema
from pyiceberg.view.metadata import (
    SQLViewRepresentation,
    ViewHistoryEntry,
    ViewMetadata,
    ViewRepresentation,
    ViewVersion,
)

from catalog.core import metadata_io
from catalog.core.errors import (
    CommitConflict,
    InvalidInput,
    InvalidMetadata,
    ValidationFailed,
    describe_validation_error,
)
from catalog.core.validation import (
    JAVA_LONG_MAX,
    MALFORMED_INPUT_ERRORS,
    check_json_numbers,
    short,
    validate_number_ranges,
    validate_schema,
)

VERSION_HISTORY_SIZE = "version.history.num-entries"
DEFAULT_VERSION_HISTORY_SIZE = 10
REPLACE_DROP_DIALECT_ALLOWED = "replace.drop-dialect.allowed"
LAST_ADDED = -1
# Summary key naming the dialect the user wrote; the others were transpiled from it.
ORIGINAL_DIALECT = "lakeview.original-dialect"


def now_ms() -> int:
    return int(time.time() * 1000)


def sql_representations(version: ViewVersion) -> list[SQLViewRepresentation]:
    return [representation.root for representation in version.representations]


def representation_for(version: ViewVersion, dialect: str) -> SQLViewRepresentation | None:
    for representation in sql_representations(version):
        if representation.dialect.lower() == dialect.lower():
            return representation
    return None


def make_version(
    *,
    representations: Mapping[str, str],
    schema_id: int,
    default_namespace: Iterable[str],
    default_catalog: str | None = None,
    summary: Mapping[str, str] | None = None,
    timestamp_ms: int | None = None,
    version_id: int = LAST_ADDED,
) -> ViewVersion:
    """A version from {dialect: sql}; its id is assigned when it is added."""
    return ViewVersion(
        version_id=version_id,
        schema_id=schema_id,
        timestamp_ms=timestamp_ms if timestamp_ms is not None else now_ms(),
        summary=dict(summary or {}),
        representations=[
            ViewRepresentation(SQLViewRepresentation(type="sql", sql=sql, dialect=dialect))
            for dialect, sql in representations.items()
        ],
        default_catalog=default_catalog,
        default_namespace=list(default_namespace),
    )


def _same_schema(left: Schema, right: Schema) -> bool:
    return left.fields == right.fields and left.identifier_field_ids == right.identifier_field_ids


def _same_version(left: ViewVersion, right: ViewVersion) -> bool:
    """Equal but for id, timestamp and summary: such a version is the same definition."""
    return (
        left.schema_id == right.schema_id
        and left.default_catalog == right.default_catalog
        and list(left.default_namespace) == list(right.default_namespace)
        and sorted((r.dialect.lower(), r.sql) for r in sql_representations(left))
        == sorted((r.dialect.lower(), r.sql) for r in sql_representations(right))
    )


def _check_dialects(version: ViewVersion) -> None:
    seen: set[str] = set()
    if not version.representations:
        raise InvalidMetadata("Invalid view version: it has no representation")
    for representation in sql_representations(version):
        dialect = representation.dialect.lower()
        if dialect in seen:
            raise InvalidMetadata(
                "Invalid view version: Cannot add multiple queries for dialect "
                f"{short(dialect, 100)}"
            )
        seen.add(dialect)


class ViewMetadataBuilder:
    """Applies changes to a view's metadata and builds the next metadata.

    Start from `ViewMetadataBuilder.new(...)` for a create, or `ViewMetadataBuilder(base)` to
    change existing metadata. Nothing is written here: `build()` returns the new metadata."""

    def __init__(self, base: ViewMetadata, *, is_new: bool = False) -> None:
        self.base = None if is_new else base
        self.view_uuid = base.view_uuid
        self.location = base.location
        self.properties: dict[str, str] = dict(base.properties)
        self.schemas: list[Schema] = list(base.schemas)
        self.versions: list[ViewVersion] = list(base.versions)
        self.version_log: list[ViewHistoryEntry] = list(base.version_log)
        self.current_version_id = base.current_version_id
        self.last_added_schema_id: int | None = None
        self.last_added_version_id: int | None = None
        self.added_version_ids: set[int] = set()
        self.changes: list[str] = []

    @classmethod
    def new(cls, *, location: str, view_uuid: str | None = None) -> ViewMetadataBuilder:
        # A placeholder current version id that `build()` refuses unless one is set.
        empty = ViewMetadata.model_construct(
            view_uuid=view_uuid or str(uuid.uuid4()),
            format_version=1,
            location=location,
            schemas=[],
            current_version_id=LAST_ADDED,
            versions=[],
            version_log=[],
            properties={},
        )
        return cls(empty, is_new=True)

    # -- the changes; each mirrors one of the REST protocol's view updates ---------------

    def assign_uuid(self, value: str) -> None:
        try:
            uuid.UUID(value)
        except (ValueError, TypeError, AttributeError):
            raise InvalidInput(f"Invalid view UUID: {short(value, 100)}") from None
        if self.base is not None and value != self.view_uuid:
            raise CommitConflict(f"Cannot reassign view UUID: {self.view_uuid} -> {value}")
        self.view_uuid = value

    def upgrade_format_version(self, format_version: int) -> None:
        if format_version != 1:
            raise InvalidInput(f"Unsupported view format version: {format_version}")

    def set_location(self, location: str) -> None:
        self.location = location.rstrip("/")
        self.changes.append("set-location")

    def set_properties(self, updates: Mapping[str, str]) -> None:
        updates = {str(k): str(v) for k, v in updates.items()}
        # Setting a property to the value it has is no change: no new metadata file for it.
        if any(self.properties.get(k) != v for k, v in updates.items()):
            self.properties.update(updates)
            self.changes.append("set-properties")

    def remove_properties(self, removals: Iterable[str]) -> None:
        present = [key for key in removals if key in self.properties]
        for key in present:
            del self.properties[key]
        if present:
            self.changes.append("remove-properties")

    def add_schema(self, schema: Schema) -> int:
        """Add `schema` (or reuse an equal one); its id is assigned here, as Java's builder
        assigns it. A schema engines cannot read (duplicate field ids, ...) is refused."""
        new_id = max((s.schema_id for s in self.schemas), default=-1) + 1
        schema = schema.model_copy(update={"schema_id": new_id})
        validate_schema(schema, last_column_id=None, what="view schema")
        for existing in self.schemas:
            if _same_schema(existing, schema):
                self.last_added_schema_id = existing.schema_id
                return existing.schema_id
        self.schemas.append(schema)
        self.last_added_schema_id = new_id
        self.changes.append("add-schema")
        return new_id

    def add_version(self, version: ViewVersion) -> int:
        schema_id = version.schema_id
        if schema_id == LAST_ADDED:
            if self.last_added_schema_id is None:
                raise InvalidInput("Cannot set last added schema: no schema has been added")
            schema_id = self.last_added_schema_id
        if not any(s.schema_id == schema_id for s in self.schemas):
            raise InvalidInput(f"Cannot add version with unknown schema: {schema_id}")
        version = version.model_copy(update={"schema_id": schema_id})
        if not 0 <= version.timestamp_ms <= JAVA_LONG_MAX:
            raise ValidationFailed(f"Invalid view version: timestamp-ms {version.timestamp_ms}")
        _check_dialects(version)
        for existing in self.versions:
            if _same_version(existing, version):
                self.last_added_version_id = existing.version_id
                return existing.version_id
        new_id = max((v.version_id for v in self.versions), default=0) + 1
        self.versions.append(version.model_copy(update={"version_id": new_id}))
        self.added_version_ids.add(new_id)
        self.last_added_version_id = new_id
        self.changes.append("add-view-version")
        return new_id

    def set_current_version(self, version_id: int, *, timestamp_ms: int | None = None) -> None:
        if version_id == LAST_ADDED:
            if self.last_added_version_id is None:
                raise InvalidInput("Cannot set last version: no version has been added")
            version_id = self.last_added_version_id
        version = next((v for v in self.versions if v.version_id == version_id), None)
        if version is None:
            raise InvalidInput(f"Cannot set current version to unknown version: {version_id}")
        if version_id == self.current_version_id:
            return
        self._check_no_dialect_dropped(version)
        self.current_version_id = version_id
        # A version added in this change was made now; an older one is a rollback, logged now.
        when = version.timestamp_ms if version_id in self.added_version_ids else now_ms()
        self.version_log.append(
            ViewHistoryEntry(timestamp_ms=timestamp_ms or when, version_id=version_id)
        )
        self.changes.append("set-current-view-version")

    def _check_no_dialect_dropped(self, new_version: ViewVersion) -> None:
        if self.base is None or self.properties.get(REPLACE_DROP_DIALECT_ALLOWED) == "true":
            return
        current = next((v for v in self.versions if v.version_id == self.current_version_id), None)
        if current is None:
            return
        old = {r.dialect.lower() for r in sql_representations(current)}
        new = {r.dialect.lower() for r in sql_representations(new_version)}
        if not old <= new:
            lost = ", ".join(sorted(old - new))
            raise InvalidInput(
                "Cannot replace view due to loss of view dialects "
                f"({REPLACE_DROP_DIALECT_ALLOWED}=false): {lost}"
            )

    # -- building ----------------------------------------------------------------------

    def _history_size(self) -> int:
        raw = self.properties.get(VERSION_HISTORY_SIZE, str(DEFAULT_VERSION_HISTORY_SIZE))
        try:
            size = int(raw)
        except ValueError as error:
            raise InvalidInput(
                f"{VERSION_HISTORY_SIZE} must be a whole number, not {short(repr(raw), 100)}",
                field="properties",
            ) from error
        if size < 1:
            raise InvalidInput(f"{VERSION_HISTORY_SIZE} must be at least 1", field="properties")
        return size

    def _expire_versions(self) -> tuple[list[ViewVersion], list[ViewHistoryEntry]]:
        keep = self._history_size()
        if len(self.versions) <= keep:
            return self.versions, self.version_log
        newest = sorted(self.versions, key=lambda v: v.version_id, reverse=True)
        retained_ids = {self.current_version_id}
        for version in newest:
            if len(retained_ids) >= keep:
                break
            retained_ids.add(version.version_id)
        versions = [v for v in self.versions if v.version_id in retained_ids]
        # Keep the log entries after the last one that names an expired version, so the
        # log never points at a version that is gone.
        log: list[ViewHistoryEntry] = []
        for entry in self.version_log:
            if entry.version_id in retained_ids:
                log.append(entry)
            else:
                log = []
        return versions, log

    def build(self) -> ViewMetadata:
        if self.current_version_id == LAST_ADDED:
            raise InvalidInput("A view needs a current version")
        versions, log = self._expire_versions()
        document = {
            "view-uuid": self.view_uuid,
            "format-version": 1,
            "location": self.location,
            "schemas": [s.model_dump(by_alias=True, exclude_none=True) for s in self.schemas],
            "current-version-id": self.current_version_id,
            "versions": [v.model_dump(by_alias=True, exclude_none=True) for v in versions],
            "version-log": [e.model_dump(by_alias=True) for e in log],
            "properties": self.properties,
        }
        # Ids and timestamps within Java's int and long, or engines cannot read the file.
        validate_number_ranges(document)
        return parse_view_metadata(document, source="the new view metadata")


def parse_view_metadata(document: Mapping[str, Any], *, source: str) -> ViewMetadata:
    """Validate a metadata document against the spec; InvalidMetadata names what is wrong."""
    if not isinstance(document, Mapping):
        raise InvalidMetadata(f"{source}: not Iceberg view metadata", field="metadata_location")
    if document.get("format-version") != 1:
        raise InvalidMetadata(
            f"{source}: format-version must be 1, not {short(document.get('format-version'))}",
            field="metadata_location",
        )
    try:
        uuid.UUID(str(document.get("view-uuid")))
    except ValueError as error:
        raise InvalidMetadata(
            f"{source}: view-uuid is missing or not a UUID", field="metadata_location"
        ) from error
    for required in ("location", "schemas", "current-version-id", "versions", "version-log"):
        if required not in document:
            raise InvalidMetadata(
                f"{source}: required field {required} is missing", field="metadata_location"
            )
    versions = document.get("versions")
    for version in versions if isinstance(versions, list) else []:
        if isinstance(version, dict) and "default-namespace" not in version:
            raise InvalidMetadata(
                f"{source}: version {short(version.get('version-id'))}: "
                "required field default-namespace is missing",
                field="metadata_location",
            )
    try:
        metadata = ViewMetadata.model_validate(document)
    except ValidationError as error:
        raise InvalidMetadata(
            f"{source}: {short(describe_validation_error(error))}", field="metadata_location"
        ) from None
    except MALFORMED_INPUT_ERRORS as error:
        # pyiceberg's schema parsing fails in many ways on a malformed document; the message
        # stays short, as a parser's may quote the whole document.
        raise InvalidMetadata(
            f"{source}: not Iceberg view metadata ({short(str(error) or type(error).__name__)})",
            field="metadata_location",
        ) from None
    _check_consistency(metadata, source)
    return metadata


def _check_consistency(metadata: ViewMetadata, source: str) -> None:
    def fail(message: str) -> None:
        raise InvalidMetadata(f"{source}: {message}", field="metadata_location")

    schema_ids = [s.schema_id for s in metadata.schemas]
    version_ids = [v.version_id for v in metadata.versions]
    if len(set(schema_ids)) != len(schema_ids):
        fail("schema ids are not unique")
    if len(set(version_ids)) != len(version_ids):
        fail("version ids are not unique")
    if metadata.current_version_id not in version_ids:
        fail(f"Cannot find current version {metadata.current_version_id} in view versions")
    for version in metadata.versions:
        if version.schema_id not in schema_ids:
            fail(f"version {version.version_id} names unknown schema {version.schema_id}")
        try:
            _check_dialects(version)
        except InvalidMetadata as error:
            fail(f"version {version.version_id}: {error.message}")
    for representation in (r for v in metadata.versions for r in v.representations):
        if representation.root.type != "sql":
            fail(f"unknown representation type {representation.root.type}")


def current_version(metadata: ViewMetadata) -> ViewVersion:
    return next(v for v in metadata.versions if v.version_id == metadata.current_version_id)


def apply_view_updates(
    base: ViewMetadata | None, updates: Iterable[Mapping[str, Any]], *, location: str | None = None
) -> ViewMetadata:
    """Apply the REST protocol's view updates (the `updates` of a view commit) to `base`."""
    if base is None:
        if location is None:
            raise InvalidInput("A new view needs a location")
        builder = ViewMetadataBuilder.new(location=location)
    else:
        builder = ViewMetadataBuilder(base)
    apply_updates_to_builder(builder, updates)
    return builder.build()


def _get(update: Mapping[str, Any], key: str, kind: str) -> Any:
    """One field of a REST view update, of the JSON type the protocol gives it."""
    action = update.get("action")
    if key not in update or update[key] is None:
        raise InvalidInput(f"View update {action} is missing field {key}")
    value = update[key]
    ok = {
        "int": isinstance(value, int) and not isinstance(value, bool) and -1 <= value <= 2**31 - 1,
        "str": isinstance(value, str),
        "object": isinstance(value, Mapping),
        "strings": isinstance(value, list) and all(isinstance(v, str) for v in value),
        "properties": isinstance(value, Mapping)
        and all(isinstance(v, str) for v in value.values()),
    }[kind]
    if not ok:
        expected = {
            "int": "a whole number within Java's int",
            "str": "a string",
            "object": "a JSON object",
            "strings": "a list of strings",
            "properties": "an object mapping strings to strings",
        }[kind]
        raise InvalidInput(f"View update {action}: {key} must be {expected}")
    return value


def _parsed(model: Any, document: Mapping[str, Any], action: str) -> Any:
    """A pyiceberg model from the update's JSON, read as strictly as Java's parsers read it
    (a number where a number belongs: "1" is no schema id); every failure of pyiceberg's
    parsers is refused with a short message."""
    try:
        check_json_numbers(document, f"view update {action}")
        text = json.dumps(document, default=to_jsonable_python)
        return model.model_validate_json(text, strict=True)
    except ValidationError as error:
        raise InvalidInput(
            f"View update {action}: {short(describe_validation_error(error))}"
        ) from None
    except MALFORMED_INPUT_ERRORS as error:
        detail = short(str(error) or type(error).__name__)
        raise InvalidInput(f"View update {action}: {detail}") from None


def _objects(items: object, what: str) -> list[Mapping[str, Any]]:
    """A REST list of JSON objects (the view updates, or the requirements)."""
    if isinstance(items, str | bytes | Mapping) or not isinstance(items, Iterable):
        raise InvalidInput(f"The {what}s must be a list")
    items = list(items)
    if not all(isinstance(item, Mapping) for item in items):
        raise InvalidInput(f"A {what} must be a JSON object")
    return items


def apply_updates_to_builder(
    builder: ViewMetadataBuilder, updates: Iterable[Mapping[str, Any]]
) -> None:
    """Apply the REST protocol's view updates to `builder`, each read as the protocol types
    its fields; InvalidInput names the update and the field that is wrong."""
    for update in _objects(updates, "view update"):
        action = update.get("action")
        if action == "assign-uuid":
            builder.assign_uuid(_get(update, "uuid", "str"))
        elif action == "upgrade-format-version":
            builder.upgrade_format_version(_get(update, "format-version", "int"))
        elif action == "add-schema":
            builder.add_schema(_parsed(Schema, _get(update, "schema", "object"), action))
        elif action == "set-location":
            builder.set_location(_get(update, "location", "str"))
        elif action == "set-properties":
            builder.set_properties(_get(update, "updates", "properties"))
        elif action == "remove-properties":
            builder.remove_properties(_get(update, "removals", "strings"))
        elif action == "add-view-version":
            builder.add_version(
                _parsed(ViewVersion, _get(update, "view-version", "object"), action)
            )
        elif action == "set-current-view-version":
            builder.set_current_version(_get(update, "view-version-id", "int"))
        else:
            raise InvalidInput(f"Unknown view update action: {short(action, 100)}")


def check_view_requirements(base: ViewMetadata, requirements: Iterable[Mapping[str, Any]]) -> None:
    """Check the REST protocol's view requirements against `base`: CommitConflict if one no
    longer holds, InvalidInput if one is malformed."""
    for requirement in _objects(requirements, "view requirement"):
        kind = requirement.get("type")
        if kind == "assert-view-uuid":
            if requirement.get("uuid") != base.view_uuid:
                raise CommitConflict(
                    f"Requirement failed: View UUID does not match: expected "
                    f"{base.view_uuid} != {short(requirement.get('uuid'), 100)}"
                )
        else:
            raise InvalidInput(f"Unknown view requirement: {short(kind, 100)}")


# -- files ---------------------------------------------------------------------------


def write_view_metadata(metadata: ViewMetadata, previous_metadata_location: str | None) -> str:
    """Write the metadata to a new file under its location; return that file's path."""
    path = metadata_io.new_metadata_location(metadata.location, previous_metadata_location)
    metadata_io.write_json(path, view_metadata_json(metadata))
    return path


def view_metadata_json(metadata: ViewMetadata) -> str:
    return metadata.model_dump_json(by_alias=True, exclude_none=True, indent=2)


def read_view_metadata(path: str) -> ViewMetadata:
    return parse_view_metadata(metadata_io.read_json(path), source=path)

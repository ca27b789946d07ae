"""A table's maintenance policy, and which maintenance is due: Django-free.

The policy lives where engines can see it, in properties: Iceberg's own table properties
for what Iceberg defines (snapshot retention, metadata files kept, target file size), and
`lakeview.maintenance.*` for the rest. A table's property wins over its namespace's, which
wins over the default: on for materialized tables (the app makes them, so it keeps them
healthy), off for other tables (their writers may run maintenance of their own).

Which action is due is decided from figures the catalog already has (the current snapshot's
summary, the snapshot and metadata log counts): no Spark, no file read."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

ENABLED = "lakeview.maintenance.enabled"
ORPHAN_AGE = "lakeview.maintenance.orphan-age-ms"
COMPACT_MIN_FILES = "lakeview.maintenance.compaction.min-input-files"
MAX_SNAPSHOT_AGE = "history.expire.max-snapshot-age-ms"
MIN_SNAPSHOTS = "history.expire.min-snapshots-to-keep"
TARGET_FILE_SIZE = "write.target-file-size-bytes"
DELETE_AFTER_COMMIT = "write.metadata.delete-after-commit.enabled"
PREVIOUS_VERSIONS_MAX = "write.metadata.previous-versions-max"

#: Iceberg's defaults (TableProperties in Java).
ICEBERG_MAX_SNAPSHOT_AGE_MS = 5 * 24 * 3600 * 1000
ICEBERG_MIN_SNAPSHOTS = 1
ICEBERG_TARGET_FILE_SIZE = 512 * 1024 * 1024
ICEBERG_PREVIOUS_VERSIONS_MAX = 100

#: Orphan files are removed only when older than this (Iceberg's remove_orphan_files
#: default): a file of a commit still in flight is younger. A policy may lower it, never
#: below MIN_ORPHAN_AGE_MS.
DEFAULT_ORPHAN_AGE_MS = 3 * 24 * 3600 * 1000
MIN_ORPHAN_AGE_MS = 3600 * 1000

#: A materialized table without its own retention keeps about this many refreshes of
#: history (at least 10 minutes, at most 7 days): a continuous table committing every few
#: seconds would otherwise keep 5 days of snapshots, ~100,000 of them, in every metadata
#: file it writes. A derived table can be refreshed again; its history is for readers in
#: flight and a look back, so it is bounded in snapshots, not in days: flat after a few
#: refreshes, whatever the freshness.
MT_REFRESHES_KEPT = 10
MT_MIN_RETENTION_MS = 10 * 60 * 1000
MT_MAX_RETENTION_MS = 7 * 24 * 3600 * 1000
MT_MIN_SNAPSHOTS = 10

#: Small files are compacted once this many of them are there (Iceberg's binpack default
#: is 5; a continuous table adds a file or two per micro-batch).
DEFAULT_COMPACT_MIN_FILES = 10
#: Delete files are folded into their data files once this many exist.
DELETE_FILES_DUE = 5
#: Manifests are rewritten once a snapshot lists this many.
MANIFESTS_DUE = 20


class Action(enum.StrEnum):
    EXPIRE_SNAPSHOTS = "EXPIRE_SNAPSHOTS"
    REWRITE_DATA_FILES = "REWRITE_DATA_FILES"
    REWRITE_POSITION_DELETE_FILES = "REWRITE_POSITION_DELETE_FILES"
    REWRITE_MANIFESTS = "REWRITE_MANIFESTS"
    REMOVE_ORPHAN_FILES = "REMOVE_ORPHAN_FILES"

    @property
    def procedure(self) -> str:
        """The Iceberg Spark procedure that runs the same action."""
        return {
            Action.EXPIRE_SNAPSHOTS: "expire_snapshots",
            Action.REWRITE_DATA_FILES: "rewrite_data_files",
            Action.REWRITE_POSITION_DELETE_FILES: "rewrite_position_delete_files",
            Action.REWRITE_MANIFESTS: "rewrite_manifests",
            Action.REMOVE_ORPHAN_FILES: "remove_orphan_files",
        }[self]


#: The least time between two scheduled runs of one action on one table.
MIN_SPACING_MS = {
    Action.EXPIRE_SNAPSHOTS: 60 * 1000,
    Action.REWRITE_DATA_FILES: 2 * 60 * 1000,
    Action.REWRITE_POSITION_DELETE_FILES: 5 * 60 * 1000,
    Action.REWRITE_MANIFESTS: 30 * 60 * 1000,
    Action.REMOVE_ORPHAN_FILES: 24 * 3600 * 1000,
}


class PolicyError(ValueError):
    """A policy value that is not one (the property's name says which)."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Policy:
    enabled: bool
    #: Where `enabled` came from: "table", "namespace" or "default".
    enabled_by: str
    max_snapshot_age_ms: int
    min_snapshots_to_keep: int
    target_file_size_bytes: int
    compact_min_input_files: int
    orphan_age_ms: int
    delete_after_commit: bool
    previous_versions_max: int
    #: Properties whose values could not be read (the default applies), by name.
    problems: Mapping[str, str] = field(default_factory=dict)


def _flag(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise ValueError("true or false")


#: The largest values Iceberg's Java readers parse (Long.parseLong, Integer.parseInt).
JAVA_LONG_MAX = 2**63 - 1
JAVA_INT_MAX = 2**31 - 1


def _count(value: str, *, least: int, most: int) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        raise ValueError("a whole number") from None
    if not least <= number <= most:
        raise ValueError(f"a whole number from {least} to {most}")
    return number


def parse_value(name: str, value: str) -> object:
    """`value` of policy property `name` as the policy reads it; PolicyError names the
    property when it is not one (what our own API and page refuse). Numbers are bounded as
    Iceberg's Java readers parse them, so every engine reads what we store."""
    try:
        if name in (ENABLED, DELETE_AFTER_COMMIT):
            return _flag(value)
        if name == ORPHAN_AGE:
            return _count(value, least=MIN_ORPHAN_AGE_MS, most=JAVA_LONG_MAX)
        if name in (MAX_SNAPSHOT_AGE, TARGET_FILE_SIZE):
            return _count(value, least=1, most=JAVA_LONG_MAX)
        if name in (MIN_SNAPSHOTS, COMPACT_MIN_FILES, PREVIOUS_VERSIONS_MAX):
            return _count(value, least=1, most=JAVA_INT_MAX)
    except ValueError as error:
        raise PolicyError(f"{name} must be {error}, not {value[:100]!r}", field=name) from None
    raise PolicyError(f"{name} is not a maintenance setting", field=name)


POLICY_PROPERTIES = (
    ENABLED,
    MAX_SNAPSHOT_AGE,
    MIN_SNAPSHOTS,
    TARGET_FILE_SIZE,
    COMPACT_MIN_FILES,
    ORPHAN_AGE,
    DELETE_AFTER_COMMIT,
    PREVIOUS_VERSIONS_MAX,
)


def mt_retention_ms(freshness_seconds: int | None) -> int:
    """A materialized table's default snapshot retention: about MT_REFRESHES_KEPT refreshes."""
    if not freshness_seconds:
        return MT_MIN_RETENTION_MS
    retention = MT_REFRESHES_KEPT * freshness_seconds * 1000
    return max(MT_MIN_RETENTION_MS, min(MT_MAX_RETENTION_MS, retention))


def policy(
    *,
    table_properties: Mapping[str, str],
    namespace_properties: Mapping[str, str] | None = None,
    materialized: bool = False,
    freshness_seconds: int | None = None,
) -> Policy:
    """The policy a table's properties (then its namespace's) give it. Values engines wrote
    that cannot be read fall back to the default and are listed in `problems`: a table is
    never left unmaintained, nor its commit refused, over a property (engines may write any)."""
    namespace_properties = namespace_properties or {}
    problems: dict[str, str] = {}

    def read(name: str, default: object, *, namespace_too: bool = False) -> tuple[object, str]:
        sources = [("table", table_properties)]
        if namespace_too:
            sources.append(("namespace", namespace_properties))
        for origin, properties in sources:
            if name in properties:
                try:
                    return parse_value(name, properties[name]), origin
                except PolicyError as error:
                    problems[name] = str(error)
        return default, "default"

    def number(name: str, default: int, *, namespace_too: bool = False) -> int:
        value, _ = read(name, default, namespace_too=namespace_too)
        return value if isinstance(value, int) else default

    enabled, enabled_by = read(ENABLED, materialized, namespace_too=True)
    default_age = (
        mt_retention_ms(freshness_seconds) if materialized else ICEBERG_MAX_SNAPSHOT_AGE_MS
    )
    return Policy(
        enabled=enabled is True,
        enabled_by=enabled_by,
        max_snapshot_age_ms=number(MAX_SNAPSHOT_AGE, default_age),
        min_snapshots_to_keep=number(
            MIN_SNAPSHOTS, MT_MIN_SNAPSHOTS if materialized else ICEBERG_MIN_SNAPSHOTS
        ),
        target_file_size_bytes=number(TARGET_FILE_SIZE, ICEBERG_TARGET_FILE_SIZE),
        compact_min_input_files=number(
            COMPACT_MIN_FILES, DEFAULT_COMPACT_MIN_FILES, namespace_too=True
        ),
        orphan_age_ms=number(ORPHAN_AGE, DEFAULT_ORPHAN_AGE_MS, namespace_too=True),
        delete_after_commit=read(DELETE_AFTER_COMMIT, False)[0] is True,
        previous_versions_max=number(PREVIOUS_VERSIONS_MAX, ICEBERG_PREVIOUS_VERSIONS_MAX),
        problems=problems,
    )


@dataclass(frozen=True)
class Health:
    """A table's figures at one moment, from its current metadata (snapshot summary)."""

    data_files: int = 0
    data_bytes: int = 0
    delete_files: int = 0
    position_delete_files: int = 0
    snapshots: int = 0
    #: Timestamp of the oldest snapshot no branch or tag names directly.
    oldest_snapshot_ms: int | None = None
    manifests: int | None = None
    metadata_bytes: int | None = None
    metadata_files: int | None = None

    @property
    def average_file_bytes(self) -> int | None:
        return self.data_bytes // self.data_files if self.data_files else None


def due(
    p: Policy,
    health: Health,
    *,
    now_ms: int,
    last_started_ms: Mapping[Action, int],
    actions: Sequence[Action] = tuple(Action),
) -> list[Action]:
    """The actions a scheduled sweep should run now, in the order to run them (compaction
    first, so that the expiry after it can drop the files it replaced)."""
    if not p.enabled:
        return []

    def spaced(action: Action) -> bool:
        last = last_started_ms.get(action)
        return last is None or now_ms - last >= MIN_SPACING_MS[action]

    wanted: list[Action] = []
    small = (
        health.data_files >= p.compact_min_input_files
        and (health.average_file_bytes or 0) < p.target_file_size_bytes * 3 // 4
    )
    if small or health.delete_files >= DELETE_FILES_DUE:
        wanted.append(Action.REWRITE_DATA_FILES)
    if health.position_delete_files >= DELETE_FILES_DUE:
        wanted.append(Action.REWRITE_POSITION_DELETE_FILES)
    if (health.manifests or 0) >= MANIFESTS_DUE:
        wanted.append(Action.REWRITE_MANIFESTS)
    # Expire once the oldest snapshot is a tenth of the retention (at least a minute) past
    # it: each expiry is a commit of its own, not one per new snapshot.
    slack = max(60 * 1000, p.max_snapshot_age_ms // 10)
    if (
        health.oldest_snapshot_ms is not None
        and health.snapshots > p.min_snapshots_to_keep
        and health.oldest_snapshot_ms < now_ms - p.max_snapshot_age_ms - slack
    ):
        wanted.append(Action.EXPIRE_SNAPSHOTS)
    wanted.append(Action.REMOVE_ORPHAN_FILES)
    return [a for a in wanted if a in actions and spaced(a)]

"""Iceberg's maintenance actions in the worker's Spark, through the app's own REST catalog:
Django-free.

Each action is the one Iceberg's Spark procedure of the same name runs (`expire_snapshots`
runs ExpireSnapshotsSparkAction, `rewrite_data_files` RewriteDataFilesSparkAction, ...),
called through SparkActions rather than `CALL ...` for two reasons: a table's name reaches
the JVM as an identifier, never spliced into SQL text; and an action that deletes files
(expiry, orphan removal) is handed a delete function that deletes nothing
(lakeview.actions.CollectPaths, in the app's jar) and only collects the paths, which are
then deleted here with the purge's own check that each lies strictly inside the table's
location (catalog.core.purge.delete_owned_files). A CALL cannot take such a function, and
a file an engine's manifest names outside the table is never this table's to delete.

Commits these actions make go through the REST catalog like any engine's, so they meet the
one commit path and its conflict checks (a compaction racing a refresh: one of them retries
or fails cleanly; no reader ever sees half of either)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from catalog.core import purge
from maintenance.core.policy import Action, Policy
from runtime.spark.session import quote

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

COLLECTOR = "lakeview.actions.CollectPaths"


@dataclass
class Outcome:
    """What one action did (counts Iceberg's result reports, and what the app deleted)."""

    rewritten_files: int = 0
    added_files: int = 0
    rewritten_bytes: int = 0
    removed_delete_files: int = 0
    failed_files: int = 0
    snapshots_expired: int = 0
    files_deleted: int = 0
    files_missing: int = 0
    #: Paths the action asked to delete that lie outside the table's location: kept.
    files_outside: list[str] = field(default_factory=list)
    orphans_found: int = 0
    details: dict[str, Any] = field(default_factory=dict)


def load_table(spark: SparkSession, *, catalog: str, namespace: Sequence[str], name: str) -> Any:
    """The Java Iceberg Table behind the name, loaded through the app's catalog."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    return jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
        spark._jsparkSession,  # type: ignore[attr-defined]
        quote([catalog, *namespace, name]),
    )


def _actions(spark: SparkSession) -> Any:
    jvm = spark._jvm  # type: ignore[attr-defined]
    return jvm.org.apache.iceberg.spark.actions.SparkActions.get(spark._jsparkSession)  # type: ignore[attr-defined]


def _snapshot_ids(table: Any) -> set[int]:
    table.refresh()
    return {int(s.snapshotId()) for s in table.snapshots()}


def _delete(paths: Sequence[str], table_location: str, outcome: Outcome) -> None:
    result = purge.PurgeResult()
    purge.delete_owned_files(paths, table_location=table_location, result=result)
    outcome.files_deleted += result.deleted
    outcome.files_missing += result.missing
    outcome.files_outside = result.outside[:100]
    if result.outside:
        outcome.details["outside_count"] = len(result.outside)
    if result.failed:
        outcome.details["failed_deletes"] = result.failed[:100]


def run(
    spark: SparkSession,
    action: Action,
    *,
    catalog: str,
    namespace: Sequence[str],
    name: str,
    table_location: str,
    policy: Policy,
    now_ms: int,
) -> Outcome:
    """Run `action` on the table with `policy`'s settings."""
    # Compaction reads its file groups with spark.read.format("iceberg"), whose source sets
    # up its catalogs in the thread's *active* session: make that this one (a worker
    # thread's active session is whichever session it last ran).
    spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)  # type: ignore[attr-defined]
    table = load_table(spark, catalog=catalog, namespace=namespace, name=name)
    actions = _actions(spark)
    outcome = Outcome()
    if action is Action.EXPIRE_SNAPSHOTS:
        with _deleting_here(spark, table_location, outcome) as collector:
            _expire(actions, table, policy, now_ms, delete_with=collector, outcome=outcome)
    elif action is Action.REWRITE_DATA_FILES:
        result = (
            actions.rewriteDataFiles(table)
            .option("target-file-size-bytes", str(policy.target_file_size_bytes))
            .option("min-input-files", str(policy.compact_min_input_files))
            # A data file with a delete file is rewritten with its deletes applied, and
            # delete files left naming no live row are dropped in the same commit.
            .option("delete-file-threshold", "1")
            .option("remove-dangling-deletes", "true")
            .execute()
        )
        outcome.rewritten_files = int(result.rewrittenDataFilesCount())
        outcome.added_files = int(result.addedDataFilesCount())
        outcome.rewritten_bytes = int(result.rewrittenBytesCount())
        outcome.removed_delete_files = int(result.removedDeleteFilesCount())
        outcome.failed_files = int(result.failedDataFilesCount())
    elif action is Action.REWRITE_POSITION_DELETE_FILES:
        result = actions.rewritePositionDeletes(table).option("rewrite-all", "true").execute()
        outcome.rewritten_files = int(result.rewrittenDeleteFilesCount())
        outcome.added_files = int(result.addedDeleteFilesCount())
        outcome.rewritten_bytes = int(result.rewrittenBytesCount())
    elif action is Action.REWRITE_MANIFESTS:
        result = actions.rewriteManifests(table).execute()
        outcome.rewritten_files = sum(1 for _ in result.rewrittenManifests())
        outcome.added_files = sum(1 for _ in result.addedManifests())
    elif action is Action.REMOVE_ORPHAN_FILES:
        with _deleting_here(spark, table_location, outcome) as collector:
            _remove_orphans(actions, table, policy, now_ms, delete_with=collector, outcome=outcome)
    else:  # pragma: no cover - the enum is closed
        raise ValueError(action)
    return outcome


@contextmanager
def _deleting_here(spark: SparkSession, table_location: str, outcome: Outcome) -> Iterator[Any]:
    """A delete function for an Iceberg action that deletes nothing and collects the paths
    (lakeview.actions.CollectPaths); once the action is done they are deleted here, those
    strictly inside the table's location only (`_delete`)."""
    collector = spark._jvm.lakeview.actions.CollectPaths()  # type: ignore[attr-defined]
    yield collector
    _delete(list(collector.drain()), table_location, outcome)


def _expire(
    actions: Any, table: Any, policy: Policy, now_ms: int, *, delete_with: Any, outcome: Outcome
) -> None:
    """Expire snapshots older than the retention, keeping at least min-snapshots-to-keep
    and every snapshot a branch or tag still needs (Iceberg's own rules, per ref)."""
    before = _snapshot_ids(table)
    result = (
        actions.expireSnapshots(table)
        .expireOlderThan(now_ms - policy.max_snapshot_age_ms)
        .retainLast(policy.min_snapshots_to_keep)
        .deleteWith(delete_with)
        .execute()
    )
    outcome.snapshots_expired = len(before - _snapshot_ids(table))
    outcome.details = {
        "data_files": int(result.deletedDataFilesCount()),
        "position_delete_files": int(result.deletedPositionDeleteFilesCount()),
        "equality_delete_files": int(result.deletedEqualityDeleteFilesCount()),
        "manifests": int(result.deletedManifestsCount()),
        "manifest_lists": int(result.deletedManifestListsCount()),
    }


def _remove_orphans(
    actions: Any, table: Any, policy: Policy, now_ms: int, *, delete_with: Any, outcome: Outcome
) -> None:
    """Files under the table's location that no metadata names and older than the policy's
    orphan age (a commit in flight writes younger files), listed by Iceberg's action over
    the table's own location only."""
    result = (
        actions.deleteOrphanFiles(table)
        .location(table.location())
        .olderThan(now_ms - policy.orphan_age_ms)
        .deleteWith(delete_with)
        .execute()
    )
    outcome.orphans_found = sum(1 for _ in result.orphanFileLocations())

"""The rows a source table deleted and inserted between two of its snapshots, read from
Iceberg itself: what an incremental refresh applies when a source was not only appended to
(a DELETE, UPDATE, MERGE INTO or INSERT OVERWRITE, copy-on-write or merge-on-read).

The app's JVM helper (jvm/RowChanges.java) plans both snapshots and stages, as two scan task
sets, only the data files whose live rows may differ: files removed, files added, and files
kept whose delete files changed (new position deletes or deletion vectors, rewritten ones,
equality deletes). Spark reads them with Iceberg's readers, each snapshot's deletes applied,
with the metadata columns `_file` and `_pos`: a row's (file, position) names it for its life,
so the rows of the older read missing from the newer are the deleted ones, and the other way
round the inserted ones. A copy-on-write rewrite deletes and re-inserts every row of the files
it rewrites, identical but for their position; those carry-over rows cancel as multisets
(`exceptAll`), as Iceberg's changelog view removes them. Unchanged files are never read.

Why not Iceberg's changelog view (`create_changelog_view`): in Iceberg 1.10 it refuses a
merge-on-read UPDATE or MERGE ("Delete files are currently not supported in changelog scans"),
the way CDC-fed tables are mostly written, while this rule reads every kind of snapshot alike.
An update is a deleted row and an inserted row here, which is all a refresh needs: it
recomputes the keys either touches. Django-free."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from refresh.spark.batch import as_rows, release
from runtime.spark.session import activate, quote

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

FILE, POSITION = "_file", "_pos"
#: Markers of the side a compared row comes from, and the prefix of each side's columns.
BEFORE, AFTER = "__lakeview_before", "__lakeview_after"


class UnreadableChanges(Exception):
    """A range of snapshots whose rows cannot be compared (a snapshot expired meanwhile, the
    schema changed): the run fails with this message, and the next one decides again."""


class ChangesTooLarge(Exception):
    """Reading a source's changes would read more of its rows than the table allows
    (`max_read`): a full refresh is then the cheaper. Raised before any row is read."""

    def __init__(self, source: str, read: int, total: int, ratio: float) -> None:
        share = f"{read / total:.1f} times" if total else "all"
        super().__init__(
            f"reading source {source}'s changes means reading {read:,} rows (the data files "
            f"that differ, at both snapshots), {share} its {total:,} rows, more than "
            f"refresh.incremental.max-change-ratio ({ratio:g}) of it: a full refresh is the "
            "cheaper"
        )


@dataclass(frozen=True)
class RowChanges:
    """A source's change: the rows it deleted (as they were) and inserted, as multisets, and
    how many files and rows of them were read to find them."""

    deleted: DataFrame
    inserted: DataFrame
    files_read: int = 0
    rows_read: int = 0


def _helper(session: SparkSession) -> Any:
    return session._jvm.lakeview.changes.RowChanges  # noqa: SLF001 - py4j's entry point


@contextmanager
def row_changes(
    session: SparkSession,
    *,
    table: Sequence[str],
    since: int | None,
    until: int,
    max_read: float | None = None,
) -> Iterator[RowChanges]:
    """The rows `table` ((catalog, *namespace, name)) deleted and inserted after snapshot
    `since` (None: it was empty then) up to snapshot `until`, kept while the context lasts;
    UnreadableChanges when they cannot be read, ChangesTooLarge (before reading any row)
    when the files to read hold more than `max_read` of the table's rows (None: no
    bound). The snapshots' summaries count rows changed; this counts rows read: updates
    spread over every file of a merge-on-read table make every file one to read."""
    name = quote(table)
    now = session.read.option("snapshot-id", str(until)).table(name)
    if since is None:
        yield RowChanges(deleted=now.limit(0), inserted=now)
        return
    helper = _helper(session)
    staged = helper.stage(session._jsparkSession, name, since, until)  # noqa: SLF001
    if staged.unreadable():
        raise UnreadableChanges(
            f"The changes of source {'.'.join(table[1:])} cannot be read: {staged.unreadable()}"
        )
    read, total = staged.beforeRecords() + staged.afterRecords(), staged.totalRecords()
    if max_read is not None and read > max_read * max(total, 1):
        helper.release(staged.before())
        helper.release(staged.after())
        raise ChangesTooLarge(".".join(table[1:]), read, total, max_read)
    frames: list[DataFrame] = []
    try:
        changed = _compared(
            _staged(session, staged.before(), now.columns, empty=now),
            _staged(session, staged.after(), now.columns, empty=now),
            now.columns,
        )
        frames.append(changed)
        deleted = changed.where(f"{AFTER} IS NULL").select(*_named(now.columns, BEFORE))
        inserted = changed.where(f"{BEFORE} IS NULL").select(*_named(now.columns, AFTER))
        # Carry-over rows (a copy-on-write rewrite's unchanged rows) cancel out. Each result
        # is kept as plain rows: the plans that read it stay small.
        net_deleted = as_rows(deleted.exceptAll(inserted))
        net_inserted = as_rows(inserted.exceptAll(deleted))
        frames += [net_deleted, net_inserted]
        yield RowChanges(
            deleted=net_deleted,
            inserted=net_inserted,
            files_read=staged.beforeFiles() + staged.afterFiles(),
            rows_read=staged.beforeRecords() + staged.afterRecords(),
        )
    finally:
        for frame in frames:
            release(frame)
        helper.release(staged.before())
        helper.release(staged.after())


def _compared(before: DataFrame, after: DataFrame, columns: Sequence[str]) -> DataFrame:
    """The rows of `before` and `after` that the other lacks, by (file, position), from one
    full outer join (one shuffle of the files read), kept as plain rows: each side's columns
    prefixed with its marker's name, the other side's marker null."""
    from pyspark.sql import functions as F

    def side(frame: DataFrame, marker: str) -> DataFrame:
        renamed = [F.col(quote([c])).alias(f"{marker}_{i}") for i, c in enumerate(columns)]
        return frame.select(*renamed, FILE, POSITION, F.lit(True).alias(marker))

    joined = side(before, BEFORE).join(side(after, AFTER), [FILE, POSITION], "full_outer")
    return as_rows(joined.where(f"{BEFORE} IS NULL OR {AFTER} IS NULL"))


def _named(columns: Sequence[str], marker: str) -> list[Any]:
    """A compared side's columns under their own names again."""
    from pyspark.sql import functions as F

    return [F.col(f"{marker}_{i}").alias(c) for i, c in enumerate(columns)]


def _staged(
    session: SparkSession, set_id: str | None, columns: Sequence[str], *, empty: DataFrame
) -> DataFrame:
    """The rows of a staged task set with their file and position; none for no set."""
    from pyspark.sql import functions as F

    if set_id is None:
        return empty.limit(0).select(
            *columns, F.lit("").alias(FILE), F.lit(0).cast("long").alias(POSITION)
        )
    # Iceberg's source finds the catalog of staged task sets through the calling thread's
    # active session, which a worker thread other than the one that built its Spark has
    # none of (and a run's session is not).
    activate(session)
    frame = session.read.format("iceberg").option("scan-task-set-id", set_id).load(set_id)
    return frame.select(*[F.col(quote([c])) for c in columns], FILE, POSITION)

"""Iceberg's maintenance actions (maintenance.spark.actions) on a table of the app's REST
catalog, in Spark: compaction folds small files and delete files into few files, manifests
are rewritten, expiry keeps the retention, the last snapshots and every tagged snapshot,
orphan removal deletes only old files no metadata names; the rows never change."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from maintenance.core.policy import Action, policy
from maintenance.spark import actions
from tests.spark.conftest import REST_CATALOG

NS = "maint"


def rows(spark: SparkSession, sql: str) -> list[tuple]:
    return sorted(tuple(r) for r in spark.sql(sql).collect())


def live_files(spark: SparkSession, table: str) -> tuple[int, int]:
    data = spark.sql(f"SELECT count(*) FROM {table}.data_files").first()[0]
    deletes = spark.sql(f"SELECT count(*) FROM {table}.delete_files").first()[0]
    return data, deletes


def run(spark: SparkSession, action: Action, location: str, **properties: str):
    return actions.run(
        spark,
        action,
        catalog=REST_CATALOG,
        namespace=[NS],
        name="events",
        table_location=location,
        policy=policy(table_properties=properties),
        now_ms=int(time.time() * 1000),
    )


@pytest.fixture(scope="module")
def table(lv_spark: SparkSession) -> str:
    name = f"{NS}.events"
    lv_spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {NS}")
    lv_spark.sql(
        f"CREATE TABLE {name} (id BIGINT, k STRING, v INT) USING iceberg TBLPROPERTIES "
        "('format-version'='2', 'write.delete.mode'='merge-on-read')"
    )
    for batch in range(12):
        values = ", ".join(f"({batch * 10 + i}, 'k{i % 3}', {i})" for i in range(10))
        lv_spark.sql(f"INSERT INTO {name} VALUES {values}")
    lv_spark.sql(f"DELETE FROM {name} WHERE id % 7 = 0")
    return name


def test_compaction_and_manifest_rewrites_fold_small_and_delete_files_and_keep_the_rows(
    lv_spark: SparkSession, table: str
) -> None:
    location = lv_spark.sql(f"DESCRIBE TABLE EXTENDED {table}").where("col_name = 'Location'")
    location = location.first()["data_type"]
    before = rows(lv_spark, f"SELECT * FROM {table}")
    data, deletes = live_files(lv_spark, table)
    assert data >= 12 and deletes >= 1

    # One manifest per append, folded into few.
    manifests = run(lv_spark, Action.REWRITE_MANIFESTS, location)
    assert manifests.rewritten_files >= 12 and 1 <= manifests.added_files < 12
    assert rows(lv_spark, f"SELECT * FROM {table}") == before

    outcome = run(
        lv_spark,
        Action.REWRITE_DATA_FILES,
        location,
        **{"lakeview.maintenance.compaction.min-input-files": "2"},
    )

    assert outcome.rewritten_files >= 12 and outcome.added_files >= 1
    assert live_files(lv_spark, table)[0] == outcome.added_files
    assert rows(lv_spark, f"SELECT * FROM {table}") == before
    last = lv_spark.sql(f"SELECT operation FROM {table}.snapshots ORDER BY committed_at DESC")
    assert last.first()[0] == "replace"

    # The delete files now name rows of files compaction replaced: the position-delete
    # rewrite drops them.
    _, left = live_files(lv_spark, table)
    positions = run(lv_spark, Action.REWRITE_POSITION_DELETE_FILES, location)
    assert positions.rewritten_files == left
    assert live_files(lv_spark, table) == (outcome.added_files, 0)
    assert rows(lv_spark, f"SELECT * FROM {table}") == before


def test_expiry_keeps_the_last_snapshots_and_tagged_ones_and_deletes_only_their_files(
    lv_spark: SparkSession, table: str
) -> None:
    location = lv_spark.sql(f"DESCRIBE TABLE EXTENDED {table}").where("col_name = 'Location'")
    location = location.first()["data_type"]
    snapshots = lv_spark.sql(
        f"SELECT snapshot_id FROM {table}.snapshots ORDER BY committed_at"
    ).collect()
    first = snapshots[0][0]
    lv_spark.sql(f"ALTER TABLE {table} CREATE TAG first_load AS OF VERSION {first}")
    tagged_rows = rows(lv_spark, f"SELECT * FROM {table} VERSION AS OF 'first_load'")
    current = rows(lv_spark, f"SELECT * FROM {table}")
    time.sleep(0.01)

    outcome = run(
        lv_spark,
        Action.EXPIRE_SNAPSHOTS,
        location,
        **{
            "history.expire.max-snapshot-age-ms": "1",
            "history.expire.min-snapshots-to-keep": "3",
        },
    )

    kept = {r[0] for r in lv_spark.sql(f"SELECT snapshot_id FROM {table}.snapshots").collect()}
    assert first in kept  # the tag's
    assert len(kept) == 4
    assert outcome.snapshots_expired == len(snapshots) - 4
    assert outcome.files_deleted > 0 and outcome.files_outside == []
    assert rows(lv_spark, f"SELECT * FROM {table}") == current
    assert rows(lv_spark, f"SELECT * FROM {table} VERSION AS OF 'first_load'") == tagged_rows


def test_orphan_removal_deletes_old_unnamed_files_in_the_table_and_nothing_younger(
    lv_spark: SparkSession, table: str
) -> None:
    location = lv_spark.sql(f"DESCRIBE TABLE EXTENDED {table}").where("col_name = 'Location'")
    location = location.first()["data_type"]
    folder = Path(location.removeprefix("file:"))
    old = folder / "data" / "left-by-a-dead-writer.parquet"
    young = folder / "data" / "a-commit-in-flight.parquet"
    for stray in (old, young):
        stray.write_bytes(b"not referenced")
    two_hours_ago = time.time() - 7200
    os.utime(old, (two_hours_ago, two_hours_ago))
    current = rows(lv_spark, f"SELECT * FROM {table}")

    outcome = run(
        lv_spark,
        Action.REMOVE_ORPHAN_FILES,
        location,
        **{"lakeview.maintenance.orphan-age-ms": str(3600 * 1000)},
    )

    assert not old.exists() and young.exists()
    assert outcome.orphans_found == 1 and outcome.files_deleted == 1
    assert rows(lv_spark, f"SELECT * FROM {table}") == current

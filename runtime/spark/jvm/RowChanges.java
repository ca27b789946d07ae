package lakeview.changes;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import org.apache.iceberg.DeleteFile;
import org.apache.iceberg.FileScanTask;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.Table;
import org.apache.iceberg.io.CloseableIterable;
import org.apache.iceberg.spark.ScanTaskSetManager;
import org.apache.iceberg.spark.Spark3Util;
import org.apache.iceberg.spark.SparkTableCache;
import org.apache.spark.sql.SparkSession;

/**
 * The data files whose live rows differ between two snapshots of a table, staged as two scan
 * task sets that Spark reads with Iceberg's own readers (option "scan-task-set-id", as
 * Iceberg's rewrite actions read the files they rewrite): "before", the files as they were at
 * the older snapshot (its deletes applied), and "after", as they are at the newer one.
 *
 * <p>A data file is in them when it was removed (before only), added (after only), or kept
 * with a different set of delete files (both: position deletes, deletion vectors or equality
 * deletes added or rewritten). Data files are immutable and a row's (_file, _pos) names it
 * for its life, so the rows of "before" missing from "after" are exactly the rows the range
 * deleted, and the rows of "after" missing from "before" the rows it inserted, for any
 * operation: copy-on-write and merge-on-read DELETE, UPDATE, MERGE INTO and overwrites alike.
 * Iceberg's changelog scan (create_changelog_view) refuses merge-on-read UPDATE and MERGE
 * ("Delete files are currently not supported in changelog scans"); this reads them all, with
 * one rule. Only the files named are read, never the unchanged ones (a filter on _file is not
 * pushed into Iceberg's scan planning, hence the staging).
 */
public final class RowChanges {
  private RowChanges() {}

  /** What `stage` found: the two task sets' ids (null when empty), or why not. */
  public static final class Staged {
    private final String before;
    private final String after;
    private final String unreadable;
    private final long beforeRecords;
    private final long afterRecords;
    private final int beforeFiles;
    private final int afterFiles;
    private long totalRecords;

    // Methods, not fields: Py4J reaches a Java object's methods only.
    public String before() {
      return before;
    }

    public String after() {
      return after;
    }

    public String unreadable() {
      return unreadable;
    }

    public long beforeRecords() {
      return beforeRecords;
    }

    public long afterRecords() {
      return afterRecords;
    }

    public int beforeFiles() {
      return beforeFiles;
    }

    public int afterFiles() {
      return afterFiles;
    }

    /** The records of every data file live at the newer snapshot (deletes not subtracted). */
    public long totalRecords() {
      return totalRecords;
    }

    Staged(String before, String after, long beforeRecords, long afterRecords, int bf, int af) {
      this.before = before;
      this.after = after;
      this.unreadable = null;
      this.beforeRecords = beforeRecords;
      this.afterRecords = afterRecords;
      this.beforeFiles = bf;
      this.afterFiles = af;
    }

    Staged(String unreadable) {
      this.before = null;
      this.after = null;
      this.unreadable = unreadable;
      this.beforeRecords = 0;
      this.afterRecords = 0;
      this.beforeFiles = 0;
      this.afterFiles = 0;
    }
  }

  /**
   * Stage the files of `tableName` (a Spark identifier, catalog included) whose rows differ
   * between snapshot `since` and snapshot `until`. Unreadable (the reason set, nothing
   * staged) when a snapshot is gone or the schema changed in between (rows would be read
   * under another schema than the query's).
   */
  public static Staged stage(SparkSession spark, String tableName, long since, long until)
      throws Exception {
    Table table = Spark3Util.loadIcebergTable(spark, tableName);
    Snapshot older = table.snapshot(since);
    Snapshot newer = table.snapshot(until);
    if (older == null) {
      return new Staged("snapshot " + since + " is no longer in its history (expired)");
    }
    if (newer == null) {
      return new Staged("snapshot " + until + " is no longer in its history (expired)");
    }
    Integer current = table.schema().schemaId();
    if (!equal(older.schemaId(), newer.schemaId()) || !equal(newer.schemaId(), current)) {
      return new Staged(
          "its schema changed between snapshot " + since + " and now, so rows of the two "
              + "cannot be compared");
    }
    Map<String, FileScanTask> was = plan(table, since);
    Map<String, FileScanTask> is = plan(table, until);
    List<FileScanTask> before = new ArrayList<>();
    List<FileScanTask> after = new ArrayList<>();
    long beforeRecords = 0;
    long afterRecords = 0;
    for (Map.Entry<String, FileScanTask> entry : was.entrySet()) {
      FileScanTask now = is.get(entry.getKey());
      if (now == null || !deletes(now).equals(deletes(entry.getValue()))) {
        before.add(entry.getValue());
        beforeRecords += entry.getValue().file().recordCount();
      }
    }
    for (Map.Entry<String, FileScanTask> entry : is.entrySet()) {
      FileScanTask then = was.get(entry.getKey());
      if (then == null || !deletes(then).equals(deletes(entry.getValue()))) {
        after.add(entry.getValue());
        afterRecords += entry.getValue().file().recordCount();
      }
    }
    Staged staged =
        new Staged(
            stageTasks(table, before),
            stageTasks(table, after),
            beforeRecords,
            afterRecords,
            before.size(),
            after.size());
    for (FileScanTask task : is.values()) {
      staged.totalRecords += task.file().recordCount();
    }
    return staged;
  }

  /** How many staged task sets are registered in this JVM (bench/changes_soak.py). */
  public static int stagedSets() {
    return SparkTableCache.get().size();
  }

  /** Forget a staged task set (its tasks and the table kept for it). */
  public static void release(String setId) {
    if (setId == null) {
      return;
    }
    Table table = SparkTableCache.get().get(setId);
    if (table != null) {
      ScanTaskSetManager.get().removeTasks(table, setId);
    }
    SparkTableCache.get().remove(setId);
  }

  private static boolean equal(Integer left, Integer right) {
    return left == null ? right == null : left.equals(right);
  }

  private static String stageTasks(Table table, List<FileScanTask> tasks) {
    if (tasks.isEmpty()) {
      return null;
    }
    String id = "lakeview-changes-" + UUID.randomUUID();
    SparkTableCache.get().add(id, table);
    ScanTaskSetManager.get().stageTasks(table, id, tasks);
    return id;
  }

  private static Set<String> deletes(FileScanTask task) {
    Set<String> found = new HashSet<>();
    for (DeleteFile delete : task.deletes()) {
      found.add(delete.location());
    }
    return found;
  }

  /** Every data file live at the snapshot, by location, with the deletes that apply to it. */
  private static Map<String, FileScanTask> plan(Table table, long snapshotId) {
    Map<String, FileScanTask> tasks = new HashMap<>();
    try (CloseableIterable<FileScanTask> planned =
        table.newScan().useSnapshot(snapshotId).planFiles()) {
      for (FileScanTask task : planned) {
        tasks.put(task.file().location(), task);
      }
    } catch (IOException error) {
      throw new UncheckedIOException(error);
    }
    return tasks;
  }
}

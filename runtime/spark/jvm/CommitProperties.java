package lakeview.commits;

import java.util.Map;
import org.apache.iceberg.spark.CommitMetadata;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;

/**
 * Runs a statement whose Iceberg commit carries extra snapshot-summary entries (a refresh's
 * refresh-state, a person's change). DataFrame writes take them as write options
 * ("snapshot-property.*"); a SQL statement (MERGE INTO, the console's UPDATE and DELETE) can
 * only get them from Iceberg's CommitMetadata, a thread-local that holds while a callable
 * runs: the statement must run inside it, on this thread, hence this helper in the JVM.
 */
public final class CommitProperties {
  private CommitProperties() {}

  /** spark.sql(sql), its commit with `properties` in the snapshot summary. */
  public static Dataset<Row> sql(SparkSession spark, String sql, Map<String, String> properties)
      throws Exception {
    return CommitMetadata.withCommitProperties(
        properties, () -> spark.sql(sql), Exception.class);
  }

  /** An analyzed plan run as a Dataset (the sandbox's checked plan), likewise. */
  public static Dataset<Row> plan(
      SparkSession spark, LogicalPlan plan, Map<String, String> properties) throws Exception {
    return CommitMetadata.withCommitProperties(
        properties, () -> Dataset.ofRows(spark, plan), Exception.class);
  }
}

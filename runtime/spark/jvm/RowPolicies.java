// Row filters and column masks put into an analyzed plan (runtime/spark/policies.py), in one
// call: every read of a protected table of the app's catalog, wherever it stands (joins,
// subqueries in expressions, CTEs, a catalog view's body, time travel), becomes
//
//     Project(each column as the parents know it: its mask cast to its type, or itself)
//       LocalLimit(Int.MaxValue)               <- the barrier (below)
//         Filter(the row filter)
//           the relation, a fresh instance
//
// The Project's aliases keep the exprIds of the relation's output, so the parents' references
// hold. The policy SQL is parsed by Spark's parser and resolved by Spark's analyzer against
// the fresh relation alone (so it sees the raw columns, never the reader's names).
//
// The barrier: no optimizer rule moves a Filter below a limit (it would change the answer),
// and the scan's pushdown collects only Projects and Filters. Without it, Spark pushes the
// reader's predicates down through the Project and merges them with the row filter, or, when
// the filter holds a subquery, turns it into a semi-join and pushes the reader's predicates
// below that (tests/spark/test_row_policies.py shows `raise_error` then printing a hidden
// row's value). With it, the reader's predicates (raise_error, assert_true, ANSI casts and
// divisions...) run only on rows the row filter let through, while the row filter itself
// still reaches Iceberg for file pruning. A limit of Int.MaxValue drops nothing, and Spark
// removes one only when it can bound the rows below it, which a table read never is. (A
// nondeterministic filter would stop the pushdown too, but makes every subquery over the
// table nondeterministic, which Spark refuses in a DELETE's condition.) The price: a
// reader's predicates on a protected table prune no files.
//
// Refused (Refused, which the Python side turns into the sandbox's refusal naming the
// policies): a metadata table of a protected table (its identifier is the table's plus one
// level: files, snapshots, changes...; Iceberg's selectors snapshot_id_N, at_timestamp_N,
// branch_x and tag_x are the table's rows and are filtered like it), a write to a protected
// table, a metadata column (_file, _pos, _partition...) or input_file_name() and its block
// siblings where a protected table is read (paths and positions read around the policies),
// a streaming read of one, and a policy whose SQL does not resolve against the table.
package lakeview.sandbox;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

import org.apache.spark.sql.AnalysisException;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.QueryPlanningTracker;
import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.Cast;
import org.apache.spark.sql.catalyst.expressions.EvalMode;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.InputFileBlockLength;
import org.apache.spark.sql.catalyst.expressions.InputFileBlockStart;
import org.apache.spark.sql.catalyst.expressions.InputFileName;
import org.apache.spark.sql.catalyst.expressions.Literal$;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.plans.logical.DeleteFromTable;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.LocalLimit;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.MergeIntoTable;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.plans.logical.SubqueryAlias;
import org.apache.spark.sql.catalyst.plans.logical.UpdateTable;
import org.apache.spark.sql.catalyst.plans.logical.V2WriteCommand;
import org.apache.spark.sql.catalyst.streaming.StreamingRelationV2;
import org.apache.spark.sql.connector.catalog.CatalogPlugin;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation;
import scala.Option;
import scala.collection.JavaConverters;
import scala.runtime.AbstractFunction0;
import scala.runtime.AbstractPartialFunction;

public final class RowPolicies {
    private RowPolicies() {}

    /** Why a statement cannot run under the policies: `kind` (metadata, write, file, stream,
     * unresolved), the index of the policy in the list given, and Spark's words if any. */
    public static final class Refused extends RuntimeException {
        private final String kind;
        private final int policy;
        private final String detail;

        Refused(String kind, int policy, String detail) {
            super(kind + " (policy " + policy + ")" + (detail == null ? "" : ": " + detail));
            this.kind = kind;
            this.policy = policy;
            this.detail = detail == null ? "" : detail;
        }

        public String kind() { return kind; }
        public int policy() { return policy; }
        public String detail() { return detail; }
    }

    private static final class Policy {
        final int index;
        final String filter;
        final Map<String, String> masks = new HashMap<>();  // lower-cased column -> SQL

        Policy(int index, String filter) {
            this.index = index;
            this.filter = filter;
        }
    }

    private static final scala.collection.Seq<String> NO_KEYS =
            JavaConverters.asScalaBuffer(new ArrayList<String>()).toList();

    private static final String[] SELECTORS = {"snapshot_id_", "at_timestamp_", "branch_", "tag_"};

    /** `plan` with every read of a protected table replaced, or Refused. `request` is JSON:
     * {"catalogs": [names of the app's catalog in the session], "policies": [{"table":
     * [levels..., name], "row_filter": sql or null, "masks": [[column, sql], ...]}]}. */
    public static LogicalPlan enforce(SparkSession session, LogicalPlan plan, String request) {
        JsonNode root;
        try {
            root = new ObjectMapper().readTree(request);
        } catch (IOException error) {
            throw new UncheckedIOException(error);
        }
        Set<String> catalogs = new HashSet<>();
        root.get("catalogs").forEach(name -> catalogs.add(name.asText()));
        Map<String, Policy> policies = new HashMap<>();
        int index = 0;
        for (JsonNode node : root.get("policies")) {
            List<String> table = new ArrayList<>();
            node.get("table").forEach(level -> table.add(level.asText()));
            JsonNode filter = node.get("row_filter");
            Policy policy = new Policy(index++, filter == null || filter.isNull() ? null : filter.asText());
            for (JsonNode mask : node.get("masks")) {
                policy.masks.put(mask.get(0).asText().toLowerCase(Locale.ROOT), mask.get(1).asText());
            }
            policies.put(key(table), policy);
        }
        if (policies.isEmpty()) {
            return plan;
        }
        return session.withActive(new AbstractFunction0<LogicalPlan>() {
            @Override
            public LogicalPlan apply() {
                refuseAround(plan, catalogs, policies);
                return plan.transformUpWithSubqueries(new AbstractPartialFunction<LogicalPlan, LogicalPlan>() {
                    @Override
                    public boolean isDefinedAt(LogicalPlan node) {
                        return node instanceof DataSourceV2Relation
                                && policyOf((DataSourceV2Relation) node, catalogs, policies) != null;
                    }

                    @Override
                    public LogicalPlan apply(LogicalPlan node) {
                        DataSourceV2Relation relation = (DataSourceV2Relation) node;
                        return protect(session, relation, policyOf(relation, catalogs, policies));
                    }
                });
            }
        });
    }

    private static String key(List<String> parts) {
        StringBuilder out = new StringBuilder();
        for (String part : parts) {
            // Spark resolves names case-insensitively: so does the match (a wrong match only
            // filters more).
            out.append(part.toLowerCase(Locale.ROOT)).append('\u0000');
        }
        return out.toString();
    }

    private static boolean ofCatalog(Option<CatalogPlugin> catalog, Set<String> catalogs) {
        return catalog.isDefined() && catalogs.contains(catalog.get().name());
    }

    /** The policy of the table this relation reads (itself or through a selector), if any. */
    private static Policy policyOf(DataSourceV2Relation relation, Set<String> catalogs, Map<String, Policy> policies) {
        if (!ofCatalog(relation.catalog(), catalogs) || relation.identifier().isEmpty()) {
            return null;
        }
        Identifier identifier = relation.identifier().get();
        List<String> parts = new ArrayList<>(List.of(identifier.namespace()));
        parts.add(identifier.name());
        Policy policy = policies.get(key(parts));
        if (policy != null) {
            return policy;
        }
        Policy parent = policies.get(key(List.of(identifier.namespace())));
        return parent != null && isSelector(identifier.name()) ? parent : null;
    }

    private static boolean isSelector(String name) {
        String lower = name.toLowerCase(Locale.ROOT);
        for (String prefix : SELECTORS) {
            if (lower.startsWith(prefix) && lower.length() > prefix.length()) {
                return true;
            }
        }
        return false;
    }

    /** The refusals, found in one walk of every node (subqueries included). */
    private static void refuseAround(LogicalPlan plan, Set<String> catalogs, Map<String, Policy> policies) {
        Deque<LogicalPlan> plans = new ArrayDeque<>();
        plans.push(plan);
        Policy protectedRead = null;
        boolean filePaths = false;
        while (!plans.isEmpty()) {
            LogicalPlan node = plans.pop();
            for (LogicalPlan target : targets(node)) {
                if (target instanceof DataSourceV2Relation) {
                    Policy policy = policyOf((DataSourceV2Relation) target, catalogs, policies);
                    if (policy != null) {
                        throw new Refused("write", policy.index, null);
                    }
                }
            }
            if (node instanceof DataSourceV2Relation) {
                DataSourceV2Relation relation = (DataSourceV2Relation) node;
                Policy policy = policyOf(relation, catalogs, policies);
                Policy parent = metadataParent(relation.catalog(), relation.identifier(), catalogs, policies);
                if (policy == null && parent != null) {
                    throw new Refused("metadata", parent.index, null);
                }
                if (policy != null) {
                    protectedRead = policy;
                    Set<String> columns = new HashSet<>();
                    for (var field : relation.table().columns()) {
                        columns.add(field.name());
                    }
                    for (Attribute attribute : JavaConverters.seqAsJavaList(relation.output())) {
                        if (attribute.metadata().contains("__metadata_col") || !columns.contains(attribute.name())) {
                            throw new Refused("file", policy.index, attribute.name());
                        }
                    }
                }
            } else if (node instanceof StreamingRelationV2) {
                StreamingRelationV2 stream = (StreamingRelationV2) node;
                if (stream.identifier().isDefined()) {
                    Identifier identifier = stream.identifier().get();
                    List<String> parts = new ArrayList<>(List.of(identifier.namespace()));
                    parts.add(identifier.name());
                    Policy policy = ofCatalog(stream.catalog(), catalogs) ? policies.get(key(parts)) : null;
                    if (policy != null) {
                        throw new Refused("stream", policy.index, null);
                    }
                }
            }
            for (Expression expression : JavaConverters.seqAsJavaList(node.expressions())) {
                filePaths = filePaths || expression.exists(new ReadsFilePaths());
            }
            JavaConverters.seqAsJavaList(node.children()).forEach(plans::push);
            JavaConverters.seqAsJavaList(node.subqueries()).forEach(plans::push);
        }
        if (protectedRead != null && filePaths) {
            throw new Refused("file", protectedRead.index, "input_file_name");
        }
    }

    /** Whether an expression names the file a row came from. */
    private static final class ReadsFilePaths extends scala.runtime.AbstractFunction1<Expression, Object> {
        @Override
        public Object apply(Expression expression) {
            return expression instanceof InputFileName || expression instanceof InputFileBlockStart
                    || expression instanceof InputFileBlockLength;
        }
    }

    /** The policy of the table whose metadata table (or other one-level-deeper name) this is. */
    private static Policy metadataParent(
            Option<CatalogPlugin> catalog, Option<Identifier> identifier, Set<String> catalogs,
            Map<String, Policy> policies) {
        if (!ofCatalog(catalog, catalogs) || identifier.isEmpty()) {
            return null;
        }
        return policies.get(key(List.of(identifier.get().namespace())));
    }

    /** The tables a node writes to (a write's target, an unrewritten UPDATE/DELETE/MERGE's). */
    private static List<LogicalPlan> targets(LogicalPlan node) {
        List<LogicalPlan> found = new ArrayList<>();
        if (node instanceof V2WriteCommand) {
            Object table = ((V2WriteCommand) node).table();
            if (table instanceof LogicalPlan) {
                found.add(unaliased((LogicalPlan) table));
            }
        } else if (node instanceof UpdateTable) {
            found.add(unaliased(((UpdateTable) node).table()));
        } else if (node instanceof DeleteFromTable) {
            found.add(unaliased(((DeleteFromTable) node).table()));
        } else if (node instanceof MergeIntoTable) {
            found.add(unaliased(((MergeIntoTable) node).targetTable()));
        }
        return found;
    }

    private static LogicalPlan unaliased(LogicalPlan plan) {
        while (plan instanceof SubqueryAlias) {
            plan = ((SubqueryAlias) plan).child();
        }
        return plan;
    }

    /** The relation under its policy, resolved, with the relation's own output. */
    private static LogicalPlan protect(SparkSession session, DataSourceV2Relation relation, Policy policy) {
        DataSourceV2Relation fresh = relation.newInstance();
        List<AttributeReference> original = JavaConverters.seqAsJavaList(relation.output());
        List<AttributeReference> raw = JavaConverters.seqAsJavaList(fresh.output());
        Set<String> masked = new HashSet<>();
        List<NamedExpression> columns = new ArrayList<>();
        try {
            for (int i = 0; i < original.size(); i++) {
                AttributeReference column = original.get(i);
                String mask = policy.masks.get(column.name().toLowerCase(Locale.ROOT));
                Expression value = raw.get(i);
                if (mask != null) {
                    masked.add(column.name().toLowerCase(Locale.ROOT));
                    value = new Cast(parse(session, mask), column.dataType(), Option.empty(),
                            EvalMode.fromSQLConf(session.sessionState().conf()));
                }
                columns.add(new Alias(value, column.name(), column.exprId(), column.qualifier(),
                        Option.apply(column.metadata()), NO_KEYS));
            }
            for (String column : policy.masks.keySet()) {
                if (!masked.contains(column)) {
                    throw new Refused("unresolved", policy.index, "the table has no column " + column);
                }
            }
            LogicalPlan below = fresh;
            if (policy.filter != null) {
                below = new LocalLimit(Literal$.MODULE$.apply(Integer.MAX_VALUE),
                        new Filter(parse(session, policy.filter), fresh));
            }
            LogicalPlan project = new Project(JavaConverters.asScalaBuffer(columns).toList(), below);
            LogicalPlan resolved = session.sessionState().analyzer()
                    .executeAndCheck(project, new QueryPlanningTracker(Option.empty()));
            List<Attribute> output = JavaConverters.seqAsJavaList(resolved.output());
            for (int i = 0; i < original.size(); i++) {
                if (!output.get(i).exprId().equals(original.get(i).exprId())) {
                    throw new IllegalStateException("a policy's projection lost a column's exprId");
                }
            }
            return resolved;
        } catch (AnalysisException error) {  // ParseException among them
            throw new Refused("unresolved", policy.index, error.getSimpleMessage());
        }
    }

    /** Spark's parse of the policy's SQL (a ParseException is an AnalysisException). */
    private static Expression parse(SparkSession session, String sql) throws AnalysisException {
        return session.sessionState().sqlParser().parseExpression(sql);
    }
}

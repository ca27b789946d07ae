// What the sandbox (refresh/spark/sandbox.py) needs to know about an analyzed Spark plan,
// read in the JVM in one call: every plan node and every expression, with the catalog and
// identifier of each relation, the target of each write, and the class of each function.
// The policy (what is allowed) lives in Python; this file only describes. Facts that say
// the same thing (the same kind of node in the same view) are listed once, at their first
// place: the answer stays small (py4j answers over ~8 KB wait ~40 ms on TCP's delayed ACK).
//
// Why Java: walking a plan node by node over py4j costs a round trip per node and field
// (about a millisecond a node on two cores), and TreeNode.toJSON drops the relations'
// catalogs and identifiers. Compiled by scripts/build_jars.sh into var/jars/.
package lakeview.sandbox;

import java.util.ArrayDeque;
import java.util.Deque;
import java.util.LinkedHashMap;
import java.util.Map;

import org.apache.spark.sql.catalyst.FunctionIdentifier;
import org.apache.spark.sql.catalyst.analysis.FunctionRegistry;
import org.apache.spark.sql.catalyst.analysis.TableFunctionRegistry;
import org.apache.spark.sql.catalyst.expressions.ApplyFunctionExpression;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.ExpressionInfo;
import org.apache.spark.sql.catalyst.expressions.UserDefinedExpression;
import org.apache.spark.sql.catalyst.expressions.aggregate.V2Aggregator;
import org.apache.spark.sql.catalyst.expressions.objects.Invoke;
import org.apache.spark.sql.catalyst.expressions.objects.StaticInvoke;
import org.apache.spark.sql.catalyst.plans.logical.Command;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.plans.logical.V2WriteCommand;
import org.apache.spark.sql.catalyst.plans.logical.View;
import org.apache.spark.sql.catalyst.plans.logical.SubqueryAlias;
import org.apache.spark.sql.catalyst.streaming.StreamingRelationV2;
import org.apache.spark.sql.catalyst.trees.Origin;
import org.apache.spark.sql.connector.catalog.CatalogPlugin;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation;

public final class PlanFacts {
    private PlanFacts() {}

    /** Where a node sits: inside which catalog view (the outermost, and where the query
     * names it) and inside which temporary view. */
    private static final class Scope {
        final String view;
        final String viewLine;
        final String viewPosition;
        final String tempView;

        Scope(String view, String viewLine, String viewPosition, String tempView) {
            this.view = view;
            this.viewLine = viewLine;
            this.viewPosition = viewPosition;
            this.tempView = tempView;
        }
    }

    private static final class Frame {
        final LogicalPlan plan;
        final Scope scope;

        Frame(LogicalPlan plan, Scope scope) {
            this.plan = plan;
            this.scope = scope;
        }
    }

    /** Every kind of node of `plan` (subqueries included) and of expression, as a JSON array
     * whose first item is the plan's root. */
    public static String describe(LogicalPlan plan) {
        Map<String, String> facts = new LinkedHashMap<>();
        Deque<Frame> plans = new ArrayDeque<>();
        plans.push(new Frame(plan, new Scope(null, null, null, null)));
        while (!plans.isEmpty()) {
            Frame frame = plans.pop();
            LogicalPlan node = frame.plan;
            Scope scope = frame.scope;
            StringBuilder fact = new StringBuilder("\"kind\":\"plan\"");
            planNode(fact, node);
            add(facts, fact, node.origin(), scope);
            Scope inner = scope;
            if (node instanceof View && ((View) node).isTempView() && scope.tempView == null) {
                inner = new Scope(scope.view, scope.viewLine, scope.viewPosition,
                        ((View) node).desc().identifier().unquotedString());
            } else if (node instanceof SubqueryAlias && scope.view == null
                    && isViewBody((SubqueryAlias) node)) {
                // A catalog view's body. Positions inside it are the view's own text's, so a
                // refusal there points at where the statement names the view.
                Origin origin = node.origin();
                inner = new Scope(((SubqueryAlias) node).identifier().toString(),
                        origin.line().isDefined() ? origin.line().get().toString() : null,
                        origin.startPosition().isDefined()
                                ? origin.startPosition().get().toString() : null,
                        scope.tempView);
            }
            scala.collection.Iterator<LogicalPlan> children = node.children().iterator();
            while (children.hasNext()) {
                plans.push(new Frame(children.next(), inner));
            }
            scala.collection.Iterator<LogicalPlan> subqueries = node.subqueries().iterator();
            while (subqueries.hasNext()) {
                plans.push(new Frame(subqueries.next(), scope));
            }
            Deque<Expression> expressions = new ArrayDeque<>();
            scala.collection.Iterator<Expression> top = node.expressions().iterator();
            while (top.hasNext()) {
                expressions.push(top.next());
            }
            while (!expressions.isEmpty()) {
                Expression expression = expressions.pop();
                StringBuilder described = new StringBuilder("\"kind\":\"expression\"");
                expressionNode(described, expression);
                add(facts, described, expression.origin(), scope);
                scala.collection.Iterator<Expression> nested = expression.children().iterator();
                while (nested.hasNext()) {
                    expressions.push(nested.next());
                }
            }
        }
        return "[" + String.join(",", facts.values()) + "]";
    }

    /** The fact with its scope, unless an equal one is listed; its position is the first. */
    private static void add(Map<String, String> facts, StringBuilder fact, Origin origin, Scope scope) {
        if (scope.view != null) {
            fact.append(",\"view\":");
            string(fact, scope.view);
        }
        if (scope.tempView != null) {
            fact.append(",\"temp_view\":");
            string(fact, scope.tempView);
        }
        String key = fact.toString();
        if (facts.containsKey(key)) {
            return;
        }
        if (origin.line().isDefined() && origin.startPosition().isDefined()) {
            fact.append(",\"line\":").append(origin.line().get());
            fact.append(",\"position\":").append(origin.startPosition().get());
        }
        if (scope.view != null && scope.viewLine != null && scope.viewPosition != null) {
            fact.append(",\"view_line\":").append(scope.viewLine);
            fact.append(",\"view_position\":").append(scope.viewPosition);
        }
        facts.put(key, "{" + fact + "}");
    }

    /** Iceberg resolves a catalog view to SubqueryAlias(name, Project(casts to the view's
     * schema, the view's query)), both made while resolving the reference, so both carry the
     * reference's position; the query below carries positions in the view's own text. A
     * derived table's alias and its SELECT never start at the same position. */
    private static boolean isViewBody(SubqueryAlias alias) {
        LogicalPlan child = alias.child();
        if (!(child instanceof Project)) {
            return false;
        }
        Origin outer = alias.origin();
        Origin inner = child.origin();
        return outer.line().isDefined() && outer.startPosition().isDefined()
                && outer.line().equals(inner.line())
                && outer.startPosition().equals(inner.startPosition());
    }

    /** The built-in functions and table functions: one "name\tclass" line each. */
    public static String builtinFunctions() {
        StringBuilder out = new StringBuilder();
        FunctionRegistry registry = FunctionRegistry.builtin();
        scala.collection.Iterator<FunctionIdentifier> names = registry.listFunction().iterator();
        while (names.hasNext()) {
            FunctionIdentifier name = names.next();
            scala.Option<ExpressionInfo> info = registry.lookupFunction(name);
            if (info.isDefined()) {
                out.append(name.funcName()).append('\t').append(info.get().getClassName()).append('\n');
            }
        }
        TableFunctionRegistry tables = TableFunctionRegistry.builtin();
        scala.collection.Iterator<FunctionIdentifier> tableNames = tables.listFunction().iterator();
        while (tableNames.hasNext()) {
            FunctionIdentifier name = tableNames.next();
            scala.Option<ExpressionInfo> info = tables.lookupFunction(name);
            if (info.isDefined()) {
                out.append(name.funcName()).append('\t').append(info.get().getClassName()).append('\n');
            }
        }
        return out.toString();
    }

    private static void planNode(StringBuilder out, LogicalPlan node) {
        out.append(",\"class\":");
        string(out, node.getClass().getName());
        out.append(",\"leaf\":").append(node.children().isEmpty());
        out.append(",\"command\":").append(node instanceof Command);
        if (node instanceof DataSourceV2Relation) {
            DataSourceV2Relation relation = (DataSourceV2Relation) node;
            relation(out, relation.catalog(), relation.identifier(), relation.table().name());
        } else if (node instanceof StreamingRelationV2) {
            StreamingRelationV2 relation = (StreamingRelationV2) node;
            relation(out, relation.catalog(), relation.identifier(), relation.sourceName());
        } else if (node instanceof View) {
            View view = (View) node;
            out.append(",\"temp\":").append(view.isTempView());
            out.append(",\"name\":");
            string(out, view.desc().identifier().unquotedString());
        } else if (node instanceof SubqueryAlias) {
            out.append(",\"name\":");
            string(out, ((SubqueryAlias) node).identifier().toString());
        }
        if (node instanceof V2WriteCommand) {
            Object target = ((V2WriteCommand) node).table();
            out.append(",\"target\":{\"class\":");
            string(out, target.getClass().getName());
            if (target instanceof DataSourceV2Relation) {
                DataSourceV2Relation relation = (DataSourceV2Relation) target;
                relation(out, relation.catalog(), relation.identifier(), relation.table().name());
            }
            out.append('}');
        }
    }

    private static void relation(
            StringBuilder out,
            scala.Option<CatalogPlugin> catalog,
            scala.Option<Identifier> identifier,
            String tableName) {
        if (catalog.isDefined()) {
            out.append(",\"catalog\":");
            string(out, catalog.get().name());
            out.append(",\"catalog_class\":");
            string(out, catalog.get().getClass().getName());
        }
        if (identifier.isDefined()) {
            out.append(",\"identifier\":[");
            for (String level : identifier.get().namespace()) {
                string(out, level);
                out.append(',');
            }
            string(out, identifier.get().name());
            out.append(']');
        }
        out.append(",\"table\":");
        string(out, tableName);
    }

    private static void expressionNode(StringBuilder out, Expression expression) {
        out.append(",\"class\":");
        string(out, expression.getClass().getName());
        out.append(",\"udf\":").append(expression instanceof UserDefinedExpression);
        out.append(",\"name\":");
        String name;
        try {
            name = expression instanceof UserDefinedExpression
                    ? ((UserDefinedExpression) expression).name()
                    : expression.prettyName();
        } catch (RuntimeException error) {
            name = expression.nodeName();
        }
        string(out, name);
        if (expression instanceof StaticInvoke) {
            out.append(",\"target\":");
            string(out, ((StaticInvoke) expression).staticObject().getName());
        } else if (expression instanceof Invoke) {
            out.append(",\"target\":");
            string(out, ((Invoke) expression).targetObject().dataType().catalogString());
        } else if (expression instanceof ApplyFunctionExpression) {
            out.append(",\"target\":");
            string(out, ((ApplyFunctionExpression) expression).function().getClass().getName());
        } else if (expression instanceof V2Aggregator) {
            out.append(",\"target\":");
            string(out, ((V2Aggregator<?, ?>) expression).aggrFunc().getClass().getName());
        }
    }

    private static void string(StringBuilder out, String text) {
        out.append('"');
        if (text != null) {
            for (int i = 0; i < text.length(); i++) {
                char c = text.charAt(i);
                switch (c) {
                    case '"': out.append("\\\""); break;
                    case '\\': out.append("\\\\"); break;
                    default:
                        if (c < 0x20) {
                            out.append(String.format("\\u%04x", (int) c));
                        } else {
                            out.append(c);
                        }
                }
            }
        }
        out.append('"');
    }
}

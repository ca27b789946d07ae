"""The sandbox every user statement passes through before Spark runs it. Django-free.

SQL a user writes (a materialized table's query, a console UPDATE / DELETE / MERGE, a view's
SQL behind a preview) runs inside the refresh workers' Spark, which can read any file the
worker can. Two layers keep it to the catalog's own tables:

1. **Configuration.** Every session the app builds has `spark.sql.runSQLOnFiles=false`
   and `spark.sql.variable.substitute=false` (`SANDBOX_SETTINGS`, applied last, after any
   run option): Spark no longer reads ``text.`/path` `` or ``parquet.`file://...` ``, not
   even to infer a schema, nor puts ``${env:...}`` or ``${system:...}`` into the text.
2. **Spark's own plan.** User text is never handed to `session.sql`, which would run a
   command (SET, ADD JAR, CREATE FUNCTION, INSERT...) before anyone could look at it. It is
   parsed by Spark's parser (one statement only), analyzed with commands *not* executed,
   and the analyzed logical plan is described by the JVM helper `lakeview.sandbox.PlanFacts`
   (`jvm/PlanFacts.java`: every plan node and expression, each relation's catalog and
   identifier, each write's target). `check` then refuses, naming what and where:
   - a relation that is not a table or view of the app's catalog (files, the session
     catalog, other catalogs, temporary views other than the app's own);
   - a function outside `ALLOWED_FUNCTIONS` (no reflect, java_method, xpath...), any
     user-defined function, a catalog function other than Iceberg's own;
   - any command, or plan node outside the query shapes in `QUERY_NODES`;
   - a data change whose target is not exactly the table named.
   Only then does the *checked* plan run (`Dataset.ofRows` of the analyzed plan: what ran
   is what was checked, with no second parse in between).

The sqlglot-level checks of the web side stay as a fast first pass with line and column;
this one is the check that cannot be read around, since it is Spark's own reading."""

from __future__ import annotations

import contextlib
import json
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from catalog.core.spark_functions import ALLOWED_FUNCTIONS

# ALIASES_SETTING and SandboxRefused are read here by their callers (the policies module
# below needs them too, so they live beneath both).
from runtime.spark.aliases import ALIASES_SETTING as ALIASES_SETTING
from runtime.spark.aliases import aliases_of
from runtime.spark.errors import SandboxRefused
from runtime.spark.policies import current, enforce

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from catalog.core.policies import TablePolicy

#: Settings every session of the app has, applied after anything else (run options too).
#: runSQLOnFiles: no ``text.`/path` ``. variable.substitute: Spark's parser would otherwise
#: rewrite ``${env:X}``, ``${system:X}`` and ``${<any setting>}`` in the statement's text
#: into the worker's environment variables, JVM properties and settings (the catalog's
#: credential among them) before any plan exists: the plan then holds a harmless-looking
#: literal. The parser reads it from the thread's active session, so every session has it.
SANDBOX_SETTINGS: dict[str, str] = {
    "spark.sql.runSQLOnFiles": "false",
    "spark.sql.variable.substitute": "false",
}


#: Expression classes refused whatever the function registry says about them.
DENIED_EXPRESSIONS = frozenset(
    {
        "org.apache.spark.sql.catalyst.expressions.CallMethodViaReflection",
        "org.apache.spark.sql.catalyst.expressions.TryReflect",
    }
)
_DENIED_PACKAGES = ("org.apache.spark.sql.catalyst.expressions.xml.",)

_LOGICAL = "org.apache.spark.sql.catalyst.plans.logical."
#: The plan nodes of a query (what SELECT, joins, set operations, CTEs, windows, LATERAL
#: VIEW, hints, sampling and inline tables analyze to). Anything else is refused.
_QUERY_NODE_NAMES = """
    Project Filter Aggregate Join LateralJoin Union Intersect Except Sort GlobalLimit
    LocalLimit Offset Tail Distinct Deduplicate Window Generate SubqueryAlias WithCTE
    CTERelationDef CTERelationRef Expand Sample RepartitionByExpression Repartition
    RebalancePartitions ResolvedHint OneRowRelation LocalRelation Range View
"""
QUERY_NODES = frozenset(_LOGICAL + name for name in _QUERY_NODE_NAMES.split())
#: What a data change analyzes to in Spark 3.5 for Iceberg: ReplaceData (copy-on-write),
#: WriteDelta (merge-on-read), AppendData (a MERGE that only inserts). Its target must be
#: the table named; the console's parser lets only UPDATE, DELETE and MERGE through.
ROW_LEVEL_WRITES = frozenset(
    {_LOGICAL + "ReplaceData", _LOGICAL + "WriteDelta", _LOGICAL + "AppendData"}
)
_DATA_CHANGE_NODES = frozenset({_LOGICAL + "MergeRows"})
_RELATION = "org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation"
_STREAM = "org.apache.spark.sql.catalyst.streaming.StreamingRelationV2"
_ICEBERG_CATALOGS = frozenset({"org.apache.iceberg.spark.SparkCatalog"})
_EXPRESSIONS = "org.apache.spark.sql.catalyst.expressions."
_OBJECT_CALLS = frozenset(
    {
        _EXPRESSIONS + "objects.StaticInvoke",
        _EXPRESSIONS + "objects.Invoke",
    }
)
_CATALOG_FUNCTIONS = frozenset(
    {_EXPRESSIONS + "ApplyFunctionExpression", _EXPRESSIONS + "aggregate.V2Aggregator"}
)
#: What Spark's built-in expressions call inside (static helpers of Spark itself), and
#: Iceberg's own catalog functions (system.bucket, system.days...).
_TRUSTED_CALL_TARGETS = ("org.apache.spark.", "org.apache.iceberg.spark.functions.")
_MERGE_INSTRUCTIONS = _LOGICAL + "MergeRows$"


@dataclass(frozen=True)
class Policy:
    """What one statement may touch."""

    #: The app's catalog, the only one relations may come from.
    catalog: str
    #: Other names the session gives that catalog (an engine's own name, in its views' SQL).
    aliases: frozenset[str] = frozenset()
    #: class name -> the built-in function names Spark registers for it.
    function_classes: Mapping[str, frozenset[str]] = field(default_factory=dict)
    #: Temporary views the app itself made for this statement (a stream's batch, a load's
    #: pinned sources); their insides were built by the app, not the user.
    trusted_views: frozenset[str] = frozenset()
    #: For a data change: the identifier (namespace levels..., name) it must write to.
    write_target: tuple[str, ...] | None = None


def _short(class_name: str) -> str:
    return class_name.rsplit(".", 1)[-1].rstrip("$")


def _refuse(message: str, fact: Mapping[str, Any]) -> SandboxRefused:
    """The refusal, placed where the user wrote the offending part: in the statement, or at
    the reference to the view whose SQL holds it."""
    if "view" in fact:
        message = f"{message} (in the SQL of view {fact['view']}, which the statement reads)"
        line, position = fact.get("view_line"), fact.get("view_position")
    else:
        line, position = fact.get("line"), fact.get("position")
    if line is None or position is None:
        return SandboxRefused(message)
    return SandboxRefused(message, line=int(line), column=int(position) + 1)


def _relation_name(fact: Mapping[str, Any]) -> str:
    identifier = fact.get("identifier")
    if identifier:
        return ".".join([fact.get("catalog", "?"), *identifier])
    return fact.get("table") or _short(fact["class"])


def _check_relation(fact: Mapping[str, Any], policy: Policy) -> None:
    catalog = fact.get("catalog")
    if (catalog != policy.catalog and catalog not in policy.aliases) or fact.get(
        "catalog_class"
    ) not in _ICEBERG_CATALOGS:
        raise _refuse(
            f"{_relation_name(fact)} is not a table or view of this catalog "
            f"({policy.catalog}): statements read only the catalog's own tables and views",
            fact,
        )


def _check_plan_node(fact: Mapping[str, Any], policy: Policy, *, top: bool) -> None:
    name = fact["class"]
    if name in (_RELATION, _STREAM):
        _check_relation(fact, policy)
        return
    if fact.get("command") or "target" in fact:
        if not (top and policy.write_target is not None and name in ROW_LEVEL_WRITES):
            raise _refuse(
                f"{_short(name)} is a command; only a query may run here"
                if policy.write_target is None
                else f"{_short(name)} is not an UPDATE, DELETE or MERGE of the table",
                fact,
            )
        target = fact.get("target") or {}
        if target.get("class") != _RELATION:
            raise _refuse(f"The statement writes to {_short(target.get('class', '?'))}", fact)
        _check_relation(target, policy)
        if tuple(target.get("identifier") or ()) != policy.write_target:
            raise _refuse(
                f"The statement changes {_relation_name(target)}; only "
                f"{'.'.join([policy.catalog, *policy.write_target])} may be changed here",
                fact,
            )
        return
    if name == _LOGICAL + "View":
        if not fact.get("temp") or fact.get("name") not in policy.trusted_views:
            raise _refuse(
                f"{fact.get('name')} is not a table or view of this catalog ({policy.catalog})",
                fact,
            )
        return
    if name in QUERY_NODES:
        return
    if policy.write_target is not None and name in _DATA_CHANGE_NODES:
        return
    if fact.get("leaf"):
        raise _refuse(
            f"{_short(name)} is not a table or view of this catalog ({policy.catalog})", fact
        )
    raise _refuse(f"{_short(name)} is not allowed in a statement here", fact)


def _check_expression(fact: Mapping[str, Any], policy: Policy, allowed: frozenset[str]) -> None:
    name = fact["class"]
    called = fact.get("name") or _short(name)
    if fact.get("udf"):
        raise _refuse(f"{called} is a user-defined function; only built-in ones may run", fact)
    if name in DENIED_EXPRESSIONS or name.startswith(_DENIED_PACKAGES):
        raise _refuse(f"{called}() is not allowed: it reaches outside the query's data", fact)
    registered = policy.function_classes.get(name)
    if registered is not None:
        if name not in allowed:
            raise _refuse(f"{called}() is not among the functions a statement may call", fact)
        return
    if name in _OBJECT_CALLS or name in _CATALOG_FUNCTIONS:
        target = fact.get("target", "")
        if name in _OBJECT_CALLS and name.endswith(".Invoke"):
            return  # a method of a value built-in expressions compute (no class to name)
        if not target.startswith(_TRUSTED_CALL_TARGETS):
            raise _refuse(f"The function {target or called} is not allowed", fact)
        return
    if name.startswith(_EXPRESSIONS):
        return  # syntax: columns, literals, casts, operators, subqueries, lambdas...
    if policy.write_target is not None and name.startswith(_MERGE_INSTRUCTIONS):
        return
    raise _refuse(f"The expression {_short(name)} is not allowed", fact)


def check(facts: Sequence[Mapping[str, Any]], policy: Policy) -> None:
    """Refuse (SandboxRefused) the first fact of the plan the policy does not allow. The
    insides of the app's own temporary views are not the user's and are skipped."""
    allowed = frozenset(
        name for name, functions in policy.function_classes.items() if functions & ALLOWED_FUNCTIONS
    )
    if not facts:
        raise SandboxRefused("Spark gave no plan for the statement")
    if policy.write_target is not None and facts[0].get("class") not in ROW_LEVEL_WRITES:
        raise _refuse(
            f"Expected an UPDATE, DELETE or MERGE of "
            f"{'.'.join([policy.catalog, *policy.write_target])}",
            facts[0],
        )
    for index, fact in enumerate(facts):
        if fact.get("temp_view") in policy.trusted_views:
            continue
        if fact["kind"] == "plan":
            _check_plan_node(fact, policy, top=index == 0)
        else:
            _check_expression(fact, policy, allowed)


# -- Spark ------------------------------------------------------------------------------------

_registry_lock = threading.Lock()
_registry: dict[str, frozenset[str]] | None = None


def function_classes(spark: SparkSession) -> dict[str, frozenset[str]]:
    """Spark's built-in functions by expression class (read once per process)."""
    global _registry
    with _registry_lock:
        if _registry is None:
            by_class: dict[str, set[str]] = {}
            for line in _helper(spark).builtinFunctions().splitlines():
                name, _, class_name = line.partition("\t")
                by_class.setdefault(class_name, set()).add(name)
            _registry = {key: frozenset(names) for key, names in by_class.items()}
        return _registry


def _helper(spark: SparkSession) -> Any:
    """The JVM class `lakeview.sandbox.PlanFacts`; refused when the jar is missing, so that
    no statement runs unchecked."""
    helper = spark._jvm.lakeview.sandbox.PlanFacts  # noqa: SLF001 - py4j's entry point
    if type(helper).__name__ != "JavaClass":  # py4j's JavaPackage: no such class
        raise SandboxRefused(
            "The Spark sandbox's helper (lakeview-sandbox.jar) is not on Spark's classpath; "
            "run scripts/build_sandbox_jar.sh"
        )
    return helper


def harden(session: SparkSession) -> SparkSession:
    """Apply `SANDBOX_SETTINGS` to the session (last, so nothing overrides them)."""
    for key, value in SANDBOX_SETTINGS.items():
        session.conf.set(key, value)
    return session


def policy_for(
    spark: SparkSession,
    *,
    catalog: str,
    trusted_views: Iterable[str] = (),
    write_target: Sequence[str] | None = None,
) -> Policy:
    return Policy(
        catalog=catalog,
        aliases=aliases_of(spark),
        function_classes=function_classes(spark),
        trusted_views=frozenset(trusted_views),
        write_target=tuple(write_target) if write_target is not None else None,
    )


def facts_of(spark: SparkSession, plan: Any) -> list[dict[str, Any]]:
    """The analyzed plan described by the JVM helper. A view named through one of the
    session's names for the catalog (`lake.shop.v`, ALIASES_SETTING) is marked
    `catalog_alias`: `read_places` reads it as the catalog's own, as Spark resolved it."""
    facts = json.loads(_helper(spark).describe(plan))
    aliases = aliases_of(spark)
    for fact in facts if aliases else ():
        if fact.get("kind") == "plan" and "view" in fact:
            parts = _identifier_parts(str(fact["view"]))
            fact["catalog_alias"] = len(parts) > 1 and parts[0] in aliases
    return facts


def _analyzed(session: SparkSession, sql: str) -> Any:
    """`sql` parsed by Spark (one statement) and analyzed without running any command."""
    return analyze(session, parse(session, sql))


def parse(session: SparkSession, sql: str) -> Any:
    """`sql` parsed by Spark's parser (one statement), nothing resolved: the plan whose kind
    says what the statement is (a query, EXPLAIN, DESCRIBE...)."""
    if not isinstance(sql, str) or not sql.strip():
        raise SandboxRefused("The statement is empty")
    if "\x00" in sql:
        raise SandboxRefused("The statement holds a NUL character")
    harden(session)
    with _refusals():
        return session._jsparkSession.sessionState().sqlParser().parsePlan(sql)  # noqa: SLF001


def analyze(session: SparkSession, parsed: Any) -> Any:
    """A parsed plan analyzed with commands *not* run (CommandExecutionMode.SKIP)."""
    harden(session)
    jsession = session._jsparkSession  # noqa: SLF001
    jvm = session._jvm  # noqa: SLF001
    skip = (
        getattr(jvm.org.apache.spark.sql.execution, "CommandExecutionMode$")
        .__getattr__("MODULE$")
        .SKIP()
    )
    with _refusals():
        return jsession.sessionState().executePlan(parsed, skip).analyzed()


@contextlib.contextmanager
def _refusals() -> Iterator[None]:
    """Spark's parse and analysis errors (Iceberg's included) as the user's SqlError."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors.exceptions.captured import CapturedException

    from runtime.spark.errors import spark_error

    try:
        yield
    except CapturedException as error:
        raise spark_error(error) from None
    except Py4JJavaError as error:
        # Spark failing on the statement while analyzing it (a SparkException with error
        # class INTERNAL_ERROR, which PySpark does not convert): refused as Spark read it,
        # a 400. Anything else (the catalog unreachable...) stays the failure it was.
        java = error.java_exception
        if (
            java.getClass().getName() != "org.apache.spark.SparkException"
            or str(java.getErrorClass()) != "INTERNAL_ERROR"
        ):
            raise
        raise spark_error(Exception(str(java.getMessage()))) from None


def reads(
    facts: Sequence[Mapping[str, Any]], catalog: str, *, namespace: Sequence[str] = ()
) -> list[tuple[str, ...]]:
    """What a checked plan reads, as (namespace levels..., name): each table read outside any
    view, and each catalog view it reads (not the tables inside the view's SQL), in the order
    the statement names them. A view named by its name alone is in `namespace`, the
    session's current one."""
    return list(read_places(facts, catalog, namespace=namespace))


def read_places(
    facts: Sequence[Mapping[str, Any]], catalog: str, *, namespace: Sequence[str] = ()
) -> dict[tuple[str, ...], tuple[int | None, int | None]]:
    """`reads`, each with where the statement first names it: Spark's line (1-based) and
    position in that line (0-based), None where the plan does not say."""
    found: dict[tuple[str, ...], tuple[int, int, int]] = {}
    for index, fact in enumerate(facts):
        if fact.get("kind") != "plan":
            continue
        if "view" in fact:
            parts = _identifier_parts(str(fact["view"]))
            if len(parts) > 1 and (parts[0] == catalog or fact.get("catalog_alias")):
                parts = parts[1:]
            if len(parts) == 1:
                parts = [*namespace, *parts]
            where = (fact.get("view_line"), fact.get("view_position"))
        elif fact.get("class") in (_RELATION, _STREAM) and fact.get("identifier"):
            parts = list(fact["identifier"])
            where = (fact.get("line"), fact.get("position"))
        else:
            continue
        # The plan's facts come right side first; where the statement names each orders them.
        at = (
            (int(where[0]), int(where[1]), index)
            if None not in where
            else (sys.maxsize, sys.maxsize, index)
        )
        found[tuple(parts)] = min(found.get(tuple(parts), at), at)
    return {
        parts: (None, None) if at[0] == sys.maxsize else (at[0], at[1])
        for parts, at in sorted(found.items(), key=lambda item: item[1])
    }


def _identifier_parts(text: str) -> list[str]:
    """Spark's quoted multi-part name (`a.b`, or `` `a.b`.c `` with doubled backticks) as its
    parts."""
    parts: list[str] = []
    current: list[str] = []
    quoted = False
    index = 0
    while index < len(text):
        char = text[index]
        if quoted:
            if char == "`" and text[index + 1 : index + 2] == "`":
                current.append("`")
                index += 1
            elif char == "`":
                quoted = False
            else:
                current.append(char)
        elif char == "`":
            quoted = True
        elif char == ".":
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
        index += 1
    parts.append("".join(current))
    return parts


def query(
    session: SparkSession,
    sql: str,
    *,
    catalog: str,
    trusted_views: Iterable[str] = (),
    policies: Sequence[TablePolicy] | None = None,
) -> DataFrame:
    """The DataFrame of a user's query, once Spark's analyzed plan passed `check`; the
    tables `policies` name are read through them (runtime.spark.policies)."""
    from pyspark.sql import DataFrame

    plan = enforce(session, _analyzed(session, sql), current(policies), catalog=catalog)
    check(
        facts_of(session, plan), policy_for(session, catalog=catalog, trusted_views=trusted_views)
    )
    dataset = session._jvm.org.apache.spark.sql.Dataset.ofRows(  # noqa: SLF001
        session._jsparkSession,  # noqa: SLF001
        plan,
    )
    return DataFrame(dataset, session)


def check_frame(
    frame: DataFrame,
    *,
    catalog: str,
    trusted_views: Iterable[str] = (),
    policies: Sequence[TablePolicy] | None = None,
) -> DataFrame:
    """Check a DataFrame the app built (a preview's reads and filters) as a query; with
    `policies`, the DataFrame of its plan reading the tables they name through them."""
    from pyspark.sql import DataFrame

    session = frame.sparkSession
    analyzed = frame._jdf.queryExecution().analyzed()  # noqa: SLF001
    plan = enforce(session, analyzed, current(policies), catalog=catalog)
    check(
        facts_of(session, plan), policy_for(session, catalog=catalog, trusted_views=trusted_views)
    )
    if plan is analyzed:
        return frame
    dataset = session._jvm.org.apache.spark.sql.Dataset.ofRows(  # noqa: SLF001
        session._jsparkSession,  # noqa: SLF001
        plan,
    )
    return DataFrame(dataset, session)


def data_change(
    session: SparkSession,
    sql: str,
    *,
    catalog: str,
    target: Sequence[str],
    properties: Mapping[str, str] | None = None,
    checked: Callable[[list], None] | None = None,
    policies: Sequence[TablePolicy] | None = None,
) -> None:
    """Run an UPDATE, DELETE or MERGE whose target must be exactly `target` (namespace
    levels..., name), once Spark's analyzed plan passed `check` and `checked(facts)` (what
    the plan reads, asked of its user's grants) raised nothing; its commit adds
    `properties` to the snapshot's summary. The tables `policies` name are read through
    them, and one of them as the target is refused (runtime.spark.policies)."""
    from pyspark.errors import AnalysisException

    from runtime.spark.commits import run_plan
    from runtime.spark.errors import spark_error

    plan = enforce(session, _analyzed(session, sql), current(policies), catalog=catalog)
    facts = facts_of(session, plan)
    check(facts, policy_for(session, catalog=catalog, write_target=target))
    if checked is not None:
        checked(facts)
    try:
        run_plan(session, plan, properties or {})
    except AnalysisException as error:
        raise spark_error(error) from None

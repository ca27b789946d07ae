"""A console query in the workers' Spark, read-only, through the sandbox. Django-free.

What runs: a query (SELECT, WITH ... SELECT, VALUES, TABLE, FROM ... SELECT, time travel
with FOR VERSION / FOR TIMESTAMP AS OF), DESCRIBE [TABLE] and SHOW COLUMNS of a table or
view, DESCRIBE QUERY, and EXPLAIN of a query. Spark's parser says which of them a
statement is; then every plan is analyzed with commands not run and checked by the sandbox
as a query (refresh.spark.sandbox: the app's catalog only, allow-listed functions, no
command, no write), before a row or a plan is read:

- a query's checked plan is what runs (`Dataset.ofRows`), as `sandbox.query` does;
- EXPLAIN's inner statement is checked as a query, and its plan text is Spark's own
  (`QueryExecution.explainString` in the mode asked for): planned, never run;
- DESCRIBE and SHOW COLUMNS read the table or view as `SELECT *` would (so a view whose SQL
  the sandbox refuses is refused here too), and answer its columns without running it.

`prepare` does all of that and says what the statement reads (`reads`: the tables and
views it names), so that the caller decides whether its user may read them before any row
is fetched (`fetch`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from refresh.spark import sandbox
from refresh.spark.batch import quote

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

_LOGICAL = "org.apache.spark.sql.catalyst.plans.logical."
_COMMAND = "org.apache.spark.sql.execution.command."
EXPLAIN = _COMMAND + "ExplainCommand"
DESCRIBE_TABLE = _LOGICAL + "DescribeRelation"
DESCRIBE_COLUMN = _LOGICAL + "DescribeColumn"
DESCRIBE_QUERY = _COMMAND + "DescribeQueryCommand"
SHOW_COLUMNS = _LOGICAL + "ShowColumns"


@dataclass
class Prepared:
    """A statement checked and ready: its kind, its columns (name, Spark SQL type), what it
    reads, and either the DataFrame whose rows `fetch` reads or the rows known already."""

    kind: str
    columns: list[tuple[str, str]]
    reads: list[tuple[str, ...]]
    frame: DataFrame | None = None
    rows: list[list[Any]] = field(default_factory=list)


def prepare(session: SparkSession, sql: str, *, catalog: str) -> Prepared:
    """Parse, analyze and check `sql` (a SqlError / SandboxRefused otherwise, with Spark's
    line and column); nothing is read yet but the catalog's metadata."""
    parsed = sandbox.parse(session, sql)
    name = parsed.getClass().getName()
    if name == EXPLAIN:
        return _explain(session, parsed, catalog)
    if name == DESCRIBE_QUERY:
        frame, facts = _checked(session, parsed.plan(), catalog)
        return _described(frame, facts, catalog, kind="DESCRIBE")
    if name in (DESCRIBE_TABLE, SHOW_COLUMNS):
        return _columns_of(session, parsed, catalog, show_columns=name == SHOW_COLUMNS)
    if name == DESCRIBE_COLUMN:
        raise sandbox.SandboxRefused(
            "DESCRIBE of one column is not supported here; DESCRIBE the table or view"
        )
    frame, facts = _checked(session, parsed, catalog)
    return Prepared(
        kind="SELECT",
        columns=[(f.name, f.dataType.simpleString()) for f in frame.schema.fields],
        reads=sandbox.reads(facts, catalog),
        frame=frame,
    )


def _checked(session: SparkSession, parsed: Any, catalog: str) -> tuple[DataFrame, list]:
    """The DataFrame of exactly the plan the sandbox checked as a query."""
    from pyspark.sql import DataFrame

    analyzed = sandbox.analyze(session, parsed)
    facts = sandbox.facts_of(session, analyzed)
    sandbox.check(facts, sandbox.policy_for(session, catalog=catalog))
    dataset = session._jvm.org.apache.spark.sql.Dataset.ofRows(  # noqa: SLF001
        session._jsparkSession,  # noqa: SLF001
        analyzed,
    )
    return DataFrame(dataset, session), facts


def _explain(session: SparkSession, parsed: Any, catalog: str) -> Prepared:
    frame, facts = _checked(session, parsed.logicalPlan(), catalog)
    with sandbox._refusals():  # noqa: SLF001 - planning may refuse what analysis let by
        text = frame._jdf.queryExecution().explainString(parsed.mode())  # noqa: SLF001
    return Prepared(
        kind="EXPLAIN",
        columns=[("plan", "string")],
        reads=sandbox.reads(facts, catalog),
        rows=[[str(text)]],
    )


def _columns_of(
    session: SparkSession, parsed: Any, catalog: str, *, show_columns: bool
) -> Prepared:
    """DESCRIBE [TABLE] name / SHOW COLUMNS {FROM | IN} name [{FROM | IN} namespace]: the
    table or view read as `SELECT *` reads it, through the same checks."""
    jvm = session._jvm  # noqa: SLF001
    relation = parsed.child() if show_columns else parsed.relation()
    identifier = list(
        jvm.scala.collection.JavaConverters.seqAsJavaListConverter(
            relation.multipartIdentifier()
        ).asJava()
    )
    if show_columns and parsed.namespace().isDefined():
        namespace = list(
            jvm.scala.collection.JavaConverters.seqAsJavaListConverter(
                parsed.namespace().get()
            ).asJava()
        )
        identifier = [*namespace, identifier[-1]] if len(identifier) == 1 else identifier
    if not show_columns and not parsed.partitionSpec().isEmpty():
        raise sandbox.SandboxRefused("DESCRIBE of a partition is not supported here")
    with sandbox._refusals():  # noqa: SLF001
        frame = session.table(quote([str(part) for part in identifier]))
    plan = frame._jdf.queryExecution().analyzed()  # noqa: SLF001
    facts = sandbox.facts_of(session, plan)
    sandbox.check(facts, sandbox.policy_for(session, catalog=catalog))
    if show_columns:
        return Prepared(
            kind="SHOW COLUMNS",
            columns=[("col_name", "string")],
            reads=sandbox.reads(facts, catalog),
            rows=[[f.name] for f in frame.schema.fields],
        )
    return _described(frame, facts, catalog, kind="DESCRIBE")


def _described(frame: DataFrame, facts: list, catalog: str, *, kind: str) -> Prepared:
    return Prepared(
        kind=kind,
        columns=[("col_name", "string"), ("data_type", "string"), ("comment", "string")],
        reads=sandbox.reads(facts, catalog),
        rows=[
            [f.name, f.dataType.simpleString(), (f.metadata or {}).get("comment")]
            for f in frame.schema.fields
        ],
    )


def fetch(prepared: Prepared, *, max_rows: int) -> pa.Table:
    """The statement's first `max_rows + 1` rows (one more than is kept, so that the caller
    knows whether the result was cut) as an Arrow table, by Spark's own Arrow conversion.
    Columns Arrow or Parquet cannot hold (Spark's calendar and year-month intervals) come
    as Spark's text of them."""
    import pyarrow as pa

    if prepared.frame is None:
        names = [name for name, _ in prepared.columns]
        columns = list(zip(*prepared.rows, strict=True)) if prepared.rows else [()] * len(names)
        arrays = [pa.array(list(values), pa.string()) for values in columns]
        return pa.Table.from_arrays(arrays, names=names)
    frame = _as_text_where_needed(prepared.frame).limit(max_rows + 1)
    batches = frame._collect_as_arrow()  # noqa: SLF001 - Spark 3.5's Arrow collect
    if batches:
        return pa.Table.from_batches(batches)
    return _empty(frame)


def _empty(frame: DataFrame) -> pa.Table:
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    try:
        return to_arrow_schema(frame.schema).empty_table()
    except (TypeError, ValueError, NotImplementedError):  # a type PySpark's side lacks
        return pa.table({f.name: pa.array([], pa.string()) for f in frame.schema.fields})


def _as_text_where_needed(frame: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    fields = frame.schema.fields
    if not any(_needs_text(f.dataType) for f in fields):
        return frame
    # By position: a query's columns may share a name (a join's two ids).
    positional = frame.toDF(*(f"_{index}" for index in range(len(fields))))
    return positional.select(
        *(
            (
                F.col(f"_{index}").cast("string") if _needs_text(f.dataType) else F.col(f"_{index}")
            ).alias(f.name)
            for index, f in enumerate(fields)
        )
    )


def _needs_text(kind: Any) -> bool:
    from pyspark.sql import types as T

    if isinstance(kind, T.CalendarIntervalType | T.YearMonthIntervalType):
        return True
    if isinstance(kind, T.ArrayType):
        return _needs_text(kind.elementType)
    if isinstance(kind, T.MapType):
        return _needs_text(kind.keyType) or _needs_text(kind.valueType)
    if isinstance(kind, T.StructType):
        return any(_needs_text(f.dataType) for f in kind.fields)
    return False

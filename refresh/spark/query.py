"""A console query in the workers' Spark, read-only, through the sandbox. Django-free.

What runs: a query (SELECT, WITH ... SELECT, VALUES, TABLE, FROM ... SELECT, time travel
with FOR VERSION / FOR TIMESTAMP AS OF), DESCRIBE [TABLE] and SHOW COLUMNS of a table or
view, DESCRIBE QUERY, and EXPLAIN of a query. Spark's parser says which of them a
statement is; then every plan is analyzed with commands not run and checked by the sandbox
as a query (runtime.spark.sandbox: the app's catalog only, allow-listed functions, no
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

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from catalog.core.errors import SqlError
from runtime.spark import sandbox
from runtime.spark.policies import enforce
from runtime.spark.session import quote

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from catalog.core.policies import TablePolicy

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
    #: Each read's place in the statement and its name as written there (Spark's words for
    #: it): (line, column (1-based), name), for `not_found`.
    places: dict[tuple[str, ...], tuple[int | None, int | None, str]] = field(default_factory=dict)


#: Spark's TABLE_OR_VIEW_NOT_FOUND, as runtime.spark.errors.spark_error reports it.
NOT_FOUND = (
    "Spark cannot analyze the query: [TABLE_OR_VIEW_NOT_FOUND] The table or view {name} cannot "
    "be found. Verify the spelling and correctness of the schema and catalog."
)


def not_found(prepared: Prepared, read: tuple[str, ...]) -> SqlError:
    """The error Spark gives a statement naming a table or view that is not there, for one
    it reads that its user may not see: the same words, line and column."""
    line, column, name = prepared.places.get(read, (None, None, quote(read)))
    return SqlError(NOT_FOUND.format(name=name), line=line, column=column)


#: A name as a statement writes it: parts, plain or in backticks, joined by dots.
_PART = r"(?:`(?:[^`]|``)*`|[A-Za-z0-9_]+)"
_WRITTEN = re.compile(rf"{_PART}(?:\s*\.\s*{_PART})*")


def _written(sql: str, line: int | None, position: int | None) -> str | None:
    """The name written at Spark's (line, position) of `sql`, as Spark prints a name (each
    part in backticks), or None when nothing there reads as one."""
    if line is None or position is None:
        return None
    lines = sql.split("\n")
    if not 0 < line <= len(lines):
        return None
    found = _WRITTEN.match(lines[line - 1], position)
    if found is None:
        return None
    parts = re.findall(_PART, found.group(0))
    return quote([p[1:-1].replace("``", "`") if p.startswith("`") else p for p in parts])


def places(
    sql: str, facts: list, catalog: str, namespace: Sequence[str]
) -> dict[tuple[str, ...], tuple[int | None, int | None, str]]:
    return {
        read: (line, None if position is None else position + 1, _written(sql, line, position)
               or quote(read))
        for read, (line, position) in sandbox.read_places(
            facts, catalog, namespace=namespace
        ).items()
    }  # fmt: skip


def prepare(
    session: SparkSession,
    sql: str,
    *,
    catalog: str,
    namespace: Sequence[str],
    policies: Sequence[TablePolicy] = (),
) -> Prepared:
    """Parse, analyze and check `sql` (a SqlError / SandboxRefused otherwise, with Spark's
    line and column); nothing is read yet but the catalog's metadata. `namespace` is the
    session's current one (a view named by its name alone is in it), as the caller set it:
    asking the session's catalog manager would load its catalog with the settings of the
    thread's active session, which may be another one. `policies` are the reader's row
    filters and masks: the plan reads the tables they name through them (before the
    sandbox's check, which checks the policies' SQL too), EXPLAIN shows it so, and a
    metadata table of such a table is refused (runtime.spark.policies)."""
    parsed = sandbox.parse(session, sql)
    name = parsed.getClass().getName()
    if name == EXPLAIN:
        return _explain(session, parsed, catalog, namespace, sql, policies)
    if name == DESCRIBE_QUERY:
        frame, facts = _checked(session, parsed.plan(), catalog, policies)
        prepared = _described(
            frame, sandbox.reads(facts, catalog, namespace=namespace), kind="DESCRIBE"
        )
        prepared.places = places(sql, facts, catalog, namespace)
        return prepared
    if name in (DESCRIBE_TABLE, SHOW_COLUMNS):
        return _columns_of(session, parsed, catalog, namespace, show_columns=name == SHOW_COLUMNS)
    if name == DESCRIBE_COLUMN:
        raise sandbox.SandboxRefused(
            "DESCRIBE of one column is not supported here; DESCRIBE the table or view"
        )
    frame, facts = _checked(session, parsed, catalog, policies)
    return Prepared(
        kind="SELECT",
        columns=[(f.name, f.type) for f in _fields(frame)],
        reads=sandbox.reads(facts, catalog, namespace=namespace),
        frame=frame,
        places=places(sql, facts, catalog, namespace),
    )


def _checked(
    session: SparkSession, parsed: Any, catalog: str, policies: Sequence[TablePolicy] = ()
) -> tuple[DataFrame, list]:
    """The DataFrame of exactly the plan the sandbox checked as a query, the tables
    `policies` name read through them."""
    frame, facts, _ = _checked_under(session, parsed, catalog, policies)
    return frame, facts


def _checked_under(
    session: SparkSession, parsed: Any, catalog: str, policies: Sequence[TablePolicy]
) -> tuple[DataFrame, list, bool]:
    """`_checked`, and whether a policy changed the plan."""
    from pyspark.sql import DataFrame

    unfiltered = sandbox.analyze(session, parsed)
    analyzed = enforce(session, unfiltered, policies, catalog=catalog)
    facts = sandbox.facts_of(session, analyzed)
    sandbox.check(facts, sandbox.policy_for(session, catalog=catalog))
    dataset = session._jvm.org.apache.spark.sql.Dataset.ofRows(  # noqa: SLF001
        session._jsparkSession,  # noqa: SLF001
        analyzed,
    )
    return (
        DataFrame(dataset, session),
        facts,
        bool(policies) and not analyzed.fastEquals(unfiltered),
    )


def _explain(
    session: SparkSession,
    parsed: Any,
    catalog: str,
    namespace: Sequence[str],
    sql: str,
    policies: Sequence[TablePolicy],
) -> Prepared:
    """EXPLAIN's text of the plan as it would run: a protected table's policies show in it
    (their SQL is bound to the reader, so it holds nothing of other readers' rows). COST
    is refused there: Iceberg's statistics count the rows the row filter hides."""
    frame, facts, protected = _checked_under(session, parsed.logicalPlan(), catalog, policies)
    if protected and str(parsed.mode().name()) == "cost":
        raise sandbox.SandboxRefused(
            "EXPLAIN COST of a table with a row filter or a mask is not available here: its "
            "statistics count the rows the filter hides"
        )
    with sandbox._refusals():  # noqa: SLF001 - planning may refuse what analysis let by
        text = frame._jdf.queryExecution().explainString(parsed.mode())  # noqa: SLF001
    return Prepared(
        kind="EXPLAIN",
        columns=[("plan", "string")],
        reads=sandbox.reads(facts, catalog, namespace=namespace),
        rows=[[str(text)]],
        places=places(sql, facts, catalog, namespace),
    )


def _columns_of(
    session: SparkSession,
    parsed: Any,
    catalog: str,
    namespace: Sequence[str],
    *,
    show_columns: bool,
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
        within = list(
            jvm.scala.collection.JavaConverters.seqAsJavaListConverter(
                parsed.namespace().get()
            ).asJava()
        )
        identifier = [*within, identifier[-1]] if len(identifier) == 1 else identifier
    if not show_columns and not parsed.partitionSpec().isEmpty():
        raise sandbox.SandboxRefused("DESCRIBE of a partition is not supported here")
    # Read through SQL text, not `session.table`: a catalog view is told from the tables its
    # SQL reads by the positions the parser gives. A refusal points at the name as the user
    # wrote it, the one thing the text `SELECT * FROM name` holds.
    origin = relation.origin()
    line = int(origin.line().get()) if origin.line().isDefined() else None
    column = int(origin.startPosition().get()) + 1 if origin.startPosition().isDefined() else None
    try:
        select = sandbox.parse(session, f"SELECT * FROM {quote([str(p) for p in identifier])}")
        frame, facts = _checked(session, select, catalog)
    except SqlError as error:
        kind = sandbox.SandboxRefused if isinstance(error, sandbox.SandboxRefused) else SqlError
        raise kind(error.base_message, line=line, column=column) from None
    reads = sandbox.reads(facts, catalog, namespace=namespace)
    # Spark names a missing one as the SELECT above writes it, at the name the user wrote.
    places = {read: (line, column, quote([str(p) for p in identifier])) for read in reads}
    if show_columns:
        prepared = Prepared(
            kind="SHOW COLUMNS",
            columns=[("col_name", "string")],
            reads=reads,
            rows=[[f.name] for f in _fields(frame)],
        )
    else:
        prepared = _described(frame, reads, kind="DESCRIBE")
    prepared.places = places
    return prepared


def _described(frame: DataFrame, reads: list[tuple[str, ...]], *, kind: str) -> Prepared:
    return Prepared(
        kind=kind,
        columns=[("col_name", "string"), ("data_type", "string"), ("comment", "string")],
        reads=reads,
        rows=[[f.name, f.type, f.comment] for f in _fields(frame)],
    )


@dataclass(frozen=True)
class _Field:
    name: str
    type: str  # Spark SQL's own text of the type, `decimal(12,2)`
    comment: str | None
    needs_text: bool  # a type Arrow or Parquet cannot hold


def _fields(frame: DataFrame) -> list[_Field]:
    """The frame's columns as the JVM has them. PySpark's `frame.schema` cannot be used: it
    cannot parse every type Spark's analyzer gives (a calendar interval's JSON)."""
    schema = frame._jdf.schema()  # noqa: SLF001
    described = json.loads(schema.json())["fields"]
    types = [str(field.dataType().simpleString()) for field in schema.fields()]
    return [
        _Field(
            name=field["name"],
            type=kind,
            comment=(field.get("metadata") or {}).get("comment"),
            needs_text=_needs_text(field["type"]),
        )
        for field, kind in zip(described, types, strict=True)
    ]


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

    fields = _fields(frame)
    if not any(f.needs_text for f in fields):
        return frame
    # By position: a query's columns may share a name (a join's two ids).
    positional = frame.toDF(*(f"_{index}" for index in range(len(fields))))
    return positional.select(
        *(
            (F.col(f"_{index}").cast("string") if f.needs_text else F.col(f"_{index}")).alias(
                f.name
            )
            for index, f in enumerate(fields)
        )
    )


def _needs_text(kind: Any) -> bool:
    """Whether a type, as the JSON of Spark's schema writes it, holds a calendar or a
    year-month interval (`interval`, `interval year to month`...), which Spark's Arrow
    conversion and Parquet cannot hold; day-time intervals are Arrow durations."""
    if isinstance(kind, str):
        return kind == "interval" or kind.split(" ")[:2] in (
            ["interval", "year"],
            ["interval", "month"],
        )
    if not isinstance(kind, dict):
        return False
    if kind.get("type") == "array":
        return _needs_text(kind.get("elementType"))
    if kind.get("type") == "map":
        return _needs_text(kind.get("keyType")) or _needs_text(kind.get("valueType"))
    if kind.get("type") == "struct":
        return any(_needs_text(f.get("type")) for f in kind.get("fields", []))
    return False

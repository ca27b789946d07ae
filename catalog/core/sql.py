"""SQL for view definitions, on sqlglot: parse with positions, qualify, derive the output
schema, transpile to other dialects, and find the tables a query reads.

What sqlglot does not do and is written here: mapping its types to Iceberg types and back,
and naming unaliased output columns the way an engine would show them."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.errors import ErrorLevel, OptimizeError, ParseError, SqlglotError, TokenError
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.qualify_tables import qualify_tables
from sqlglot.optimizer.scope import traverse_scope
from sqlglot.schema import MappingSchema

from catalog.core.errors import InvalidInput, SqlError
from catalog.core.inputs import whole_number
from catalog.core.types import iceberg_type_from_sqlglot

#: Dialect names users may give; sqlglot's list, minus its generic placeholder.
SUPPORTED_DIALECTS: tuple[str, ...] = tuple(
    sorted(d.value for d in sqlglot.dialects.Dialects if d.value)
)

#: A table's columns as (name, sqlglot type text). Lookups are keyed by
#: (catalog, *namespace, name), where catalog "" means the catalog that stores the view.
ColumnTypes = list[tuple[str, str]]
SchemaLookup = Callable[[tuple[str, ...]], ColumnTypes | None]


@dataclass(frozen=True)
class OutputColumn:
    name: str
    iceberg_type: str
    doc: str | None = None
    #: True when sqlglot could not derive the type and it fell back to string.
    type_guessed: bool = False


@dataclass(frozen=True)
class AnalyzedQuery:
    """A view query after analysis: the stored SQL per dialect and the output schema."""

    dialect: str
    sql: str
    columns: list[OutputColumn]
    dependencies: list[tuple[str, ...]]
    warnings: list[str] = field(default_factory=list)
    #: Tables and views the query reads that the catalog does not know (dotted names);
    #: only with `allow_unknown_sources`, and then the columns' types are unknown.
    unknown_sources: list[str] = field(default_factory=list)


#: Spark's built-in session catalog: in the engine that wrote a view, that engine's own
#: metastore, never this catalog (catalog.selectors.catalogs_meaning_this).
SESSION_CATALOG = "spark_catalog"
#: What an engine's own name for this catalog may be: a plain identifier, which Spark can
#: register as a catalog (`spark.sql.catalog.<name>`; a dot would name a property).
ENGINE_CATALOG_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,99}$"


def check_dialect(dialect: str, *, field_name: str = "dialect") -> str:
    name = (dialect or "").strip().lower()
    if name not in SUPPORTED_DIALECTS:
        raise InvalidInput(
            f"Unknown SQL dialect: {dialect!r}. Known dialects: {', '.join(SUPPORTED_DIALECTS)}",
            field=field_name,
        )
    return name


def parse_query(sql: str, dialect: str) -> exp.Query:
    """Parse one SELECT (or set operation, or WITH ... SELECT); SqlError with line/column."""
    dialect = check_dialect(dialect)
    if not sql or not sql.strip():
        raise SqlError("The query is empty")
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except ParseError as error:
        first = error.errors[0] if error.errors else {}
        message = _short(first.get("description") or str(error))
        highlight = first.get("highlight")
        if highlight:
            message = f"{message} near {_short(highlight, 100)!r}"
        raise SqlError(message, line=first.get("line"), column=first.get("col")) from error
    except TokenError as error:
        raise SqlError(f"Cannot read the SQL: {_short(str(error))}") from error
    except (SqlglotError, RecursionError, LookupError, ValueError, TypeError, AttributeError):
        # sqlglot's parser fails in these ways on some malformed input (deep nesting, a
        # construct it half knows); the SQL is refused, not the request crashed.
        raise SqlError(f"Cannot parse the SQL as {dialect}") from None
    if len(statements) != 1:
        raise SqlError(f"Expected exactly one query, found {len(statements)} statements")
    statement = statements[0]
    if not isinstance(statement, exp.Query):
        kind = statement.key.upper()
        raise SqlError(f"A view is defined by a SELECT query, not a {kind} statement")
    return statement


def as_query(query: str | exp.Query, dialect: str = "spark", *, copy: bool = False) -> exp.Query:
    """`query` as sqlglot's tree: parsed (`parse_query`) when it is text; when it is a tree
    already, that tree, or with `copy` a copy of it for a caller that changes it (a copy
    costs a fraction of a parse)."""
    if isinstance(query, exp.Expression):
        return query.copy() if copy else query
    return parse_query(query, dialect)


def check_parses(sql: str, dialect: str) -> None:
    """Refuse SQL that does not parse as one query in its declared dialect, naming the
    dialect and the line and column; a dialect sqlglot does not know is taken on trust
    (engines may store SQL for dialects sqlglot has never heard of)."""
    name = (dialect or "").strip().lower() if isinstance(dialect, str) else ""
    if name not in SUPPORTED_DIALECTS:
        return
    try:
        parse_query(sql, name)
    except SqlError as error:
        refused = SqlError(f"The {name} SQL of the view does not parse: {error.message}")
        # The message already says where; the position stays available to callers.
        refused.line, refused.column = error.line, error.column
        raise refused from None


def _short(text: str, limit: int = 200) -> str:
    """Messages quote at most `limit` characters of the user's SQL."""
    return text if len(text) <= limit else f"{text[:limit]}..."


def _output_name(projection: exp.Expression, dialect: str) -> str:
    """An unaliased column's name, as engines show it: the column's name, else its text."""
    if isinstance(projection, exp.Alias):
        return projection.alias
    if isinstance(projection, exp.Column):
        return projection.name
    return projection.sql(dialect=dialect)


def _mapping_schema(
    query: exp.Query, lookup: SchemaLookup, default: Sequence[str], dialect: str
) -> tuple[MappingSchema, bool]:
    """A sqlglot schema holding every table the query reads that `lookup` knows.

    Returns (schema, all_known)."""
    nested: dict = {}
    all_known = True
    ctes = {cte.alias_or_name for cte in query.find_all(exp.CTE)}
    for table in query.find_all(exp.Table):
        if not table.db and table.name in ctes:
            continue
        parts = _table_parts(table, default)
        columns = lookup(parts)
        if columns is None:
            all_known = False
            continue
        catalog, db, name = parts[0], ".".join(parts[1:-1]), parts[-1]
        nested.setdefault(catalog, {}).setdefault(db, {})[name] = dict(columns)
    return MappingSchema(nested or None, dialect=dialect, normalize=False), all_known


def _table_parts(table: exp.Table, default: Sequence[str]) -> tuple[str, ...]:
    """(catalog, *namespace, name), filling what the reference leaves out from `default`,
    which is (catalog, *namespace)."""
    given = [part.name for part in table.parts]
    if len(given) == 1:
        return (*default, given[0])
    if len(given) == 2:
        return (default[0], *given)
    return tuple(given)


def analyze_view_query(
    sql: str,
    *,
    dialect: str,
    catalog: str | None,
    namespace: Sequence[str],
    lookup: SchemaLookup,
    column_aliases: Sequence[str] | None = None,
    column_comments: Sequence[str | None] | None = None,
    allow_unknown_sources: bool = False,
) -> AnalyzedQuery:
    """Parse, qualify and type a view query.

    A table or view the catalog does not know is refused with its line and column, unless
    `allow_unknown_sources` (a view created before its sources): then it is listed in
    `unknown_sources` and the columns it gives are typed string.

    Table references are qualified with `namespace` and, when given, `catalog` (the view's
    default namespace and catalog; with no catalog, references stay relative to the catalog
    that stores the view, whatever name an engine gives it), `*` is expanded where the
    tables' columns are known, and the result is the SQL to store, so that the view means
    the same thing wherever it is read."""
    dialect = check_dialect(dialect)
    query = parse_query(sql, dialect)
    names = [_output_name(p, dialect) for p in query.selects]
    default = (catalog or "", *namespace)
    schema, all_known = _mapping_schema(query, lookup, default, dialect)
    warnings: list[str] = []
    unknown = [] if all_known else _unknown_references(sql, query, lookup, default)
    if unknown and not allow_unknown_sources:
        name, line, column = unknown[0]
        raise SqlError(
            f"Unknown table or view {name}: the catalog has no such object (create it first, "
            "or say that the view is created before its sources)",
            line=line,
            column=column,
        )
    if unknown:
        names_unknown = list(dict.fromkeys(name for name, _, _ in unknown))
        warnings.append(
            f"The catalog does not know {', '.join(names_unknown)}; column types are unknown"
        )
    if any(p.find(exp.Star) for p in query.selects) and not all_known:
        unknown = [
            ".".join(part for part in p if part)
            for p in dependencies(query, default)
            if lookup(p) is None
        ]
        raise SqlError(
            "Cannot expand * over tables the catalog does not know: "
            f"{', '.join(unknown)}; list the columns instead"
        )
    single = len(namespace) == 1
    has_star = any(p.find(exp.Star) for p in query.selects)
    try:
        qualified = qualify(
            query.copy(),
            catalog=catalog if single and catalog else None,
            db=namespace[0] if single else None,
            schema=schema,
            dialect=dialect,
            quote_identifiers=False,
            validate_qualify_columns=all_known,
            identify=False,
        )
    except OptimizeError as error:
        raise SqlError(str(error)) from error
    except SqlglotError as error:
        raise SqlError(f"Cannot qualify the query: {error}") from error
    if has_star:
        # Expanded: the stored query lists its columns, so it keeps its meaning when the
        # tables it reads gain columns.
        stored_query = qualified
        names = [_output_name(p, dialect) for p in qualified.selects]
    else:
        # Only table references are qualified; the select list stays as the user wrote it.
        stored_query = qualify_tables(
            query.copy(),
            catalog=catalog if single and catalog else None,
            db=namespace[0] if single else None,
            dialect=dialect,
        )
    typed = annotate_types(qualified, schema=schema, dialect=dialect)

    if column_aliases:
        if len(column_aliases) != len(typed.selects):
            raise InvalidInput(
                f"The view has {len(column_aliases)} column names but the query returns "
                f"{len(typed.selects)} columns",
                field="column_aliases",
            )
        names = list(column_aliases)
    seen: set[str] = set()
    for name in names:
        if name.lower() in seen:
            raise InvalidInput(
                f"Duplicate column name {name!r}; give the columns distinct aliases",
                field="column_aliases" if column_aliases else "sql",
            )
        seen.add(name.lower())
    comments = list(column_comments or [])
    if comments and len(comments) > len(names):
        raise InvalidInput(
            f"{len(comments)} column comments given for {len(names)} columns",
            field="column_comments",
        )
    columns = []
    for index, (name, projection) in enumerate(zip(names, typed.selects, strict=True)):
        iceberg_type, guessed = iceberg_type_from_sqlglot(projection.type)
        if not guessed and _engine_types(projection):
            iceberg_type, guessed = "string", True
        if guessed:
            warnings.append(f"The type of column {name!r} is unknown; it is stored as string")
        doc = comments[index] if index < len(comments) else None
        columns.append(OutputColumn(name, iceberg_type, doc or None, guessed))
    stored = stored_query.sql(dialect=dialect, pretty=True)
    return AnalyzedQuery(
        dialect=dialect,
        sql=stored,
        columns=columns,
        dependencies=dependencies(stored_query, default),
        warnings=warnings,
        unknown_sources=list(dict.fromkeys(name for name, _, _ in unknown)),
    )


#: Functions whose result type sqlglot gives otherwise than Spark (int for Spark's long, double
#: for int, int for double, a timestamp for a date): CEIL(double) is a long, ROUND(int) an
#: int, SIGN a double, TRUNC(date, 'MM') a date.
_SPARK_TYPES_ITS_OWN = (exp.IntDiv, exp.Ceil, exp.Floor, exp.Round, exp.Sign, exp.DateTrunc)
#: sqlglot's types that are no one type of Spark's: TIMESTAMP (Spark's has a time zone,
#: Trino's none), DATETIME, and DECIMAL (see `_engine_types`).
_ENGINE_DECIDES = (
    exp.DataType.Type.DECIMAL,
    exp.DataType.Type.TIMESTAMP,
    exp.DataType.Type.DATETIME,
)
_INT_MAX = 2**31 - 1


def _engine_types(projection: exp.Expression) -> bool:
    """Whether only the engine knows a select item's type, because sqlglot's annotation is
    not Spark's there (tests/spark/test_view_types.py compares them):

    - computing from DECIMALs: sqlglot keeps SUM of a decimal(10, 2) as decimal(10, 2) and
      types its AVG as double, where Spark gives decimal(20, 2) and decimal(14, 6); a bare
      CAST(x AS DECIMAL) is decimal(10, 0) in Spark, decimal(38, 0) in Trino;
    - number literals other than INT's: Spark reads 1.5 as decimal(2, 1), 10000000000 as a
      long, where sqlglot says double and int;
    - sqlglot's TIMESTAMP, which is Spark's timestamp with time zone (TO_TIMESTAMP, a cast)
      and Trino's without;
    - / other than sqlglot's double (FLOAT / FLOAT is Spark's double);
    - DIV, CEIL, FLOOR, ROUND, SIGN and TRUNC (`_SPARK_TYPES_ITS_OWN`).

    A view's reader casts the query's columns up to the stored types, and Spark refuses a
    narrower one ("Cannot up cast"), so such a column is typed by the workers' Spark like
    any other sqlglot cannot type. A column itself, a COUNT and a CAST to a type written in
    full are exact."""
    node = projection.unalias()
    if isinstance(node, (exp.Column, exp.Count)):
        return False
    if isinstance(node, exp.Cast) and node.to.this != exp.DataType.Type.TIMESTAMP:
        # An explicit type is the column's, but for a DECIMAL without its precision.
        return node.to.this == exp.DataType.Type.DECIMAL and not node.to.expressions
    for part in node.walk():
        if isinstance(part, exp.DataType):
            continue
        if isinstance(part, _SPARK_TYPES_ITS_OWN):
            return True
        if isinstance(part, exp.Literal) and part.is_number:
            number = whole_number(part.this, digits=10)
            if number is None or number > _INT_MAX:
                return True
        kind = part.type.this if isinstance(part.type, exp.DataType) else None
        if kind in _ENGINE_DECIDES:
            return True
        if isinstance(part, exp.Div) and kind != exp.DataType.Type.DOUBLE:
            return True  # Spark's / gives a double (a decimal from decimals); FLOAT / FLOAT too
    return False


def display_name(parts: Sequence[str]) -> str:
    """A reference (catalog, *namespace, name) as users write it: no empty catalog."""
    return ".".join(part for part in parts if part)


def _position(sql: str, offset: int | None) -> tuple[int | None, int | None]:
    """1-based line and column of a character offset into `sql`."""
    if offset is None or offset < 0 or offset > len(sql):
        return None, None
    before = sql[:offset]
    return before.count("\n") + 1, offset - (before.rfind("\n") + 1) + 1


def _unknown_references(
    sql: str, query: exp.Query, lookup: SchemaLookup, default: Sequence[str]
) -> list[tuple[str, int | None, int | None]]:
    """Table references `lookup` does not know, CTEs excluded, in the order they appear:
    (name, line, column) with the position of the reference's first part."""
    ctes = {cte.alias_or_name for cte in query.find_all(exp.CTE)}
    found = []
    for table in query.find_all(exp.Table):
        if not table.name or (not table.db and table.name in ctes):
            continue
        parts = _table_parts(table, default)
        if lookup(parts) is not None:
            continue
        first = table.parts[0] if table.parts else table.this
        line, column = _position(sql, (first.meta or {}).get("start"))
        found.append((display_name(parts), line, column))
    found.sort(key=lambda item: (item[1] or 0, item[2] or 0))
    return found


def dependencies(query: exp.Query, default: Sequence[str]) -> list[tuple[str, ...]]:
    """The tables and views the query reads, CTEs excluded, in first-seen order; parts a
    reference leaves out come from `default`, (catalog, *namespace)."""
    found: list[tuple[str, ...]] = []
    for scope in traverse_scope(query):
        for source in scope.sources.values():
            # A table-valued function (range(...)) reads no catalog object.
            if isinstance(source, exp.Table) and isinstance(source.this, exp.Identifier):
                parts = _table_parts(source, default)
                if parts not in found:
                    found.append(parts)
    return found


def qualify_table_names(sql: str, *, dialect: str, namespace: Sequence[str]) -> str:
    """`sql` with every table reference that names no namespace given `namespace` (one
    level; deeper namespaces are left as written), so that it means the same thing to an
    engine that does not know the default namespace."""
    query = parse_query(sql, dialect)
    single = len(namespace) == 1
    qualified = qualify_tables(query, db=namespace[0] if single else None, dialect=dialect)
    return qualified.sql(dialect=dialect, pretty=True)


def transpile(sql: str, *, source: str, target: str) -> str:
    """`sql` (a stored, qualified query) rewritten for the `target` dialect."""
    check_dialect(source, field_name="dialect")
    check_dialect(target, field_name="dialects")
    try:
        expression = parse_query(sql, source)
        return expression.sql(dialect=target, pretty=True, unsupported_level=ErrorLevel.RAISE)
    except SqlglotError as error:
        raise InvalidInput(
            f"Cannot transpile the query from {source} to {target}: {error}", field="sql"
        ) from error


def transpile_all(sql: str, *, source: str, targets: Iterable[str]) -> dict[str, str]:
    """{dialect: sql} with the original first, then one transpiled entry per other target."""
    result = {source: sql}
    for target in targets:
        target = check_dialect(target, field_name="dialects")
        if target not in result:
            result[target] = transpile(sql, source=source, target=target)
    return result

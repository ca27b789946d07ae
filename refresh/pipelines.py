"""Pipelines as code: what a statement would do to the catalog as it is (a plan), SHOW CREATE
MATERIALIZED TABLE, and CREATE OR ALTER's difference against a table's definition.

A plan reads and never writes, and never asks Spark: it runs every check that needs neither
(the statement's own rules, names, roles, sources, options, Flink's freshness rules, the
continuous mode's shapes, what may not change); what only Spark can say (the query's schema
against the schema part and Flink's rules) is checked when the statement is applied. A plan
of a script counts what its earlier statements create as there (`planned`), so a folder of
definitions plans from scratch.

CREATE OR ALTER on a table that exists changes only what differs, each through the service
its own statement uses: a new query is ALTER ... AS (a new definition version, built by a
rebuild), FRESHNESS and REFRESH_MODE are SET FRESHNESS / SET REFRESH_MODE, options are SET
and RESET (Flink's `calculateOptionsChange`), COMMENT and columns' comments are set; what
Flink cannot change in place (partition keys, primary key, distribution, a table that is
not a materialized table) is refused. The same definition changes nothing and says so: no
version, no run, no event."""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from django.conf import settings

from catalog import access, policies
from catalog import selectors as catalog_selectors
from catalog.core.access import CREATE, MANAGE, READ_METADATA, WRITE_DATA
from catalog.core.errors import AlreadyExists, InvalidInput
from catalog.core.inputs import check_name
from refresh import checks, definitions, selectors, services, table_state
from refresh.core import expectations as ex
from refresh.core import statements as st
from refresh.core.columns import check_declared
from refresh.core.freshness import RefreshMode, plan_refresh
from refresh.core.options import check_option_keys, check_table_options
from refresh.core.partitions import check_formatter_option
from refresh.models import MaterializedTable
from refresh.sources import check_streamable, readers_of, resolve_sources

NOT_MATERIALIZED = (
    "Table {name} is not a materialized table. Only materialized table support create or "
    "alter operation."
)


@dataclass
class Plan:
    """What one statement would do: `action` is create, alter, nothing, refused, or the
    statement's own verb (drop, suspend, resume, refresh, change data, read)."""

    action: str
    table: str | None = None
    changes: list[str] = field(default_factory=list)
    error: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- names and the current definition -----------------------------------------------------------


def resolve(name: st.Name, namespace: str | None) -> tuple[str, str]:
    """`[catalog.][namespace.]name` -> (namespace, name); an unqualified name needs the
    console's namespace."""
    parts = list(name)
    if len(parts) >= 3 and parts[0] == settings.CATALOG_NAME:
        parts = parts[1:]
    if len(parts) == 1:
        if not namespace:
            raise InvalidInput(
                f"No namespace for {parts[0]}: qualify the name (namespace.name) or choose a "
                "namespace",
                field="namespace",
            )
        return namespace, parts[0]
    return ".".join(parts[:-1]), parts[-1]


def _schema(mt: MaterializedTable) -> dict:
    """The table's current Iceberg schema (REST JSON), from its metadata file."""
    from catalog.core.tables import read_table_metadata

    metadata = read_table_metadata(mt.table.metadata_location)
    return json.loads(metadata.schema().model_dump_json(by_alias=True, exclude_none=True))


def show_create(mt: MaterializedTable) -> str:
    """SHOW CREATE MATERIALIZED TABLE: the CREATE OR ALTER statement that defines `mt` as it
    is (its schema from the table's metadata, its distribution from the partition spec)."""
    columns = [
        st.TableColumn(f["name"], f["type"], bool(f.get("required")), f.get("doc"))
        for f in _schema(mt)["fields"]
    ]
    distribution = table_state.distribution(mt)
    return st.show_create(
        (*mt.table.namespace.name.split("."), mt.table.name),
        columns=columns,
        query=mt.query,
        freshness=mt.freshness,
        refresh_mode=RefreshMode(mt.refresh_mode) if mt.mode_is_explicit else None,
        primary_key=mt.primary_key,
        constraint_name=mt.constraint_name or None,
        comment=mt.comment or None,
        distribution=st.Distribution(*distribution) if distribution else None,
        partitioned_by=mt.partitioned_by,
        options=mt.options,
        expectations=ex.from_json(mt.expectations),
    )


# -- CREATE OR ALTER's difference ---------------------------------------------------------------

#: "Not given" for the changes that may set a value to None.
_SAME: Any = object()


@dataclass
class Difference:
    """What CREATE OR ALTER would change on a table that exists; empty: nothing."""

    query: str | None = None
    freshness: Any = None
    #: RefreshMode, None (automatic again), or _SAME.
    refresh_mode: Any = _SAME
    set_options: dict[str, str] = field(default_factory=dict)
    reset_options: tuple[str, ...] = ()
    #: str, None (no comment), or _SAME.
    comment: Any = _SAME
    column_comments: dict[str, str | None] = field(default_factory=dict)
    #: The statement's expectations when they differ from the table's (a new definition
    #: version, as a new query).
    expectations: tuple[ex.Expectation, ...] | None = None

    def empty(self) -> bool:
        return (
            self.expectations is None
            and self.query is None
            and self.freshness is None
            and self.refresh_mode is _SAME
            and not self.set_options
            and not self.reset_options
            and self.comment is _SAME
            and not self.column_comments
        )

    def describe(self, mt: MaterializedTable) -> list[str]:
        changes = []
        if self.query is not None:
            changes.append(
                f"query: a new definition version after {mt.current_version}, built by a "
                "rebuild (ALTER ... AS)"
            )
        if self.expectations is not None:
            names = ", ".join(e.name for e in self.expectations) or "none"
            changes.append(
                f"expectations ({names}): a new definition version after "
                f"{mt.current_version}, built by a rebuild"
            )
        if self.freshness is not None:
            changes.append(f"FRESHNESS: {mt.freshness} -> {self.freshness}")
        if self.refresh_mode is not _SAME:
            old = mt.refresh_mode if mt.mode_is_explicit else f"automatic ({mt.refresh_mode})"
            new = self.refresh_mode.value if self.refresh_mode else "automatic"
            changes.append(f"REFRESH_MODE: {old} -> {new}")
        for key, value in self.set_options.items():
            old = mt.options.get(key)
            shown = f"{old!r} -> {value!r}" if old is not None else f"{value!r} (new)"
            changes.append(f"SET {key!r}: {shown}")
        changes += [f"RESET {key!r}" for key in self.reset_options]
        if self.comment is not _SAME:
            changes.append(f"COMMENT: {mt.comment or None!r} -> {self.comment!r}")
        for column, comment in self.column_comments.items():
            changes.append(f"COMMENT of column {column!r} -> {comment!r}")
        return changes


def same_query(old: str, new: str) -> bool:
    """Whether two queries are the same SQL: equal text, or the same once sqlglot has read
    them (case of keywords, spaces and line breaks do not make a new definition)."""
    if old.strip() == new.strip():
        return True
    import sqlglot

    try:
        first, second = (sqlglot.parse_one(q, read="spark") for q in (old, new))
    except Exception:  # noqa: BLE001 - unreadable text differs unless equal as text
        return False
    return first.sql("spark", comments=False) == second.sql("spark", comments=False)


def difference(
    mt: MaterializedTable,
    statement: st.CreateMaterializedTable,
    *,
    namespace: str,
    actor: Any = None,
) -> Difference:
    """What `statement` (CREATE OR ALTER) would change on `mt`, or a CatalogError for what
    may not change (a new query's sources `actor` may not read included). Reads only; asks
    Spark nothing."""
    name = str(mt)
    if tuple(statement.partitioned_by) != tuple(mt.partitioned_by):
        raise InvalidInput(
            f"Changing the partition keys of materialized table {name} is not supported: it is "
            f"PARTITIONED BY ({', '.join(mt.partitioned_by)}), the statement says "
            f"({', '.join(statement.partitioned_by)}). Drop the table and create it again.",
            field="partitioned_by",
        )
    if tuple(statement.primary_key) != tuple(mt.primary_key) or (
        statement.primary_key and (statement.constraint_name or "") != mt.constraint_name
    ):
        shown = ", ".join(f"`{key}`" for key in mt.primary_key)
        raise InvalidInput(
            f"The current materialized table has already defined the primary key constraint "
            f"[{shown}]. You might want to drop it before adding a new one."
            if mt.primary_key
            else "The current materialized table does not define any primary key, and one "
            "cannot be added to it: drop the table and create it again.",
            field="primary_key",
        )
    current = table_state.distribution(mt)
    wanted = statement.distribution
    if ((wanted.columns, wanted.buckets) if wanted else None) != current:
        raise InvalidInput(
            f"Changing the distribution of materialized table {name} is not supported (its "
            f"data files are laid out by it): drop the table and create it again.",
            field="distribution",
        )
    diff = Difference()
    # A definition still being applied (ALTER ... AS, its rebuild not yet committed) is the
    # one a statement is compared with: applying the same text again is nothing to do.
    pending = definitions.pending_change(mt)
    current_query, current_expectations = mt.query, mt.expectations
    if pending is not None:
        version = mt.versions.get(version_id=pending.version_id)
        current_query, current_expectations = version.query, version.expectations
    if ex.changed(ex.from_json(current_expectations), statement.expectations):
        diff.expectations = tuple(statement.expectations)
    if not same_query(current_query, statement.query):
        diff.query = statement.query.strip()
    elif statement.columns and pending is None:  # a pending one was checked at its ALTER
        schema = _schema(mt)
        check_declared(statement.columns, schema, statement="CREATE OR ALTER")
        docs = {f["name"]: f.get("doc") or None for f in schema["fields"]}
        for column in statement.columns:
            if column.type is not None and (column.comment or None) != docs.get(column.name):
                diff.column_comments[column.name] = column.comment or None
    if statement.freshness != mt.freshness:
        diff.freshness = statement.freshness
    if statement.refresh_mode is None:
        if mt.mode_is_explicit:
            diff.refresh_mode = None
    elif not mt.mode_is_explicit or statement.refresh_mode.value != mt.refresh_mode:
        diff.refresh_mode = statement.refresh_mode
    options = check_table_options(dict(statement.options))
    for key, pattern in options.items():
        check_formatter_option(key, pattern, mt.partitioned_by)
    diff.set_options = {k: v for k, v in options.items() if mt.options.get(k) != v}
    diff.reset_options = check_option_keys([k for k in mt.options if k not in options])
    if (statement.comment or None) != (mt.comment or None):
        diff.comment = statement.comment or None
    if diff.empty():
        return diff
    # What applying would meet, said now: Flink's rules for the new freshness and mode, the
    # continuous mode's shapes, a definition change still being applied.
    explicit = diff.refresh_mode if diff.refresh_mode is not _SAME else (
        RefreshMode(mt.refresh_mode) if mt.mode_is_explicit else None
    )  # fmt: skip
    plan = plan_refresh(diff.freshness or mt.freshness, explicit, table_state.threshold())
    query = diff.query or mt.query
    if plan.mode is RefreshMode.CONTINUOUS:
        check_streamable(
            query,
            namespace=mt.default_namespace or mt.table.namespace.name,
            primary_key=mt.primary_key,
        )
    if diff.query is not None:
        resolve_sources(
            query, namespace=namespace, own=(mt.table.namespace.name, mt.table.name), actor=actor
        )
    if pending is not None:
        raise table_state.InvalidState(
            f"Materialized table {mt} cannot change while version {pending.version_id} is "
            f"being applied (its rebuild is run {pending.run_id}); wait for it to finish",
        )
    return diff


def apply_difference(
    mt: MaterializedTable,
    diff: Difference,
    statement: st.CreateMaterializedTable,
    *,
    actor: Any,
) -> tuple[MaterializedTable, Any]:
    """Apply `diff` through the services, the query's checks first (on a worker: Spark's
    schema) so that a refused query leaves everything as it was; the query last, since a
    pending rebuild refuses the other changes. Returns the table and the rebuild run (or
    None)."""
    if diff.query is not None:
        definitions.check_query(
            mt,
            query=diff.query,
            columns=statement.columns,
            expectations=diff.expectations,
            actor=actor,
        )
    elif diff.expectations is not None:
        definitions.check_query(mt, query=mt.query, expectations=diff.expectations, actor=actor)
    if diff.set_options:
        mt = services.set_options(mt, options=diff.set_options, actor=actor)
    if diff.reset_options:
        mt = services.reset_options(mt, keys=diff.reset_options, actor=actor)
    if diff.freshness is not None:
        mt = services.set_freshness(mt, freshness=diff.freshness, actor=actor)
    if diff.refresh_mode is not _SAME:
        mt = services.set_refresh_mode(mt, refresh_mode=diff.refresh_mode, actor=actor)
    if diff.comment is not _SAME:
        mt = services.set_comment(mt, comment=diff.comment, actor=actor)
    if diff.column_comments:
        mt = services.set_column_comments(mt, comments=diff.column_comments, actor=actor)
    run = None
    if diff.query is not None or diff.expectations is not None:
        run = definitions.alter_query(
            mt,
            query=diff.query or mt.query,
            columns=statement.columns if diff.query is not None else (),
            expectations=diff.expectations,
            actor=actor,
        )
    return mt, run


def existing_for(
    actor: Any, namespace: str, name: str, *, or_alter: bool
) -> MaterializedTable | None:
    """`existing`, asked by `actor`: the namespace must be one it sees; a table to alter one
    it manages, a new one needs `create` in the namespace. A materialized table it may not
    see holds its name as any other object does (CREATE OR ALTER cannot alter it)."""
    checks.namespace(actor, namespace)
    mt = existing(namespace, name, or_alter=or_alter)
    if mt is not None and READ_METADATA in checks.principal(actor).privileges(
        access.of_object(mt.table)
    ):
        checks.table(actor, mt, MANAGE)
        return mt
    checks.namespace(actor, namespace, CREATE)
    if mt is not None:
        raise AlreadyExists(
            f"Table with same name already exists: {namespace}.{name}", field="name"
        )
    return None


def existing(namespace: str, name: str, *, or_alter: bool) -> MaterializedTable | None:
    """The materialized table of that name, None when the name is free; a name another kind
    of object holds is refused (Flink's words for CREATE OR ALTER)."""
    check_name(name, field="name")
    in_namespace = catalog_selectors.get_namespace(namespace)
    holder = catalog_selectors.holder_of(in_namespace, name)
    if holder is None:
        return None
    mt = MaterializedTable.objects.filter(table_id=holder.pk).first()
    if mt is None or not or_alter:
        if or_alter:
            raise InvalidInput(NOT_MATERIALIZED.format(name=f"{namespace}.{name}"), field="name")
        raise AlreadyExists(
            f"Table with same name already exists: {namespace}.{name}", field="name"
        )
    return selectors.get_materialized_table(namespace, name)


# -- a plan of any statement -----------------------------------------------------------------

_VERBS = {
    st.Suspend: "suspend",
    st.Resume: "resume",
    st.Refresh: "refresh",
    st.DropMaterializedTable: "drop",
    st.DataChange: "change data",
    st.SetFreshness: "alter",
    st.SetRefreshMode: "alter",
    st.SetOptions: "alter",
    st.ResetOptions: "alter",
    st.AlterQuery: "alter",
}


def plan(
    statement: st.Statement,
    *,
    namespace: str | None,
    actor: Any,
    planned: set[str],
) -> Plan:
    """What `statement` would do now, after the statements before it in a plan (whose new
    tables are in `planned`, to which a create adds its own). A refusal is a CatalogError."""
    if isinstance(
        statement, st.ShowMaterializedTables | st.DescribeJob | st.ShowCreateMaterializedTable
    ):
        return Plan("read", changes=["reads only"])
    if isinstance(statement, st.Query):
        return Plan("read", changes=[f"a {statement.kind} query: reads only (Spark runs it)"])
    if isinstance(statement, st.CreateMaterializedTable):
        return _plan_create(statement, namespace=namespace, actor=actor, planned=planned)
    target = statement.target if isinstance(statement, st.DataChange) else statement.name
    ns, name = resolve(target, namespace)
    qualified = f"{ns}.{name}"
    if qualified in planned:
        return Plan(_VERBS[type(statement)], qualified, ["after an earlier statement makes it"])
    privilege = WRITE_DATA if isinstance(statement, st.DataChange) else MANAGE
    try:
        mt = checks.materialized_table(actor, ns, name, privilege)
    except selectors.NoSuchMaterializedTable:
        if isinstance(statement, st.DropMaterializedTable) and statement.if_exists:
            return Plan("nothing", qualified, ["does not exist; nothing dropped"])
        raise
    changes = _describe(statement, mt, actor)
    return Plan(_VERBS[type(statement)], qualified, changes)


def _describe(statement: st.Statement, mt: MaterializedTable, actor: Any) -> list[str]:
    if isinstance(statement, st.SetFreshness):
        return [f"FRESHNESS: {mt.freshness} -> {statement.freshness}"]
    if isinstance(statement, st.SetRefreshMode):
        return [f"REFRESH_MODE: {mt.refresh_mode} -> {statement.refresh_mode.value}"]
    if isinstance(statement, st.SetOptions):
        check_table_options(statement.options)
        return [f"SET {key!r} = {value!r}" for key, value in statement.options.items()]
    if isinstance(statement, st.ResetOptions):
        return [f"RESET {key!r}" for key in check_option_keys(statement.keys)]
    if isinstance(statement, st.AlterQuery):
        resolve_sources(
            statement.query,
            namespace=mt.default_namespace or mt.table.namespace.name,
            own=(mt.table.namespace.name, mt.table.name),
            actor=actor,
        )
        return [f"query: a new definition version after {mt.current_version} (ALTER ... AS)"]
    if isinstance(statement, st.DropMaterializedTable):
        readers = readers_of(mt.table.namespace.name, mt.table.name)
        if readers:
            raise table_state.InvalidState(
                f"Materialized table {mt} cannot be dropped while these read it: "
                + ", ".join(readers),
                field="name",
            )
        return ["drops the table with its data"]
    if isinstance(statement, st.Refresh):
        return [
            f"a refresh of partition {statement.partition}"
            if statement.partition
            else "a refresh of the whole table"
        ]
    return []


def _plan_create(
    statement: st.CreateMaterializedTable,
    *,
    namespace: str | None,
    actor: Any,
    planned: set[str],
) -> Plan:
    ns, name = resolve(statement.name, namespace)
    qualified = f"{ns}.{name}"
    if qualified in planned:
        if not statement.or_alter:
            raise AlreadyExists(
                f"Table with same name already exists: {qualified} (an earlier statement "
                "creates it)",
                field="name",
            )
        return Plan("alter", qualified, ["compared when applied: an earlier statement makes it"])
    if ns not in planned:  # a namespace is never planned: it must exist
        catalog_selectors.get_namespace(ns)
    mt = existing_for(actor, ns, name, or_alter=statement.or_alter)
    if mt is not None:
        diff = difference(mt, statement, namespace=ns, actor=actor)
        if diff.empty():
            return Plan("nothing", qualified, ["the definition is the table's"])
        return Plan("alter", qualified, diff.describe(mt))
    check_name(name, field="name")
    options = check_table_options(dict(statement.options))
    for key, pattern in options.items():
        check_formatter_option(key, pattern, statement.partitioned_by)
    refresh = plan_refresh(statement.freshness, statement.refresh_mode, table_state.threshold())
    sources = resolve_sources(
        statement.query, namespace=ns, own=(ns, name), planned=planned, actor=actor
    )
    if refresh.mode is RefreshMode.CONTINUOUS and not set(sources) & planned:
        check_streamable(statement.query, namespace=ns, primary_key=statement.primary_key)
    planned.add(qualified)
    changes = [
        f"{refresh.mode.value}, FRESHNESS = {statement.freshness}",
        "reads " + (", ".join(sources) or "no table"),
        "schema: derived by Spark when applied"
        + (f", checked against the {len(statement.columns)} columns given"
           if statement.columns else ""),
    ]  # fmt: skip
    if statement.distribution:
        columns = ", ".join(statement.distribution.columns)
        changes.append(f"bucket[{statement.distribution.buckets}] of {columns}")
    if statement.expectations:
        names = ", ".join(e.name for e in statement.expectations)
        changes.append(f"expectations: {names}; their conditions checked by Spark when applied")
    narrowed = _narrowed_sources(actor, sources)
    if narrowed:
        changes.append(
            f"its owner ({getattr(actor, 'username', '?')}) reads {', '.join(narrowed)} through "
            "row filters or masks: the table holds only the rows and values they leave"
        )
    return Plan("create", qualified, changes)


def _narrowed_sources(actor: Any, sources: list[str]) -> list[str]:
    """The sources ("ns.name") whose row filter or masks apply to `actor`, who would own
    the table: its refreshes read them through them (refresh.rights.owner_policies)."""
    if actor is None or not sources:
        return []
    covered = {p.label for p in policies.for_principal(access.Principal(actor))}
    return [source for source in sources if source in covered]


class DependencyCycle(InvalidInput):
    """Definitions that read each other: `indexes` are the units left waiting."""

    def __init__(self, message: str, indexes: list[int]) -> None:
        super().__init__(message, field="sql")
        self.indexes = indexes


def order_by_dependencies(
    units: Sequence[tuple[Collection[str], Collection[str]]],
) -> list[int]:
    """Indexes of `units` ((names it defines, names it reads)) in an order where each comes
    after the units defining what it reads, otherwise in the order given (the first unit
    that can go, goes); a cycle is an InvalidInput naming the units in it by index."""
    definers: dict[str, int] = {}
    for index, (defines, _) in enumerate(units):
        for name in defines:
            definers.setdefault(name, index)
    needs = [
        {definers[name] for name in reads if name in definers} - {index}
        for index, (_, reads) in enumerate(units)
    ]
    order: list[int] = []
    left = list(range(len(units)))
    while left:
        ready = next((i for i in left if not needs[i] - set(order)), None)
        if ready is None:
            stuck = [i for i in left if needs[i] - set(order)]
            raise DependencyCycle(
                "These definitions read each other in a cycle: " + ", ".join(map(str, stuck)),
                stuck,
            )
        order.append(ready)
        left.remove(ready)
    return order


def query_sources(query: str, *, namespace: str) -> set[str]:
    """ "ns.name" of the tables, views and materialized tables a query names (CTEs and
    table functions left out, names of other catalogs too): what a definition reads, to
    order definitions; read by sqlglot alone (a query it cannot read reads nothing here, and
    its plan says why)."""
    from sqlglot import exp

    from catalog.core.errors import CatalogError
    from catalog.core.sql import parse_query

    try:
        parsed = parse_query(query, "spark")
    except CatalogError:
        return set()
    ctes = {cte.alias_or_name for cte in parsed.find_all(exp.CTE)}
    found = set()
    for table in parsed.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier):
            continue
        parts = [part.name for part in table.parts]
        if len(parts) == 1 and parts[0] in ctes:
            continue
        if len(parts) >= 3:
            if parts[0] != settings.CATALOG_NAME:
                continue
            parts = parts[1:]
        found.add(f"{'.'.join(parts[:-1]) if len(parts) > 1 else namespace}.{parts[-1]}")
    return found


def defines_and_reads(
    statement: st.Statement, *, namespace: str | None
) -> tuple[set[str], set[str]]:
    """What a statement defines and what it reads or acts on ("ns.name"), to order the
    statements of a folder: a definition after what it reads, any other statement after
    the definition of its table."""
    if isinstance(statement, st.CreateMaterializedTable | st.AlterQuery):
        try:
            ns, name = resolve(statement.name, namespace)
        except InvalidInput:
            return set(), set()
        reads = query_sources(statement.query, namespace=ns) - {f"{ns}.{name}"}
        if isinstance(statement, st.AlterQuery):
            return set(), reads | {f"{ns}.{name}"}
        return {f"{ns}.{name}"}, reads
    target = getattr(statement, "target", None) or getattr(statement, "name", None)
    securable = getattr(statement, "securable", None)  # a grant on a table comes after it
    if securable is not None and securable.kind not in ("catalog", "namespace"):
        target = securable.name
    if not target or not isinstance(target, tuple):
        return set(), set()
    try:
        return set(), {".".join(resolve(target, namespace))}
    except InvalidInput:
        return set(), set()

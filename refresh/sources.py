"""What a materialized table reads, down to tables, and the snapshots those tables are at:
the input of Snowflake's NO_DATA rule (a refresh whose sources did not change since the last
successful one is skipped without starting a Spark job).

Sources resolve through the catalog's mirror: a view stands for what its current version
reads, a materialized table for its own data table, which is an ordinary catalog table. No
metadata file is read, so the decision takes a few queries."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from django.conf import settings
from django.db.models import Q, QuerySet
from sqlglot import exp

from catalog import access, services
from catalog import selectors as catalog_selectors
from catalog.core.errors import CatalogError, InvalidInput, SqlError
from catalog.core.sql import as_query, dependencies, parse_query
from catalog.models import Namespace, Table, TableSnapshot, View
from refresh import rights
from refresh.core import expectations as ex
from refresh.core.columns import render_type
from refresh.core.freshness import RefreshMode
from refresh.core.incremental import (
    Baseline,
    Decision,
    Step,
    full,
    has_full_outer_join,
    null_supplied_key,
)
from refresh.core.incremental import decide as decide_refresh
from refresh.core.pinning import Expanded, ViewText, expand_views, flattened
from refresh.core.plan import RefreshPlan
from refresh.core.refresh_state import RefreshState, refresh_state
from refresh.core.streaming import USE_FULL, StreamPlan, plan_stream, real_tables, table_name
from refresh.models import MaterializedTable, RefreshRun


def query_sources(query: str | exp.Query, namespace: str) -> list[tuple[str, ...]]:
    """(catalog, *namespace, name) of each table or view the query (text, or parsed)
    names."""
    try:
        parsed = as_query(query)
    except CatalogError:
        return []
    return dependencies(parsed, ("", *namespace.split(".")))


def parsed_or_none(query: str) -> exp.Query | None:
    """The query parsed once for a run, or None when it does not parse (the run's Spark
    job then says why)."""
    try:
        return parse_query(query, "spark")
    except CatalogError:
        return None


def source_snapshots(
    sources: list[tuple[str, ...]], views: dict[str, tuple[str, int | None]] | None = None
) -> tuple[dict[str, int | None], list[str]]:
    """({"ns.table": current snapshot id, None before the first}, sources this catalog does
    not hold) of every table the sources read, through views; each view read through goes
    into `views` ("ns.view" -> (uuid, current version)) when given."""
    snapshots: dict[str, int | None] = {}
    unknown: list[str] = []
    pending = [tuple(s) for s in sources]
    seen: set[tuple[str, ...]] = set()
    ours: dict[str, bool] = {"": True, settings.CATALOG_NAME: True}
    while pending:
        catalog, *levels, name = pending.pop()
        namespace = ".".join(levels)
        qualified = f"{namespace}.{name}"
        if (namespace, name) in seen:
            continue
        seen.add((namespace, name))
        if catalog not in ours:  # an engine's own name for this catalog is this one
            ours[catalog] = bool(catalog_selectors.catalogs_meaning_this([catalog]))
        if not ours[catalog]:
            unknown.append(f"{catalog}.{qualified}")
            continue
        table = Table.objects.filter(namespace__name=namespace, name=name).first()
        if table is not None:
            # An attached table's writer commits elsewhere: look for its newest file first.
            table = services.follow_attached(table)
            snapshots[qualified] = table.current_snapshot_id
            continue
        view = View.objects.filter(namespace__name=namespace, name=name).first()
        if view is None:
            unknown.append(qualified)
            continue
        if views is not None:
            views[qualified] = (str(view.uuid), view.current_version_id)
        pending.extend(tuple(d) for d in view.dependencies)
    return snapshots, unknown


def _views_named(name: tuple[str, ...]) -> QuerySet[View]:
    """The view (namespace levels..., name), if there is one."""
    return View.objects.filter(namespace__name=".".join(name[:-1]), name=name[-1])


def view_text(name: tuple[str, ...]) -> ViewText | str | None:
    """The current version of the view `name` ((namespace levels..., name)) as Spark reads
    it, or why it cannot be expanded, or None when no view has that name (a table)."""
    view = _views_named(name).first()
    if view is None:
        return None
    version = (
        view.versions.with_sql().filter(version_id=view.current_version_id).first()
        if view.current_version_id
        else None
    )
    if version is None:
        return "it has no current version"
    spark = next((r for r in version.representations.all() if r.dialect.lower() == "spark"), None)
    if spark is None:
        return f"it has no Spark SQL (its dialect is {version.original_dialect})"
    fields = list(view.schema_fields(version.schema_id).values_list("name", "type"))
    return ViewText(
        sql=spark.sql,
        namespace=tuple(version.default_namespace),
        catalog=version.default_catalog,
        columns=tuple(name for name, _ in fields),
        types=tuple(_spark_type(kind) for _, kind in fields),
    )


def _spark_type(iceberg_type: str) -> str | None:
    """A primitive Iceberg type (as the mirror keeps it: `long`, `decimal(10, 2)`) as Spark
    SQL; None for a nested one, left as the view's query gives it."""
    try:
        return render_type(iceberg_type)
    except CatalogError:
        return None


def expanded_query(query: str | exp.Query, namespace: str) -> Expanded:
    """`query` (text, or parsed: left as it is) with the views it reads expanded into their
    SQL (refresh.core.pinning), so that a refresh or the verifier can pin every table it
    reads."""
    return expand_views(
        query,
        namespace=namespace.split("."),
        catalog=settings.CATALOG_NAME,
        view=view_text,
        aliases=catalog_selectors.engine_catalogs(),
    )


def view_versions(names: Iterable[str]) -> dict[str, int | None]:
    """{"ns.view": its current version id} of those of `names` that are views (one query)."""
    pairs = [name.rpartition(".") for name in names]
    if not pairs:
        return {}
    condition = Q()
    for namespace, _, name in pairs:
        condition |= Q(namespace__name=namespace, name=name)
    rows = View.objects.filter(condition).values_list(
        "namespace__name", "name", "current_version_id"
    )
    return {f"{namespace}.{name}": version for namespace, name, version in rows}


def view_changed_since(name: tuple[str, ...], moment_ms: int) -> bool:
    """Whether the view `name` got its current version after `moment_ms` (its version log's
    newest entry is later): its text then is not the one a refresh at that moment read."""
    view = _views_named(name).first()
    if view is None:
        return False
    newest = view.log_entries.order_by("-position").values_list("timestamp_ms", flat=True)
    return (newest.first() or 0) > moment_ms


def _steps(table: Table | int | None) -> dict[int, Step]:
    """A table's snapshots from the catalog's mirror, by id (what its metadata holds)."""
    if table is None:
        return {}
    rows = TableSnapshot.objects.filter(table=table).values_list(
        "snapshot_id", "parent_snapshot_id", "operation", "summary", "schema_id"
    )
    return {
        snapshot: Step.of(snapshot, parent, operation, summary, schema_id)
        for snapshot, parent, operation, summary, schema_id in rows
    }


def check_streamable(
    query: str | exp.Query, *, namespace: str, primary_key: Sequence[str]
) -> StreamPlan:
    """How the streaming engine maintains the query, or InvalidInput saying why it cannot
    (a continuous table's create, the streaming process and a FULL table's refresh decision
    ask the same question)."""

    def is_view(name: tuple[str, ...]) -> bool:
        return _views_named(name).exists()

    levels = namespace.split(".")
    parsed = as_query(query)
    if not any(is_view(table_name(t, levels, settings.CATALOG_NAME)) for t in real_tables(parsed)):
        return plan_stream(
            parsed, namespace=levels, catalog=settings.CATALOG_NAME, primary_key=primary_key
        )
    # A view is not a stream, its tables are: the views are merged into the query (as an
    # incremental refresh reads them), and the merged query is what the stream runs.
    views: dict[str, tuple[str, int | None]] = {}
    expanded = expanded_query(parsed, namespace)
    merged = flattened(expanded) if not expanded.unexpanded else None
    if merged is None or any(is_view(name) for name in expanded.tables):
        return plan_stream(  # refuses, naming the view
            parsed,
            namespace=levels,
            catalog=settings.CATALOG_NAME,
            primary_key=primary_key,
            is_view=is_view,
        )
    plan = plan_stream(
        merged, namespace=levels, catalog=settings.CATALOG_NAME, primary_key=primary_key
    )
    source_snapshots([("", *name) for name in expanded.views], views)
    return replace(
        plan,
        query=merged.sql(dialect="spark"),
        views=tuple((name, version) for name, (_, version) in sorted(views.items())),
    )


def state_of(
    *,
    version: int,
    snapshots: dict[str, int | None],
    started_ms: int,
    views: Mapping[str, tuple[str, int | None]] | None = None,
) -> RefreshState:
    """The refresh state a refresh of definition `version` records in its snapshot: every
    source table it read ("ns.table" -> snapshot, as `source_snapshots` found them) with
    its table UUID (one query), and the views it read through at their versions."""
    uuids = source_uuids(snapshots)
    return refresh_state(
        version=version,
        sources={q: (uuids[q], snapshot) for q, snapshot in snapshots.items()},
        started_ms=started_ms,
        views=views,
    )


def source_uuids(names: Iterable[str]) -> dict[str, str]:
    """Each source table's UUID ("ns.table" -> uuid, "" for one not found), in one query:
    what `state_of` records, and what the streaming process hands its Django-free Spark
    side, whose micro-batches make their refresh states themselves."""
    wanted = {tuple(q.rsplit(".", 1)): q for q in names}
    uuids = dict.fromkeys(wanted.values(), "")
    if wanted:
        rows = Table.objects.filter(
            namespace__name__in={ns for ns, _ in wanted}, name__in={n for _, n in wanted}
        ).values_list("namespace__name", "name", "uuid")
        for ns, name, uuid in rows:
            if (ns, name) in wanted:
                uuids[wanted[(ns, name)]] = str(uuid)
    return uuids


def plan_of(mt: MaterializedTable, parsed: exp.Query | None = None) -> StreamPlan | str:
    """How the continuous mode would maintain the table's query (`parsed`, when the caller
    parsed it already), or why it cannot."""
    try:
        return check_streamable(
            parsed if parsed is not None else mt.query,
            namespace=mt.default_namespace or mt.table.namespace.name,
            primary_key=mt.primary_key,
        )
    except CatalogError as error:
        message = getattr(error, "message", None) or str(error)
        reason = message.partition("this query: ")[2] or message
        return f"the query cannot be kept incrementally: {reason.removesuffix(USE_FULL)}"


def decide(
    mt: MaterializedTable,
    *,
    partition: dict[str, str] | None,
    force: bool,
    full_asked: bool,
) -> RefreshPlan:
    """The run's plan (refresh.core.plan): its query parsed once, the source snapshots it
    reads, how it refreshes (refresh.core.incremental) and why, and the continuous mode's
    plan of the query when the decision is INCREMENTAL. Decided from the catalog's mirror:
    no Spark job."""
    namespace = mt.default_namespace or mt.table.namespace.name
    parsed = parsed_or_none(mt.query)
    views: dict[str, tuple[str, int | None]] = {}
    now, unknown = source_snapshots(query_sources(_source(mt.query, parsed), namespace), views)
    flat: exp.Query | None = None
    owner_policies = tuple(rights.owner_policies(mt))

    def planned(decision: Decision, stream: StreamPlan | None = None) -> RefreshPlan:
        return RefreshPlan(
            version=mt.current_version,
            query=mt.query,
            namespace=namespace,
            parsed=parsed,
            snapshots=now,
            decision=decision,
            partition=partition or None,
            stream=stream,
            expectations=ex.from_json(mt.expectations),
            flat=flat if stream is not None else None,
            views=views,
            policies=owner_policies,
        )

    if mt.refresh_mode == RefreshMode.CONTINUOUS:
        # A continuous table's manual refresh recomputes it (made by the streaming process,
        # its stream paused: refresh.streams).
        return planned(full("a continuous table's manual refresh recomputes it"))
    successes = list(
        RefreshRun.objects.filter(
            materialized_table=mt,
            state=RefreshRun.State.SUCCEEDED,
        )
        .exclude(action=RefreshRun.Action.NO_DATA)
        # Micro-batches record offsets, not the snapshots a refresh starts from.
        .exclude(trigger=RefreshRun.Trigger.CONTINUOUS)
        # A rebuild read its sources as they were during its job, not at the snapshots it
        # recorded before: the next refresh recomputes (a new definition anyway).
        .exclude(trigger=RefreshRun.Trigger.REBUILD)
        .order_by("-finished_at", "-id")
        .values(
            "pk",
            "partition",
            "source_snapshots",
            "definition_version",
            "snapshot_id",
            "started_at",
            "queued_at",
        )[:200]
    )
    later_own: list[int] = []
    baseline = None
    for row in successes:
        if not row["partition"] or (partition and row["partition"] == partition):
            baseline = Baseline(
                run_id=row["pk"],
                source_snapshots=row["source_snapshots"] or {},
                definition_version=row["definition_version"],
                table_snapshot=row["snapshot_id"],
                started_ms=_ms(row["started_at"] or row["queued_at"]),
            )
            break
        if not partition:  # a whole-table refresh needs every partition as a run left it
            return planned(
                full(f"the last refresh (run {row['pk']}) covered only {row['partition']}")
            )
        later_own.append(row["snapshot_id"])
    changed = [s for s in now if baseline is None or baseline.source_snapshots.get(s, -1) != now[s]]
    views_changed = _views_changed(mt, baseline, views) if baseline is not None else ""
    # A skip is decided from the snapshot ids alone: no lineage.
    skipping = baseline is not None and not (
        changed or unknown or force or full_asked or views_changed
    )
    if views and not skipping:
        # Their SQL merged into the query: the tables they read are its sources.
        expanded = expanded_query(_source(mt.query, parsed), namespace)
        flat = None if expanded.unexpanded else flattened(expanded)
    shape = flat if flat is not None else _source(mt.query, parsed)
    plan = "" if skipping else plan_of(mt, flat if flat is not None else parsed)
    table = Table.objects.filter(pk=mt.table_id).values_list("current_snapshot_id", flat=True)
    decision = decide_refresh(
        now=now,
        unknown=unknown,
        baseline=baseline,
        lineages={source: _steps(_table_named(source)) for source in changed},
        plan=plan,
        table_lineage={} if skipping else _steps(mt.table_id),
        table_snapshot=table.first(),
        own_snapshots=later_own,
        definition_version=mt.current_version,
        partition=partition,
        partition_columns=list(partition or {}),
        force=force,
        full_asked=full_asked,
        options=mt.options,
        full_outer_join=isinstance(plan, StreamPlan) and has_full_outer_join(shape),
        primary_key=tuple(mt.primary_key or ()),
        read_twice=read_twice(shape, namespace) if isinstance(plan, StreamPlan) else (),
        null_supplied=null_supplied_key(shape, tuple(mt.primary_key or ()))
        if isinstance(plan, StreamPlan)
        else "",
        views_changed=views_changed,
        read_through_policies=rights.read_through_policies(now, owner_policies),
    )
    return planned(decision, plan if isinstance(plan, StreamPlan) else None)


def _views_changed(
    mt: MaterializedTable, baseline: Baseline, views: dict[str, tuple[str, int | None]]
) -> str:
    """How the views the query reads now differ from those the baseline refresh read (its
    snapshot's refresh state records them); '' when they do not."""
    from refresh.core.refresh_state import read

    if not views:
        return ""
    summary = (
        TableSnapshot.objects.filter(table_id=mt.table_id, snapshot_id=baseline.table_snapshot)
        .values_list("summary", flat=True)
        .first()
    )
    state = read(summary)
    then = state.views if state is not None else None
    for name, (_, version) in sorted(views.items()):
        if then is None or name not in then:
            # A refresh that recorded no view versions (an older one, or one that committed
            # nothing): the view's version log says whether it changed since that run.
            if view_changed_since(tuple(name.split(".")), baseline.started_ms):
                return f"the view {name} has a version newer than run {baseline.run_id}"
            continue
        if then.get(name) != version:
            return (
                f"the view {name} is at version {version}, not at the version run "
                f"{baseline.run_id} read ({then.get(name, 'none')})"
            )
    return ""


def read_twice(query: str | exp.Query, namespace: str) -> list[str]:
    """The tables the query names more than once ("ns.table")."""
    from collections import Counter

    parsed = as_query(query)
    names = Counter(
        ".".join(table_name(t, namespace.split("."), settings.CATALOG_NAME))
        for t in real_tables(parsed)
    )
    return sorted(name for name, count in names.items() if count > 1)


def _ms(moment: Any) -> int:
    return int(moment.timestamp() * 1000) if moment is not None else 0


def _source(query: str, parsed: exp.Query | None) -> str | exp.Query:
    return parsed if parsed is not None else query


def _table_named(qualified: str) -> Table | None:
    namespace, _, name = qualified.rpartition(".")
    return Table.objects.filter(namespace__name=namespace, name=name).first()


def resolve_sources(
    query: str,
    *,
    namespace: str,
    own: tuple[str, str],
    planned: Collection[str] = (),
    actor: Any = None,
) -> list[str]:
    """["ns.name", ...] the query reads, each a table, view or materialized table of this
    catalog; an unknown one, one of another catalog, or one that (through views and other
    materialized tables) reads the table being defined is refused with its line and
    column in the query. `planned` names objects a plan's earlier statements create: they
    count as there (a dry run changes nothing, so they are not). Given the `actor` who
    defines the table, each source must be one it may read (refresh.rights.check_source):
    one it may not see is refused as an unknown one."""
    from sqlglot import exp

    from catalog.core.sql import parse_query

    parsed = parse_query(query, "spark")
    _refuse_reflection(parsed)
    ctes = {cte.alias_or_name for cte in parsed.find_all(exp.CTE)}
    found: list[str] = []
    for table in parsed.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier):
            continue  # a table-valued function (range(...)); the worker's sandbox decides
        parts = [part.name for part in table.parts]
        if len(parts) == 1 and parts[0] in ctes:
            continue
        meta = table.this.meta if isinstance(table.this, exp.Expression) else {}
        line, column = meta.get("line"), meta.get("col")
        if column is not None:
            column = max(1, column - len(parts[-1]) + 1)
        if len(parts) >= 3 and parts[0] != settings.CATALOG_NAME:
            raise SqlError(
                f"{'.'.join(parts)} is not in this catalog ({settings.CATALOG_NAME}): a "
                "materialized table reads tables, views and materialized tables of its "
                "own catalog",
                line=line,
                column=column,
                field="query",
            )
        if len(parts) >= 3:
            parts = parts[1:]
        ns = ".".join(parts[:-1]) if len(parts) > 1 else namespace
        qualified = f"{ns}.{parts[-1]}"
        if (ns, parts[-1]) == own:
            raise SqlError(
                f"A materialized table cannot read itself: {qualified}",
                line=line,
                column=column,
                field="query",
            )
        in_namespace = Namespace.objects.filter(name=ns).first()
        holder = catalog_selectors.holder_of(in_namespace, parts[-1]) if in_namespace else None
        if actor is not None and holder is not None:
            holder = rights.check_source(
                access.for_user(actor), holder, qualified, line=line, column=column
            )
        if holder is None and qualified not in planned:
            raise SqlError(
                f"Table or view not found: {qualified}", line=line, column=column, field="query"
            )
        if qualified not in found:
            found.append(qualified)
    _refuse_cycle(found, own)
    return found


#: Spark functions that call any static Java method (System.exit included): a query that
#: refresh workers run on the app's behalf must not reach into their JVM. A first pass
#: here, with no worker asked; the worker's sandbox (runtime.spark.sandbox) refuses them in
#: Spark's own plan, where no spelling escapes it.
REFLECTION_FUNCTIONS = frozenset({"reflect", "java_method", "try_reflect"})


def _refuse_reflection(parsed: Any) -> None:
    from sqlglot import exp

    for call in parsed.find_all(exp.Anonymous, exp.Func):
        name = (call.name if isinstance(call, exp.Anonymous) else call.sql_name()).lower()
        if name in REFLECTION_FUNCTIONS:
            raise InvalidInput(
                f"{name}() calls Java methods inside the refresh workers and is not allowed "
                "in a materialized table's query",
                field="query",
            )


def _refuse_cycle(sources: list[str], own: tuple[str, str]) -> None:
    """Walk what the sources read (views through their current version, materialized
    tables through their query) and refuse a path that leads back to `own`."""
    target = f"{own[0]}.{own[1]}"
    pending = [(s, [s]) for s in sources]
    seen: set[str] = set()
    while pending:
        name, path = pending.pop()
        if name == target:
            raise InvalidInput(
                "The query reads itself through a cycle: " + " -> ".join([target, *path]),
                field="query",
            )
        if name in seen:
            continue
        seen.add(name)
        ns, _, short = name.rpartition(".")
        view = View.objects.filter(namespace__name=ns, name=short).first()
        if view is not None:
            ours = catalog_selectors.catalogs_meaning_this({d[0] for d in view.dependencies})
            for dependency in view.dependencies:
                catalog, *levels, dep_name = dependency
                if catalog not in ours:
                    continue
                qualified = f"{'.'.join(levels)}.{dep_name}"
                pending.append((qualified, [*path, qualified]))
            continue
        mt = MaterializedTable.objects.filter(table__namespace__name=ns, table__name=short).first()
        if mt is not None:
            pending.extend((s, [*path, s]) for s in mt.sources)


def readers_of(namespace: str, name: str) -> list[str]:
    """The views and materialized tables that read `namespace.name`."""
    qualified = f"{namespace}.{name}"
    readers = []
    for view in View.objects.reading(namespace, name).select_related("namespace"):
        readers.append(f"view {view}")
    for mt in MaterializedTable.objects.filter(sources__icontains=name).select_related(
        "table__namespace"
    ):
        if qualified in mt.sources:
            readers.append(f"materialized table {mt}")
    return readers

"""What a materialized table reads, down to tables, and the snapshots those tables are at:
the input of Snowflake's NO_DATA rule (a refresh whose sources did not change since the last
successful one is skipped without starting a Spark job).

Sources resolve through the catalog's mirror: a view stands for what its current version
reads, a materialized table for its own data table, which is an ordinary catalog table. No
metadata file is read, so the decision takes a few queries."""

from __future__ import annotations

from django.conf import settings

from catalog import services
from catalog.core.errors import CatalogError
from catalog.core.sql import dependencies, parse_query
from catalog.models import Table, View
from refresh.models import MaterializedTable, RefreshRun


def query_sources(query: str, namespace: str) -> list[tuple[str, ...]]:
    """(catalog, *namespace, name) of each table or view the query names."""
    try:
        parsed = parse_query(query, "spark")
    except CatalogError:
        return []
    return dependencies(parsed, ("", *namespace.split(".")))


def source_snapshots(sources: list[tuple[str, ...]]) -> tuple[dict[str, int | None], list[str]]:
    """({"ns.table": current snapshot id, None before the first}, sources this catalog does
    not hold) of every table the sources read, through views."""
    snapshots: dict[str, int | None] = {}
    unknown: list[str] = []
    pending = [tuple(s) for s in sources]
    seen: set[tuple[str, ...]] = set()
    while pending:
        catalog, *levels, name = pending.pop()
        namespace = ".".join(levels)
        qualified = f"{namespace}.{name}"
        if (namespace, name) in seen:
            continue
        seen.add((namespace, name))
        if catalog and catalog != settings.CATALOG_NAME:
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
        pending.extend(tuple(d) for d in view.dependencies)
    return snapshots, unknown


def unchanged_since_last_success(
    mt: MaterializedTable, partition: dict[str, str] | None = None
) -> tuple[bool, dict[str, int | None]]:
    """Whether every source is at the snapshot the last successful refresh covering the
    same rows read (for the whole table: the last full refresh; for a partition: the last
    full refresh or refresh of that partition, whichever came later), and the snapshots
    now (the run records them). A source this catalog does not hold is never known to be
    unchanged."""
    now, unknown = source_snapshots(
        query_sources(mt.query, mt.default_namespace or mt.table.namespace.name)
    )
    successes = RefreshRun.objects.filter(
        materialized_table=mt,
        state=RefreshRun.State.SUCCEEDED,
        action__in=[RefreshRun.Action.FULL, RefreshRun.Action.PARTITION],
    ).order_by("-finished_at", "-id")
    last = None
    for action, run_partition, snapshots in successes.values_list(
        "action", "partition", "source_snapshots"
    )[:200]:
        if action == RefreshRun.Action.FULL or (partition and run_partition == partition):
            last = snapshots
            break
    return (last is not None and not unknown and last == now), now

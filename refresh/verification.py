"""Prove a materialized table's snapshots: each of the newest N snapshots whose summary holds
a refresh state (refresh.core.refresh_state) is compared with its definition's query,
recomputed by Spark over the source snapshots the state records (time travel,
refresh.spark.verify), and the verdict is kept with the table's history
(services.record_verification). Runs where Spark is: a job on a worker (the API and the
page), or `manage.py verify_materialized_table` in a process of its own.

A query that reads views is recomputed with each view expanded into its current SQL
(refresh.core.pinning, as the refresh did), its tables at the recorded snapshots.

A snapshot is UNVERIFIABLE, with the reason, when what it answers can no longer be
recomputed: its definition version is gone, a source's recorded snapshot was expired or its
table replaced (another UUID), or a view it reads cannot be expanded or got a new version
after the refresh started (its tables are recorded, not its text)."""

from __future__ import annotations

import time
from typing import Any

from catalog.core.errors import CommitConflict, InvalidInput
from catalog.models import Table, TableSnapshot
from refresh import analysis, rights, selectors, services, sources
from refresh.core import expectations as ex
from refresh.core.pinning import Expanded
from refresh.core.refresh_state import RefreshState, read, read_partition
from refresh.models import MaterializedTable, Verification
from runtime.spark.policies import reading_as

#: At most this many snapshots per request (each is a Spark job over the sources).
MAX_SNAPSHOTS = 20


def verify(mt: MaterializedTable, *, snapshots: int = 1, actor: Any = None) -> list[Verification]:
    """Verify the newest `snapshots` snapshots with a refresh state, newest first."""
    if isinstance(snapshots, bool) or not isinstance(snapshots, int):
        raise InvalidInput("snapshots must be a whole number", field="snapshots")
    if not 1 <= snapshots <= MAX_SNAPSHOTS:
        raise InvalidInput(
            f"snapshots must be between 1 and {MAX_SNAPSHOTS}, not {snapshots}", field="snapshots"
        )
    candidates = selectors.snapshots_with_refresh_state(mt, limit=snapshots)
    if not candidates:
        raise CommitConflict(
            f"{mt} has no snapshot that records a refresh state yet: refresh it first "
            "(snapshots written before refresh states and people's changes record none)"
        )
    # With the owner's rights, as a refresh: the sources of every definition version to
    # be recomputed, before Spark reads anything.
    versions = {state.view_version_id for _, summary in candidates if (state := read(summary))}
    named = mt.versions.filter(version_id__in=versions).values_list("sources", flat=True)
    rights.check_owner_reads(mt, sources=dict.fromkeys(s for row in named for s in row))
    # Before the first verdict is written: in a web request this becomes a job whole.
    analysis.need_spark("Spark recomputes the query to verify the table")
    return [_verify_one(mt, snapshot_id, summary, actor) for snapshot_id, summary in candidates]


def _verify_one(
    mt: MaterializedTable, snapshot_id: int, summary: dict[str, str], actor: Any
) -> Verification:
    state = read(summary)
    assert state is not None  # the selector keeps only snapshots whose state reads
    recorded = {s.qualified: s.snapshot_id for s in state.tables}
    common = {
        "snapshot_id": snapshot_id,
        "definition_version": state.view_version_id,
        "source_snapshots": recorded,
        "actor": actor,
    }
    version = mt.versions.filter(version_id=state.view_version_id).first()
    if version is None:
        reason = f"definition version {state.view_version_id} is gone"
    else:
        expanded = sources.expanded_query(version.query, version.default_namespace)
        reason = _unverifiable(expanded, state)
    if reason:
        return services.record_verification(
            mt, verdict=Verification.Verdict.UNVERIFIABLE, reason=reason, **common
        )
    started = time.perf_counter()
    # Recomputed as the refresh computed it: through the owner's row filters and masks.
    with reading_as(rights.owner_policies(mt)):
        verdict = analysis.verify_snapshot(
            query=expanded.query,
            namespace=version.default_namespace,
            target=[*mt.table.namespace.name.split("."), mt.table.name],
            snapshot_id=snapshot_id,
            pins={tuple(name.split(".")): snapshot for name, snapshot in recorded.items()},
            partition=read_partition(summary),
            expectations=ex.from_json(version.expectations),
        )
    return services.record_verification(
        mt,
        verdict=Verification.Verdict.EXACT if verdict.exact else Verification.Verdict.DIFFERS,
        missing_rows=verdict.missing,
        extra_rows=verdict.extra,
        sample={
            "columns": list(verdict.columns),
            "missing": verdict.missing_sample,
            "extra": verdict.extra_sample,
        },
        seconds=time.perf_counter() - started,
        **common,
    )


def _unverifiable(expanded: Expanded, state: RefreshState) -> str:
    """Why the state cannot be recomputed any more ("" when it can)."""
    if expanded.unexpanded:
        return f"the query reads a view that cannot be expanded ({expanded.unexpanded[0]})"
    for view in expanded.views:
        if sources.view_changed_since(view, state.refresh_start_timestamp_ms):
            return (
                f"the view {'.'.join(view)} has a new version since the refresh, whose text "
                "would be read instead of the one the refresh read"
            )
    for source in state.tables:
        table = Table.objects.filter(
            namespace__name=".".join(source.namespace), name=source.name
        ).first()
        if table is None:
            return f"the source {source.qualified} is gone"
        if source.uuid and str(table.uuid) != source.uuid:
            return f"the source {source.qualified} was replaced by another table since"
        if source.snapshot_id is not None and not (
            TableSnapshot.objects.filter(table=table, snapshot_id=source.snapshot_id).exists()
        ):
            return f"snapshot {source.snapshot_id} of {source.qualified} is gone (expired)"
    return ""

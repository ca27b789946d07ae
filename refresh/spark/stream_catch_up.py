"""A stopped stream's catch-up (a source snapshot it cannot read: a DELETE, UPDATE, MERGE INTO
or overwrite; a merge plan's static source that moved on): from the snapshots the table
holds (refresh.spark.stream_offsets.stream_position) to the sources' current ones, the row
changes are applied by the table's primary key in one commit (`plan_catch_up`, `catch_up`:
refresh.spark.changes.incremental_refresh), and the caller starts the stream again just
after those snapshots, as after a load; where that is not possible,
refresh.core.incremental.catch_up says why and the caller loads. Django-free."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from dataclasses import replace as replace_plan
from typing import TYPE_CHECKING, Any

from refresh.core import expectations as ex
from refresh.core import incremental
from refresh.core.incremental import Decision, Kind
from refresh.core.streaming import StreamPlan
from refresh.spark.changes import Applied, incremental_refresh

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
from refresh.spark.stream_loads import pinned_snapshots
from refresh.spark.stream_offsets import source_lineage, stream_position


@dataclass(frozen=True)
class CatchUp:
    """How a stopped stream catches up (refresh.core.incremental.catch_up's decision), the
    snapshots the table holds (`position`, or why they are unknown) and the sources' pins
    now ("ns.table" -> (snapshot id, ms) or None), which the catch-up reads and the stream
    then starts just after."""

    decision: Decision
    position: Mapping[str, int | None] | str
    pins: Mapping[str, Any]


def plan_catch_up(
    session: SparkSession,
    *,
    plan: StreamPlan,
    key: Sequence[str],
    catalog: str,
    checkpoint: str,
    start_after: Mapping[str, Any],
    full_outer_join: bool = False,
    read_twice: Sequence[str] = (),
    null_supplied: str = "",
) -> CatchUp:
    """Where the stopped stream of a table whose primary key is `key` (empty: none) stands
    (`stream_position`), its sources' snapshots now, and what catching up from one to the
    other takes (refresh.core.incremental.catch_up: INCREMENTAL, NO_DATA or FULL with why).
    Reads metadata and the checkpoint only: no row."""
    sources = [(catalog, *source) for source in (*plan.streams, *plan.static)]
    pins = pinned_snapshots(session, sources)
    now = {name: (pin[0] if pin else None) for name, pin in pins.items()}
    position = stream_position(
        session, plan=plan, catalog=catalog, checkpoint=checkpoint, start_after=start_after
    )
    held = {} if isinstance(position, str) else position
    # The lineages of the sources that moved only (one metadata read each).
    lineages = {
        name: source_lineage(session, source)
        for source in sources
        for name in [".".join(source[1:])]
        if held.get(name, -1) != now[name]
    }
    decision = incremental.catch_up(
        position=position,
        now=now,
        lineages=lineages,
        key=key,
        full_outer_join=full_outer_join,
        read_twice=read_twice,
        null_supplied=null_supplied,
    )
    return CatchUp(decision, position, pins)


def catch_up(
    session: SparkSession,
    caught: CatchUp,
    *,
    plan: StreamPlan,
    key: Sequence[str],
    query: str,
    target: Sequence[str],
    catalog: str,
    namespace: Sequence[str],
    merge_turn: Callable[[], AbstractContextManager[Any]] = nullcontext,
    properties: Mapping[str, str] | None = None,
    expectations: Sequence[ex.Expectation] = (),
    violations: dict[str, int] | None = None,
) -> Applied:
    """Apply an INCREMENTAL catch-up (`plan_catch_up`): each moved source's changes from
    the snapshot the table holds to its pin, by the table's primary key `key`
    (refresh.spark.changes.incremental_refresh), every source read at its pin, in one
    commit whose summary gets `properties` (the refresh state of the pins, the host's
    token). Touched keys are recomputed and merged, never combined nor appended: the table
    may hold a little more than its position (`stream_position`). UnreadableChanges when a
    source's changes cannot be read after all (equality deletes, a snapshot expired
    meanwhile)."""
    if caught.decision.kind is not Kind.INCREMENTAL:
        raise ValueError(f"nothing to apply: {caught.decision.reason}")
    # Always by key, even for sources that only appended: appending the rows of a batch
    # the table may already hold would write them twice; merging them by key cannot.
    keyed = replace_plan(plan, mode="merge", key=tuple(plan.key or key))
    by_name = {".".join(source): tuple(source) for source in (*plan.streams, *plan.static)}
    return incremental_refresh(
        session,
        plan=keyed,
        query=query,
        target=target,
        catalog=catalog,
        namespace=namespace,
        deltas={by_name[d.source]: (d.since, d.until) for d in caught.decision.deltas},
        changed=[by_name[d.source] for d in caught.decision.deltas if d.changed],
        pins={
            source: (caught.pins[name][0] if caught.pins.get(name) else None)
            for name, source in by_name.items()
        },
        merge_turn=merge_turn,
        properties=properties,
        expectations=expectations,
        violations=violations,
        combining=False,
    )

"""What one refresh run does, decided once before any Spark job: a `RefreshPlan`.

A run is claim -> decide -> execute -> record (refresh.runner). The decide step
(refresh.sources.decide for a refresh, refresh.sources.rebuild_plan for a rebuild) makes
one plan: the definition the run refreshes with, its query parsed once, the sources pinned
at the snapshots the run records, the decision with its reason, and the partition. The
execute step works on the plan alone, handing the parsed query down (a step that rewrites
it works on a copy), so one run parses its query once. Django-free."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sqlglot import exp

from catalog.core.policies import TablePolicy
from refresh.core.definition import Definition
from refresh.core.expectations import Expectation
from refresh.core.incremental import Decision, Kind
from refresh.core.streaming import StreamPlan


@dataclass(frozen=True)
class RefreshPlan:
    #: The definition refreshed with: the table's current one, or a rebuild's new version.
    version: int | None
    query: str
    #: Names in the query resolve against this namespace ("sales" or "sales.eu").
    namespace: str
    #: `query` parsed, or None when it does not parse (Spark then says why, as the run's
    #: error). Shared by every step: one that changes it works on `parsed.copy()`.
    parsed: exp.Query | None = field(compare=False, repr=False)
    #: Every source table the query reads, through views ("ns.table" -> snapshot id, None
    #: for one empty then): what the run reads and records.
    snapshots: Mapping[str, int | None]
    decision: Decision
    partition: Mapping[str, str] | None = None
    #: The continuous mode's plan of the query, for an INCREMENTAL decision.
    stream: StreamPlan | None = None
    #: The query an INCREMENTAL decision runs, when it reads views: their SQL merged into
    #: it (refresh.core.pinning.flattened), so that their tables are its sources.
    flat: exp.Query | None = field(default=None, compare=False, repr=False)
    #: The views the query reads through ("ns.view" -> (uuid, current version)), which the
    #: refresh state records.
    views: Mapping[str, tuple[str, int | None]] = field(default_factory=dict)
    expectations: tuple[Expectation, ...] = ()
    #: A rebuild's whole definition (partitioning included) and the table properties its
    #: commit sets; None for a refresh.
    rebuild: Definition | None = None
    properties: Mapping[str, str] = field(default_factory=dict)
    #: The row filters and masks that apply to the table's owner, bound to the owner: the
    #: run's Spark reads the sources through them (runtime.spark.policies).
    policies: tuple[TablePolicy, ...] = ()

    @property
    def kind(self) -> Kind:
        return self.decision.kind

    @property
    def reason(self) -> str:
        return self.decision.reason

    @property
    def source(self) -> str | exp.Query:
        """The query as the execute step hands it down: parsed, or its text when it does
        not parse."""
        return self.parsed if self.parsed is not None else self.query

"""What one streaming host holds between its passes (`HostState`): its StreamHost row, its
Spark session, the queries it runs (`Running`), and what it remembers of its tables (when to
retry a stream, why a micro-batch refused to read or failed an expectation, why a table is
recomputed). Also the few reads and writes of a continuous table every job of the process
shares: which tables should stream, a query's signature, a table's names, its stream status."""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings

from refresh import stream_hosts
from refresh.core.freshness import RefreshMode
from refresh.core.streaming import StreamPlan
from refresh.models import MaterializedTable, StreamHost
from runtime.spark.session import SparkSessionConfig

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

#: A stream that failed for another reason than a rewritten source is retried after this.
RETRY_SECONDS = 30.0


@dataclass
class Running:
    mt_id: int
    query: StreamingQuery
    signature: tuple
    checkpoint: str
    plan: StreamPlan
    #: time.monotonic() at the start: a static source's move recomputes the table at most
    #: once per trigger interval, so the stream makes progress between recomputes.
    started: float = 0.0
    last_progress_batch: int = -1


class HostState:
    """One streaming host's state; the jobs of refresh.streams read and change it."""

    def __init__(
        self,
        config: SparkSessionConfig,
        *,
        poll_seconds: float = 2.0,
        host_name: str | None = None,
    ) -> None:
        self.config = config
        self.poll_seconds = poll_seconds
        self.host_name = host_name
        self.host: StreamHost | None = None
        #: When (time.monotonic()) another host's lease next ends, as the last pass saw it.
        self.next_expiry: float | None = None
        self.running: dict[int, Running] = {}
        self.retry_after: dict[int, float] = {}
        #: Why a micro-batch refused to read (refresh.rights), by table, until its query ends.
        self.refusals: dict[int, str] = {}
        #: The FAIL UPDATE expectation that failed a micro-batch (its message, and the
        #: batch's counts of every expectation), by table, until its query ends.
        self.expectation_failures: dict[int, tuple[str, dict[str, int]]] = {}
        self.last_compaction = 0.0
        #: Why a table is recomputed (refresh.streams.catch_up), for its load's run, by table.
        self.recompute_reasons: dict[int, str] = {}
        #: A stream caught up or was sent to a recompute in this pass (`sync_once`).
        self.restarting = False
        self._spark: SparkSession | None = None
        self.stopping = threading.Event()
        self.beating: threading.Thread | None = None

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            self._spark = self.config.build()
        return self._spark

    @property
    def stamp(self) -> dict[str, str]:
        """The snapshot-summary entry of this host's commits to a table: the catalog swaps
        them only while this host holds the table's lease (stream_hosts.check_commit)."""
        return {stream_hosts.HOST_PROPERTY: str(self.host.token)} if self.host else {}

    @property
    def worker(self) -> str:
        """How runs name this process: "streams:" and the host's name."""
        return f"streams:{self.host.name if self.host else os.getpid()}"


def desired_tables() -> dict[int, MaterializedTable]:
    """The tables whose streams should run (on some host): ACTIVATED continuous ones."""
    return {
        mt.pk: mt
        for mt in MaterializedTable.objects.select_related("table__namespace").filter(
            refresh_mode=RefreshMode.CONTINUOUS, state=MaterializedTable.State.ACTIVATED
        )
    }


def signature(mt: MaterializedTable) -> tuple:
    """What a running query was started from: another one stops it and starts it anew."""
    return (
        mt.current_version,
        mt.stream_checkpoint,
        mt.freshness_value,
        mt.freshness_unit,
        json.dumps(mt.stream_options, sort_keys=True),
    )


def levels(mt: MaterializedTable) -> list[str]:
    return (mt.default_namespace or mt.table.namespace.name).split(".")


def target(mt: MaterializedTable) -> list[str]:
    return [settings.CATALOG_NAME, *mt.table.namespace.name.split("."), mt.table.name]


def set_status(mt_id: int, status: str, *, error: str = "") -> None:
    MaterializedTable.objects.filter(pk=mt_id).update(stream_status=status, stream_error=error)


def first_line(error: object) -> str:
    text = str(getattr(error, "desc", None) or error)
    return text.strip().split("\n")[0][:2000]

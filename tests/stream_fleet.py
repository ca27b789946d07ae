"""Several streaming hosts on one stack (tests.refresh_stack): start more `run_streams`
processes, and read from the stack's SQLite database which host holds which table and
when each host's micro-batches ran. Shared by the takeover test
(tests/spark/test_stream_takeover.py) and its bench (bench/takeover.py)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

from tests.live_server import REPO_ROOT
from tests.refresh_stack import RefreshStack

#: Six continuous tables over a source `events` (id, k, v): four append plans and two
#: GROUP BYs kept by primary key, what the takeover test and bench spread over two hosts.
QUERIES = {
    "positive": "SELECT id, k, v FROM events WHERE v > 0",
    "negative": "SELECT id, k, v FROM events WHERE v < 0",
    "doubled": "SELECT id, v * 2 AS v2 FROM events",
    "keyed_a": "SELECT id, k FROM events WHERE k = 'k1'",
    "totals": "SELECT k, sum(v) AS total, count(*) AS n FROM events GROUP BY k",
    "counts": "SELECT k, count(*) AS n, max(id) AS top FROM events GROUP BY k",
}
PRIMARY_KEYS = {"totals": "k", "counts": "k"}


def create_statements(*, freshness_seconds: int, names: Iterable[str] = QUERIES) -> list[str]:
    """CREATE MATERIALIZED TABLE for each of QUERIES `names` (in the session's namespace)."""
    statements = []
    for name in names:
        query = QUERIES[name]
        key = PRIMARY_KEYS.get(name)
        constraint = f" (CONSTRAINT pk PRIMARY KEY ({key}) NOT ENFORCED)" if key else ""
        statements.append(
            f"CREATE MATERIALIZED TABLE {name}{constraint} "
            f"FRESHNESS = INTERVAL '{freshness_seconds}' SECOND AS {query}"
        )
    return statements


def host_name(process: subprocess.Popen) -> str:
    """How a streaming host started by `start_host` (or the stack) names itself."""
    return f"{os.uname().nodename}:{process.pid}"


def start_host(stack: RefreshStack, label: str) -> subprocess.Popen:
    """Another streaming host on `stack` (its own Spark), logging to `<label>.log`."""
    log = (stack.root / f"{label}.log").open("ab")
    return subprocess.Popen(
        [sys.executable, str(REPO_ROOT / "manage.py"), "run_streams", "--poll", "1"],
        cwd=REPO_ROOT,
        env=stack.server.env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def stop_host(process: subprocess.Popen, *, kill: bool = False) -> None:
    """SIGTERM (a clean stop) or SIGKILL the host's whole process group (its JVM too)."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL if kill else signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


def query_db(stack: RefreshStack, sql: str, *args: object) -> list[sqlite3.Row]:
    """Read the stack's database (read-only, beside the running app)."""
    connection = sqlite3.connect(f"file:{Path(stack.server.db_path)}?mode=ro", uri=True)
    connection.row_factory = sqlite3.Row
    try:
        return connection.execute(sql, args).fetchall()
    finally:
        connection.close()


def holders(stack: RefreshStack) -> dict[str, str | None]:
    """Each materialized table's lease holder ("hostname:pid"), as the lease rows say."""
    return {
        row["name"]: row["host"]
        for row in query_db(
            stack,
            "SELECT o.name AS name, h.name AS host FROM refresh_materializedtable mt "
            "JOIN catalog_catalogobject o ON o.id = mt.table_id "
            "LEFT JOIN refresh_streamhost h ON h.id = mt.stream_host_id",
        )
    }


def batches_after(stack: RefreshStack, moment: float) -> list[tuple[str, str, float]]:
    """(table, host, started in epoch seconds) of each micro-batch begun after `moment`."""
    found = []
    for row in query_db(
        stack,
        "SELECT table_name, worker, started_at FROM refresh_refreshrun "
        "WHERE trigger = 'CONTINUOUS' AND action = 'INCREMENTAL'",
    ):
        started = datetime.fromisoformat(row["started_at"]).replace(tzinfo=UTC).timestamp()
        if started > moment:
            name = row["table_name"].split(".")[-1]
            found.append((name, row["worker"].removeprefix("streams:"), started))
    return found


def batches_since(stack: RefreshStack, moment: float) -> dict[str, set[str]]:
    """Tables -> the hosts whose micro-batches of them started after `moment`."""
    found: dict[str, set[str]] = {}
    for name, host, _ in batches_after(stack, moment):
        found.setdefault(name, set()).add(host)
    return found


def first_batch_since(stack: RefreshStack, moment: float, host: str) -> dict[str, float]:
    """Tables -> when (epoch seconds) the first micro-batch `host` ran of them after `moment`
    started (its run's started_at: when the batch began to write)."""
    first: dict[str, float] = {}
    for name, by, started in batches_after(stack, moment):
        if by == host:
            first[name] = min(started, first.get(name, started))
    return first

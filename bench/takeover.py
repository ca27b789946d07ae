"""How soon a dead streaming host's tables run on another (issue 21, item 4).

Starts the whole stack (the app under gunicorn, a Celery worker, celery-beat, a streaming
host, Redis) on a fresh SQLite database with `--lease`-second leases, a second streaming
host, a source `bench.events` appended 3 rows a second, and six continuous tables over it
at `FRESHNESS = INTERVAL '<--freshness>' SECOND` (four append plans, two GROUP BYs with a
primary key), three on each host. Then, `--rounds` times: SIGKILL one host (its Spark JVM
with it), and measure, from the kill,

- when its tables' leases are the other host's (polled every 0.1 s), and
- when the other host's first micro-batch of each of them began (its run's start time),

then start a new host in its place and wait until the tables are spread three and three
again, each with a micro-batch on its holder. Prints each round, then the first
micro-batches' worst per round (p50 and max over the rounds) against the bar: the lease
time plus one trigger (half the freshness).

    .venv/bin/python bench/takeover.py [--rounds 5] [--lease 6] [--freshness 10] [--keep]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.stack import NS, events_source, whole_stack  # noqa: E402

if TYPE_CHECKING:
    import subprocess

    from tests.refresh_stack import RefreshStack


def kill_and_measure(
    stack: RefreshStack, victim: subprocess.Popen, survivor: subprocess.Popen, bar: float
) -> tuple[float, dict[str, float]]:
    """SIGKILL `victim`; (seconds until its tables' leases are `survivor`'s, {table: seconds
    until the survivor's first micro-batch of it began}), both from the kill."""
    from tests.stream_fleet import first_batch_since, holders, host_name, stop_host

    dead, alive = host_name(victim), host_name(survivor)
    taken_over = {n for n, h in holders(stack).items() if h == dead}
    stop_host(victim, kill=True)
    killed = time.time()
    stack.wait_for(
        lambda: all(holders(stack)[n] == alive for n in taken_over),
        timeout=bar + 60,
        what="the survivor to take the dead host's leases",
        every=0.1,
    )
    leases = time.time() - killed

    def firsts() -> dict[str, float] | None:
        found = first_batch_since(stack, killed, alive)
        return found if taken_over <= set(found) else None

    found = stack.wait_for(
        firsts, timeout=bar + 120, what="the taken tables' first micro-batches on the survivor"
    )
    return leases, {n: found[n] - killed for n in taken_over}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--lease", type=float, default=6.0)
    parser.add_argument("--freshness", type=int, default=10)
    parser.add_argument(
        "--keep", action="store_true", help="keep the temp dir (database, warehouse, logs)"
    )
    args = parser.parse_args()

    import pyarrow as pa

    from refresh.core.freshness import Freshness, TimeUnit
    from refresh.core.streaming import trigger_seconds
    from tests.stream_fleet import (
        QUERIES,
        batches_since,
        create_statements,
        holders,
        host_name,
        start_host,
        stop_host,
    )

    trigger = trigger_seconds(Freshness(args.freshness, TimeUnit.SECOND))
    bar = args.lease + trigger
    env = {
        "STREAM_LEASE_SECONDS": str(args.lease),
        "LOG_LEVEL": "INFO",
        # No compaction competes with six streams for the cores.
        "MAINTENANCE_SWEEP_SECONDS": "3600",
    }
    with whole_stack("lakeview-bench-takeover-", keep=args.keep, extra_env=env) as (stack, _):
        _, schema, events = events_source(stack)
        next_id = [0]

        def append(count: int) -> None:
            ids = list(range(next_id[0] + 1, next_id[0] + count + 1))
            next_id[0] += count
            events.append(
                pa.table(
                    {
                        "id": ids,
                        "k": [f"k{i % 3}" for i in ids],
                        "v": [(i % 5) - 2.5 for i in ids],
                    },
                    schema=schema,
                )
            )

        append(9)
        for statement in create_statements(freshness_seconds=args.freshness):
            answer = stack.statements(statement, namespace=NS)
            assert answer.status_code == 200, answer.text

        stop = threading.Event()

        def feed() -> None:
            while not stop.is_set():
                try:
                    append(3)
                except Exception as error:  # noqa: BLE001 - a lost append is retried next second
                    print(f"append failed ({error}); retrying", flush=True)
                stop.wait(1.0)

        feeder = threading.Thread(target=feed, name="feeder", daemon=True)
        feeder.start()
        hosts = [stack.streams, start_host(stack, "streams-1")]
        results: list[tuple[float, dict[str, float]]] = []
        try:
            for round_ in range(1, args.rounds + 1):
                names = [host_name(h) for h in hosts]
                stack.wait_for(
                    lambda names=names: Counter(holders(stack).values())
                    == {names[0]: 3, names[1]: 3},
                    timeout=300,
                    what="the tables to spread three and three",
                )
                spread = time.time()
                stack.wait_for(
                    lambda spread=spread: len(batches_since(stack, spread)) == len(QUERIES),
                    timeout=180,
                    what="every table's micro-batches after the spread",
                )
                victim, survivor = hosts[round_ % 2], hosts[1 - round_ % 2]
                leases, firsts = kill_and_measure(stack, victim, survivor, args.lease + trigger)
                results.append((leases, firsts))
                each = ", ".join(f"{n} {s:.1f} s" for n, s in sorted(firsts.items()))
                print(
                    f"round {round_}: leases taken {leases:.1f} s after SIGKILL; "
                    f"first micro-batches {each}",
                    flush=True,
                )
                hosts = [survivor, start_host(stack, f"streams-{round_ + 1}")]
        finally:
            stop.set()
            feeder.join(timeout=30)
            for host in hosts:
                if host is not stack.streams:  # the stack stops its own
                    stop_host(host)

    worst = [max(firsts.values()) for _, firsts in results]
    leases = [taken for taken, _ in results]
    print(
        f"\nlease {args.lease:g} s, trigger {trigger:g} s: bar (lease + trigger) {bar:g} s\n"
        f"leases taken after SIGKILL: p50 {statistics.median(leases):.1f} s, "
        f"max {max(leases):.1f} s\n"
        f"last first micro-batch of a round: p50 {statistics.median(worst):.1f} s, "
        f"max {max(worst):.1f} s ({sum(w <= bar for w in worst)} of {len(worst)} rounds "
        f"within the bar)"
    )


if __name__ == "__main__":
    main()

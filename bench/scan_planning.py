"""Server-side scan planning against pyiceberg's own, on a table of 2,000 manifests.

pyiceberg 0.12 plans a scan (`table.scan(...).plan_files()`, materialized into a list) of
one table two ways, side by side in one run against the same catalog:

    client:  scan-planning-mode=client: pyiceberg reads the manifest list and every
             manifest itself (its thread pool, the files in the OS's cache after the first
             round);
    server:  scan-planning-mode=server: pyiceberg asks the catalog (planTableScan, then
             fetchScanTasks for each plan task), which plans from its metadata cache
             (warm: the rounds after the first).

for a full scan and for a filter that column statistics decide (`id < 100`: 100 of the
2,000 files), N rounds alternating which side goes first, after one warm-up round each;
prints medians and the ratio server / client (target: at most 0.3).

The table is made through the catalog with pyiceberg: 2,000 data files of one row, each in
a manifest of its own (what 2,000 fast appends leave), committed 200 files at a time
through pyiceberg's fast-append producer writing one manifest per file. The app runs under
gunicorn (tests.live_server: one worker, four threads, SQLite, a throwaway folder), with
METADATA_CACHE_BYTES at --cache-mib (the app's 64 MiB by default: warm means every manifest
is in the cache, and 2,000 small ones fit).

    .venv/bin/python bench/scan_planning.py [--manifests 2000] [--rounds 7] [--cache-mib 64]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TARGET = 0.3
PER_COMMIT = 200
READS: dict[str, str | None] = {"full scan": None, "id < 100": "id < 100"}


def _catalog(server, mode: str):
    from pyiceberg.catalog.rest import RestCatalog

    return RestCatalog(
        "bench",
        uri=server.iceberg_uri,
        credential=server.credential,
        **{"scan-planning-mode": mode},
    )


def _one_manifest_per_file():
    """pyiceberg's fast append, writing one manifest per data file (as that many fast
    appends of one file each leave them): pyiceberg's own appends, 2,000 of them, take
    minutes (each a commit; within one transaction, pyiceberg re-applies every earlier
    update on each, quadratic)."""
    from pyiceberg.manifest import ManifestEntry, ManifestEntryStatus, ManifestFile
    from pyiceberg.table.update.snapshot import _FastAppendFiles

    class ManifestPerFile(_FastAppendFiles):
        def _manifests(self) -> list[ManifestFile]:
            added = []
            for data_file in self._added_data_files:
                spec = self._transaction.table_metadata.spec()
                with self.new_manifest_writer(spec=spec) as writer:
                    writer.add(
                        ManifestEntry.from_args(
                            status=ManifestEntryStatus.ADDED,
                            snapshot_id=self._snapshot_id,
                            sequence_number=None,
                            file_sequence_number=None,
                            data_file=data_file,
                        )
                    )
                added.append(writer.to_manifest_file())
            return added + self._existing_manifests()

    return ManifestPerFile


def _make_table(server, manifests: int) -> None:
    import pyarrow as pa
    from pyiceberg.io.pyarrow import _dataframe_to_data_files
    from pyiceberg.schema import Schema
    from pyiceberg.table.snapshots import Operation
    from pyiceberg.types import LongType, NestedField, StringType

    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "note", StringType(), required=False),
    )
    producer_class = _one_manifest_per_file()
    started = time.perf_counter()
    with _catalog(server, "client") as catalog:
        catalog.create_namespace("bench")
        table = catalog.create_table("bench.events", schema=schema)
        arrow = schema.as_arrow()
        done = 0
        while done < manifests:
            with table.transaction() as transaction:
                producer = producer_class(
                    operation=Operation.APPEND, transaction=transaction, io=table.io
                )
                for number in range(done, min(done + PER_COMMIT, manifests)):
                    rows = pa.Table.from_pylist([{"id": number, "note": f"n{number}"}], arrow)
                    for data_file in _dataframe_to_data_files(
                        transaction.table_metadata, rows, table.io, producer.commit_uuid
                    ):
                        producer.append_data_file(data_file)
                producer.commit()
            done = min(done + PER_COMMIT, manifests)
            table = table.refresh()
        count = len(table.current_snapshot().manifests(table.io))
    print(
        f"table: {count} manifests of one file of one row, in {manifests // PER_COMMIT} "
        f"commits, made in {time.perf_counter() - started:.1f} s",
        flush=True,
    )


def _timed(plan: Callable[[], int]) -> tuple[float, int]:
    started = time.perf_counter()
    files = plan()
    return time.perf_counter() - started, files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--manifests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    # The app's default (METADATA_CACHE_BYTES): a one-file manifest is charged about its
    # header's size plus 4 KB (catalog.core.metadata_cache.avro_charge), so 2,000 fit.
    parser.add_argument("--cache-mib", type=int, default=64)
    options = parser.parse_args()

    from tests.live_server import catalog_server

    with (
        tempfile.TemporaryDirectory(prefix="bench-scan-planning-") as folder,
        catalog_server(
            Path(folder),
            workers=1,
            threads=4,
            extra_env={"METADATA_CACHE_BYTES": str(options.cache_mib * 1024 * 1024)},
        ) as server,
    ):
        _make_table(server, options.manifests)
        with _catalog(server, "client") as client, _catalog(server, "server") as planner:
            sides = {
                "client": client.load_table("bench.events"),
                "server": planner.load_table("bench.events"),
            }
            assert planner.supports_server_side_planning()
            assert not client.supports_server_side_planning()
            print(f"{'read':<10} {'client s':>9} {'server s':>9} {'server/client':>14}  files")
            ratios = []
            for label, row_filter in READS.items():

                def plan(side: str, row_filter: str | None = row_filter) -> int:
                    scan = sides[side].scan(row_filter=row_filter or "true")
                    return len(list(scan.plan_files()))

                files = {side: plan(side) for side in sides}  # the warm-up round
                assert files["client"] == files["server"], files
                times: dict[str, list[float]] = {"client": [], "server": []}
                for round_number in range(options.rounds):
                    order = ("client", "server") if round_number % 2 else ("server", "client")
                    for side in order:
                        seconds, count = _timed(lambda side=side: plan(side))
                        assert count == files[side]
                        times[side].append(seconds)
                client_s = statistics.median(times["client"])
                server_s = statistics.median(times["server"])
                ratio = server_s / client_s
                ratios.append(ratio)
                print(
                    f"{label:<10} {client_s:>9.3f} {server_s:>9.3f} {ratio:>14.2f}  "
                    f"{files['server']}",
                    flush=True,
                )
            verdict = "met" if max(ratios) <= TARGET else "missed"
            print(f"target server/client <= {TARGET}: {verdict}")


if __name__ == "__main__":
    main()

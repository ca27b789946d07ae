"""Many writers replacing one view at once: the compare-and-swap lets exactly one win each
round, and every commit that reported success is in the view's history."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from catalog import services
from catalog.core.errors import CommitConflict
from catalog.core.view_metadata import read_view_metadata
from catalog.models import View

THREADS = 16
REPLACES_PER_THREAD = 25


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_sixteen_writers_replacing_one_view_lose_no_commit_and_only_see_conflicts(warehouse):
    if connection.vendor != "postgresql":
        pytest.skip("row-level concurrency is checked on PostgreSQL (make test runs it there)")
    services.create_namespace(name="race")
    services.create_view(
        namespace="race",
        name="v",
        sql="SELECT 0 AS n",
        # Keep every version, so the final log can be checked against every success.
        properties={"version.history.num-entries": "10000"},
    )
    successes: list[tuple[int, str]] = []
    failures: list[BaseException] = []
    lock = threading.Lock()
    start = threading.Barrier(THREADS)

    def writer(thread: int) -> None:
        try:
            start.wait()
            for attempt in range(REPLACES_PER_THREAD):
                try:
                    view = services.replace_view(
                        namespace="race", name="v", sql=f"SELECT {thread * 1000 + attempt + 1} AS n"
                    )
                except Exception as error:  # noqa: BLE001 - every failure is inspected below
                    with lock:
                        failures.append(error)
                else:
                    with lock:
                        successes.append((view.current_version_id, view.metadata_location))
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert successes, "no writer ever won"
    assert all(isinstance(error, CommitConflict) for error in failures), {
        type(error).__name__ for error in failures
    }
    assert len(successes) + len(failures) == THREADS * REPLACES_PER_THREAD

    view = View.objects.get(name="v")
    final = read_view_metadata(view.metadata_location)
    logged = [entry.version_id for entry in final.version_log]
    won = sorted(version_id for version_id, _ in successes)
    assert sorted(logged[1:]) == won, "each successful commit appears once in the version log"
    assert len(set(won)) == len(won)
    assert list(view.log_entries.values_list("version_id", flat=True)) == logged
    for _, metadata_location in successes:
        assert read_view_metadata(metadata_location).view_uuid == final.view_uuid
    files = list((warehouse / "race" / "v" / "metadata").glob("*.metadata.json"))
    assert len(files) == 1 + len(successes), "losers' files are removed, winners' are kept"

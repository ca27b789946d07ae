"""Many writers committing to one object at once, through the one commit path: for a view, a
table and a two-table transaction alike, the compare-and-swap lets one writer win each race,
every commit that reported success is in the object's log exactly once, every failure is the
same conflict (409, CommitFailedException), and no file a pointer or a log names is missing."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from django.db import connection

from catalog import selectors, services
from catalog.core.errors import CommitConflict
from catalog.core.tables import read_table_metadata
from catalog.core.view_metadata import read_view_metadata
from catalog.iceberg_rest.errors import error_response
from catalog.models import View

THREADS = 16
COMMITS_PER_THREAD = 25
KEEP_EVERYTHING = "10000"
SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "id", "type": "long", "required": False}],
}

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def race(commit: Callable[[int, int], str]) -> tuple[list[str], list[BaseException]]:
    """Run THREADS writers of COMMITS_PER_THREAD commits each, all starting together; return
    the metadata locations the winners were given and the losers' errors."""
    successes: list[str] = []
    failures: list[BaseException] = []
    lock = threading.Lock()
    start = threading.Barrier(THREADS)

    def writer(thread: int) -> None:
        try:
            start.wait()
            for attempt in range(COMMITS_PER_THREAD):
                try:
                    location = commit(thread, attempt)
                except Exception as error:  # noqa: BLE001 - every failure is inspected below
                    with lock:
                        failures.append(error)
                else:
                    with lock:
                        successes.append(location)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return successes, failures


def assert_only_conflicts(successes: list[str], failures: list[BaseException]) -> None:
    assert successes, "no writer ever won"
    assert len(successes) + len(failures) == THREADS * COMMITS_PER_THREAD
    assert all(isinstance(error, CommitConflict) for error in failures), {
        type(error).__name__ for error in failures
    }
    if failures:
        body = error_response(failures[0])
        assert body.status_code == 409
        assert b"CommitFailedException" in body.content


def assert_table_log_holds(namespace: str, name: str, won: list[str], folder: Path) -> None:
    """Every winner's file is the current one or in the metadata log, once; every file the
    table names exists; and the losers' files are gone."""
    table = selectors.get_table(namespace, name)
    final = read_table_metadata(table.metadata_location)
    logged = [entry.metadata_file for entry in final.metadata_log] + [table.metadata_location]
    assert len(set(logged)) == len(logged)
    assert sorted(won) == sorted(logged[1:]), "each success appears once in the log"
    for path in logged:
        assert Path(path).is_file(), f"referenced file missing: {path}"
    files = sorted(str(p) for p in (folder / "metadata").glob("*.metadata.json"))
    assert files == sorted(logged), "losers' files are removed, winners' are kept"


@pytest.fixture
def postgres_only() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("row-level concurrency is checked on PostgreSQL (make test runs it there)")


def test_sixteen_writers_replacing_one_view_lose_no_commit(postgres_only, warehouse):
    services.create_namespace(name="race")
    services.create_view(
        namespace="race",
        name="v",
        sql="SELECT 0 AS n",
        # Keep every version, so the final log can be checked against every success.
        properties={"version.history.num-entries": KEEP_EVERYTHING},
    )

    def replace(thread: int, attempt: int) -> str:
        sql = f"SELECT {thread * 1000 + attempt + 1} AS n"
        return services.replace_view(namespace="race", name="v", sql=sql).metadata_location

    successes, failures = race(replace)

    assert_only_conflicts(successes, failures)
    view = View.objects.get(name="v")
    final = read_view_metadata(view.metadata_location)
    logged = [entry.version_id for entry in final.version_log]
    won = sorted(read_view_metadata(path).current_version_id for path in successes)
    assert sorted(logged[1:]) == won, "each successful commit appears once in the version log"
    assert len(set(won)) == len(won)
    assert list(view.log_entries.values_list("version_id", flat=True)) == logged
    files = list((warehouse / "race" / "v" / "metadata").glob("*.metadata.json"))
    assert len(files) == 1 + len(successes), "losers' files are removed, winners' are kept"
    assert all(read_view_metadata(str(f)).view_uuid == final.view_uuid for f in files)


def _create_table(name: str) -> None:
    services.create_table(
        namespace="race",
        name=name,
        schema=SCHEMA,
        properties={"write.metadata.previous-versions-max": KEEP_EVERYTHING},
    )


def _set_writer(thread: int, attempt: int) -> list[dict]:
    return [{"action": "set-properties", "updates": {"writer": f"{thread}-{attempt}"}}]


def test_sixteen_writers_committing_to_one_table_lose_no_commit(postgres_only, warehouse):
    services.create_namespace(name="race")
    _create_table("t")

    def commit(thread: int, attempt: int) -> str:
        loaded = services.commit_table(
            namespace="race", name="t", requirements=[], updates=_set_writer(thread, attempt)
        )
        return loaded.metadata_location

    successes, failures = race(commit)

    assert_only_conflicts(successes, failures)
    assert_table_log_holds("race", "t", successes, warehouse / "race" / "t")


def test_sixteen_writers_committing_two_table_transactions_lose_no_commit(postgres_only, warehouse):
    services.create_namespace(name="race")
    _create_table("a")
    _create_table("b")

    def commit(thread: int, attempt: int) -> str:
        updates = _set_writer(thread, attempt)
        results = services.commit_tables(
            changes=[
                services.TableChange("race", "a", [], updates),
                services.TableChange("race", "b", [], updates),
            ]
        )
        return "|".join(r.metadata_location for r in results)

    successes, failures = race(commit)

    assert_only_conflicts(successes, failures)
    pairs = [success.split("|") for success in successes]
    assert_table_log_holds("race", "a", [a for a, _ in pairs], warehouse / "race" / "a")
    assert_table_log_holds("race", "b", [b for _, b in pairs], warehouse / "race" / "b")
    # Both tables moved together: the same writer's property is current on both.
    a = read_table_metadata(selectors.get_table("race", "a").metadata_location)
    b = read_table_metadata(selectors.get_table("race", "b").metadata_location)
    assert a.properties["writer"] == b.properties["writer"]


def _create_view_and_table_at_once(name: str) -> list[object]:
    """Start a view's and a table's create of one name together; their outcomes."""
    start = threading.Barrier(2)
    outcomes: list[object] = []

    def make(create: Callable[[], object]) -> None:
        try:
            start.wait()
            outcomes.append(create())
        except Exception as error:  # noqa: BLE001 - inspected by the caller
            outcomes.append(error)
        finally:
            connection.close()

    creates = [
        lambda: services.create_view(namespace="race", name=name, sql="SELECT 1 AS a"),
        lambda: services.create_table(namespace="race", name=name, schema=SCHEMA),
    ]
    threads = [threading.Thread(target=make, args=(create,)) for create in creates]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def test_a_view_and_a_table_created_under_one_name_at_once_make_one_object(
    postgres_only, warehouse
):
    from catalog.core.errors import AlreadyExists
    from catalog.models import CatalogObject

    services.create_namespace(name="race")
    for round_ in range(10):
        name = f"x{round_}"
        outcomes = _create_view_and_table_at_once(name)

        errors = [o for o in outcomes if isinstance(o, Exception)]
        assert len(errors) == 1, outcomes
        assert isinstance(errors[0], AlreadyExists), errors
        assert CatalogObject.objects.filter(name=name).count() == 1

"""A full refresh of a query the incremental refreshes cannot keep (an outer join, a window,
a view as a source) answers exactly the source snapshots its refresh state records, even
when a writer commits to a source between the moment the run records the snapshots and the
moment Spark reads them: every table the query reads, through the view, is pinned
(refresh.core.pinning, as refresh.runner._full does), and the verifier (refresh.spark.verify)
finds the snapshot EXACT. The same refresh read unpinned, as it was made before, is caught
by the verifier: the test can fail."""

from __future__ import annotations

import itertools

import pytest
from pyspark.sql import SparkSession

from refresh.core.pinning import ViewText, expand_views
from refresh.core.refresh_state import read, refresh_state
from refresh.spark import changes, verify
from tests.live_server import CatalogServer
from tests.spark.conftest import REST_CATALOG, rest_session

CATALOG = REST_CATALOG
BIG = "SELECT id, customer, amount FROM orders WHERE amount > 10"
#: An outer join with a view, a window and a subquery: no incremental refresh keeps it, and
#: each part once needed its own pin (one query keeps the Spark time small).
QUERY = (
    "SELECT o.id, o.amount, c.region, b.amount AS big_amount, "
    "sum(o.amount) OVER (PARTITION BY c.region) AS region_total "
    "FROM orders o LEFT OUTER JOIN customers c ON o.customer = c.customer "
    "LEFT OUTER JOIN big b ON b.id = o.id "
    "WHERE NOT EXISTS (SELECT 1 FROM returns r WHERE r.id = 0)"
)
_namespaces = itertools.count(1)


@pytest.fixture(scope="module")
def session(spark: SparkSession, catalog_server: CatalogServer) -> SparkSession:
    return rest_session(spark, catalog_server)


def current(session: SparkSession, table: str) -> int | None:
    found = session.table(f"{table}.refs").where("name = 'main'").collect()
    return found[0]["snapshot_id"] if found else None


def test_a_full_refresh_raced_by_a_writer_answers_exactly_the_snapshots_it_records(
    session: SparkSession,
):
    namespace = f"pinned{next(_namespaces)}"
    name = lambda table: f"{CATALOG}.{namespace}.{table}"  # noqa: E731
    session.sql(f"CREATE NAMESPACE {CATALOG}.{namespace}")
    session.sql(f"USE {CATALOG}.{namespace}")
    session.sql(f"CREATE TABLE {name('orders')} (id BIGINT, customer BIGINT, amount BIGINT)")
    session.sql(f"CREATE TABLE {name('customers')} (customer BIGINT, region STRING)")
    # `returns` stays empty: a source with no snapshot is pinned as empty.
    session.sql(f"CREATE TABLE {name('returns')} (id BIGINT)")
    session.sql(f"INSERT INTO {name('orders')} VALUES (1, 1, 50), (2, 2, 5), (3, 9, 70)")
    session.sql(f"INSERT INTO {name('customers')} VALUES (1, 'north'), (2, 'south')")
    session.sql(f"CREATE VIEW {name('big')} AS {BIG}")  # its names resolve in `namespace`
    session.sql(f"CREATE TABLE {name('mt')} USING iceberg AS SELECT * FROM ({QUERY}) WHERE false")
    views = {
        (namespace, "big"): ViewText(
            sql=BIG,
            namespace=(namespace,),
            columns=("id", "customer", "amount"),
            types=("BIGINT",) * 3,
        )
    }
    expanded = expand_views(QUERY, namespace=[namespace], catalog=CATALOG, view=views.get)
    assert expanded.unexpanded == ()

    # The run records its sources' snapshots (the catalog's mirror, refresh.sources)...
    recorded = {
        f"{namespace}.{t}": current(session, name(t)) for t in ("orders", "customers", "returns")
    }
    assert recorded[f"{namespace}.returns"] is None
    state = refresh_state(
        version=1, sources={s: ("", snapshot) for s, snapshot in recorded.items()}, started_ms=0
    ).summary()
    # ...a writer commits to both sources before Spark reads them...
    session.sql(f"INSERT INTO {name('orders')} VALUES (4, 1, 99), (5, 2, 60)")
    session.sql(f"DELETE FROM {name('customers')} WHERE customer = 1")
    session.sql(f"INSERT INTO {name('returns')} VALUES (0)")  # would empty the whole result

    def refresh(query: str, pins: dict) -> int:
        changes.recompute(
            session,
            query=query,
            target=[CATALOG, namespace, "mt"],
            catalog=CATALOG,
            namespace=[namespace],
            pins=pins,
            properties=state,
        )
        return current(session, name("mt"))

    def verdict(snapshot: int) -> verify.Verdict:
        [summary] = [
            r["summary"]
            for r in session.sql(f"SELECT * FROM {name('mt')}.snapshots").collect()
            if r["snapshot_id"] == snapshot
        ]
        recorded_state = read(summary)
        return verify.verify_snapshot(
            session,
            query=expanded.query,
            target=[CATALOG, namespace, "mt"],
            snapshot_id=snapshot,
            pins={(*s.namespace, s.name): s.snapshot_id for s in recorded_state.tables},
            namespace=[namespace],
            catalog=CATALOG,
        )

    # ...and the refresh reads exactly what it records, the view's table included.
    pins = {t: recorded[".".join(t)] for t in expanded.tables}
    assert set(pins) == {(namespace, t) for t in ("orders", "customers", "returns")}
    pinned = refresh(expanded.query, pins)
    assert verdict(pinned).exact
    assert session.table(name("mt")).count() > 0  # the recorded `returns` was empty
    # Read unpinned (as such a refresh was made before), the same record is wrong.
    unpinned = refresh(QUERY, {})
    found = verdict(unpinned)
    assert not found.exact and found.missing > 0, found


def test_a_view_replaced_with_sql_that_reads_a_file_fails_the_refresh_in_the_sandbox(
    session: SparkSession, tmp_path
):
    # Engines store a view's SQL as sent: a writer replaces a view a materialized table
    # reads with SQL that reads a file the worker can read. The refresh expands the view
    # into its query, and Spark's plan of it is what the sandbox checks: it is refused, and
    # the table keeps its rows.
    secret = tmp_path / "admin-password.txt"
    secret.write_text("s3cret-L4keview\n")
    namespace = f"pinned{next(_namespaces)}"
    name = lambda table: f"{CATALOG}.{namespace}.{table}"  # noqa: E731
    session.sql(f"CREATE NAMESPACE {CATALOG}.{namespace}")
    session.sql(f"CREATE TABLE {name('orders')} (id BIGINT, customer BIGINT, amount BIGINT)")
    session.sql(f"INSERT INTO {name('orders')} VALUES (1, 1, 50)")
    session.sql(f"CREATE TABLE {name('mt')} (id BIGINT, note STRING)")
    session.sql(f"INSERT INTO {name('mt')} VALUES (7, 'kept')")
    hostile = ViewText(
        sql=f"SELECT o.id, f.value AS note FROM orders o JOIN text.`{secret}` f ON true",
        namespace=(namespace,),
        columns=("id", "note"),
        types=("BIGINT", "STRING"),
    )
    expanded = expand_views(
        "SELECT id, note FROM notes",
        namespace=[namespace],
        catalog=CATALOG,
        view={(namespace, "notes"): hostile}.get,
    )
    assert str(secret) in expanded.query, "the view's SQL is in the refresh's query"
    pins = {t: current(session, f"{CATALOG}.{'.'.join(t)}") for t in expanded.tables
            if t == (namespace, "orders")}  # fmt: skip

    with pytest.raises(Exception, match="cannot be found|not allowed|refused") as refused:
        changes.recompute(
            session,
            query=expanded.query,
            target=[CATALOG, namespace, "mt"],
            catalog=CATALOG,
            namespace=[namespace],
            pins=pins,
        )
    assert "s3cret" not in str(refused.value)
    assert sorted(tuple(r) for r in session.table(name("mt")).collect()) == [(7, "kept")]

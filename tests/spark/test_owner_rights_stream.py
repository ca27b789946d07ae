"""A continuous table's micro-batch asks whether its owner may still read its sources before
it reads their new rows (refresh.spark.stream_queries' `may_read`, which the streaming process
answers from grants): once it refuses, the batch fails, the query ends with it, and nothing
of the source's new rows reaches the table."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from refresh.core.streaming import plan_stream
from refresh.spark import stream_queries
from tests.live_server import CatalogServer
from tests.spark.conftest import REST_CATALOG, rest_session

CATALOG = REST_CATALOG
QUERY = "SELECT id, amount FROM orders WHERE amount > 0"


class Revoked(Exception):
    pass


@pytest.fixture(scope="module")
def session(spark: SparkSession, catalog_server: CatalogServer) -> Iterator[SparkSession]:
    session = rest_session(spark, catalog_server)
    # Iceberg's stream source finds its catalog through the active session.
    active = session._jvm.org.apache.spark.sql.SparkSession  # noqa: SLF001
    active.setActiveSession(session._jsparkSession)  # noqa: SLF001
    yield session
    active.setActiveSession(spark._jsparkSession)  # noqa: SLF001


def test_a_micro_batch_refused_by_the_owners_rights_fails_the_stream_and_writes_nothing(
    session: SparkSession, tmp_path: Path
):
    session.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.owned")
    session.sql(f"CREATE TABLE {CATALOG}.owned.orders (id BIGINT, amount BIGINT) USING iceberg")
    session.sql(f"CREATE TABLE {CATALOG}.owned.mt (id BIGINT, amount BIGINT) USING iceberg")
    session.sql(f"USE {CATALOG}.owned")
    revoked: list[bool] = []

    def may_read() -> None:
        if revoked:
            raise Revoked("The owner alice lacks read_data on owned.orders")

    running = stream_queries.start(
        session,
        plan=plan_stream(QUERY, namespace=["owned"], catalog=CATALOG, primary_key=()),
        query=QUERY,
        target=[CATALOG, "owned", "mt"],
        catalog=CATALOG,
        namespace=["owned"],
        checkpoint=str(tmp_path / "checkpoint"),
        key="owned-mt",
        trigger_seconds=0.5,
        start_after={},
        on_batch=lambda result: None,
        may_read=may_read,
        version=1,
        uuids={},
    )
    try:
        session.sql(f"INSERT INTO {CATALOG}.owned.orders VALUES (1, 10), (2, 20)")
        running.processAllAvailable()
        assert session.table(f"{CATALOG}.owned.mt").count() == 2

        revoked.append(True)
        session.sql(f"INSERT INTO {CATALOG}.owned.orders VALUES (3, 30)")
        with pytest.raises(Exception, match="lacks read_data"):
            running.processAllAvailable()
        assert not running.isActive
        assert session.table(f"{CATALOG}.owned.mt").count() == 2
    finally:
        if running.isActive:
            running.stop()

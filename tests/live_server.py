"""The real app in a subprocess, for tests that drive it with engines (Spark, pyiceberg).

pytest-django's `live_server` runs in the test process, against the test database, in a
thread; Spark's JVM and pyiceberg need a server that behaves like a deployment instead:
its own SQLite file, its own warehouse folder, gunicorn with several workers (so that
concurrent commits really race), and credentials made by the app's own commands.
"""

from __future__ import annotations

import atexit
import os
import random
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

REPO_ROOT = Path(__file__).resolve().parents[1]
MANAGE = REPO_ROOT / "manage.py"
USERNAME = "editor"
PASSWORD = "editor-password-for-tests"


#: What webapp.settings.prod needs from the environment, for a test deployment on loopback.
PRODUCTION_ENV = {
    "DJANGO_SETTINGS_MODULE": "webapp.settings.prod",
    "SECRET_KEY": "production-settings-test-key-not-secret-0123456789",
    "SECURE_COOKIES": "0",
}


def free_port() -> int:
    """A loopback port free now, below the kernel's ephemeral range when there is room.

    A port the kernel hands out (bind to 0) comes from the range it also gives outgoing
    connections: a Spark cluster's JVMs, opening many, took one between this choice and
    gunicorn's bind ("Address already in use"). Below the range only listeners compete."""
    low = _ephemeral_low()
    for _ in range(200):
        port = random.randrange(20000, low) if low > 20100 else 0
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return sock.getsockname()[1]
    raise RuntimeError("No free loopback port")


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


#: docs/deployment.md's settings for the web service (webapp/gunicorn.conf.py reads them).
DEPLOYED_ENV = {"WEB_NICE": "5"}


def server_env(
    *,
    db_path: Path,
    warehouse: Path,
    extra: Mapping[str, str] | None = None,
    database_url: str | None = None,
) -> dict:
    env = dict(os.environ)
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "webapp.settings.dev",
            "DATABASE_URL": database_url or f"sqlite:///{db_path}",
            "WAREHOUSE": str(warehouse),
            # Kept query results beside the warehouse, never in the repository's var/.
            "QUERY_RESULTS_DIR": str(warehouse.parent / "query-results"),
            "DEBUG": "0",
            "PYTHONUNBUFFERED": "1",
            "LOG_LEVEL": "WARNING",
            # A machine running the tests may have little disk left (webapp.settings.test).
            "WAREHOUSE_MIN_FREE_BYTES": str(64 << 20),
        }
    )
    env.update(extra or {})
    return env


@dataclass
class CatalogServer:
    """A running app: where it listens, its data, and the credentials of one editor."""

    base_url: str
    warehouse: Path
    db_path: Path
    log_path: Path
    env: dict[str, str] = field(repr=False)
    username: str = USERNAME
    password: str = field(default=PASSWORD, repr=False)
    credential: str = field(default="", repr=False)
    process: subprocess.Popen | None = field(default=None, repr=False)
    #: Deployed: the engines' own service (the same app, its own gunicorn), where
    #: iceberg_uri points; else None, and engines share the web service.
    catalog_url: str | None = None
    catalog_process: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def iceberg_uri(self) -> str:
        return f"{self.catalog_url or self.base_url}/iceberg"

    def manage(self, *args: str, timeout: float = 120) -> str:
        """Run a management command against the server's database; returns its stdout."""
        result = subprocess.run(
            [sys.executable, str(MANAGE), *args],
            cwd=REPO_ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"manage.py {' '.join(args)} failed ({result.returncode}):\n{result.stderr}"
            )
        return result.stdout

    def bearer_token(self) -> str:
        """An Iceberg REST access token for the editor's client (OAuth2 client credentials)."""
        client_id, _, secret = self.credential.partition(":")
        response = requests.post(
            f"{self.iceberg_uri}/v1/oauth/tokens",
            data={
                "grant_type": "client_credentials",
                "client_id": client_id,
                "client_secret": secret,
                "scope": "catalog",
            },
            timeout=30,
        )
        response.raise_for_status()
        return response.json()["access_token"]

    def iceberg_session(self) -> requests.Session:
        """A `requests` session that sends the bearer token to the Iceberg REST endpoints."""
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {self.bearer_token()}"
        return session

    def api_session(self) -> requests.Session:
        """A `requests` session for the management API (/api/), with the editor's DRF token."""
        response = requests.post(
            f"{self.base_url}/api/token/",
            data={"username": self.username, "password": self.password},
            timeout=30,
        )
        response.raise_for_status()
        session = requests.Session()
        session.headers["Authorization"] = f"Token {response.json()['token']}"
        return session

    def browser_session(self) -> requests.Session:
        """A `requests` session logged in through the login page, as a browser is."""
        session = requests.Session()
        login = f"{self.base_url}/login/"
        session.get(login, timeout=30).raise_for_status()
        response = session.post(
            login,
            data={
                "username": self.username,
                "password": self.password,
                "csrfmiddlewaretoken": session.cookies["csrftoken"],
            },
            timeout=30,
        )
        response.raise_for_status()
        return session

    def submit_form(
        self, session: requests.Session, path: str, fields: dict[str, str] | None = None
    ) -> requests.Response:
        """GET a page, then POST its form with `fields` and the CSRF token, as a click would."""
        url = f"{self.base_url}{path}"
        session.get(url, timeout=30).raise_for_status()
        data = {**(fields or {}), "csrfmiddlewaretoken": session.cookies["csrftoken"]}
        return session.post(url, data=data, timeout=60)

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        for process in (self.process, self.catalog_process):
            if process is None or process.poll() is not None:
                continue
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=15)


def _make_editor(server: CatalogServer) -> str:
    """The editor (a superuser) and its Iceberg client, made by the app's own commands; the
    client's credential."""
    server.manage(
        "createsuperuser", "--noinput", "--username", USERNAME, "--email", "editor@example.com"
    )
    output = server.manage("create_catalog_client", USERNAME, "--name", "tests")
    return output.strip().splitlines()[-1]


#: SQLite databases migrated, with the editor and its client, once per test process and
#: settings module (with the credential): every server starts on a copy. Migrating takes
#: 10-15 s of Django on two cores, copying milliseconds.
_PREPARED: dict[tuple[str, str], tuple[Path, str]] = {}


def _copy_prepared_database(server: CatalogServer) -> str:
    """Copy the prepared database of the server's settings to its db_path; the credential
    of the editor's client in it."""
    key = (server.env["DJANGO_SETTINGS_MODULE"], server.env.get("SECRET_KEY", ""))
    if key not in _PREPARED:
        folder = Path(tempfile.mkdtemp(prefix="lakeview-prepared-db-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        template = CatalogServer(
            base_url="",
            warehouse=server.warehouse,
            db_path=folder / "db.sqlite3",
            log_path=folder / "server.log",
            env={**server.env, "DATABASE_URL": f"sqlite:///{folder / 'db.sqlite3'}"},
        )
        template.manage("migrate", "--noinput", timeout=300)
        _PREPARED[key] = (template.db_path, _make_editor(template))
    source_path, credential = _PREPARED[key]
    # The backup API copies a consistent database whatever journal mode it was left in.
    with (
        closing(sqlite3.connect(source_path)) as source,
        closing(sqlite3.connect(server.db_path)) as target,
    ):
        source.backup(target)
    return credential


def _wait_until_serving(server: CatalogServer, timeout: float) -> None:
    """Until GET /iceberg/v1/config answers 401 (up, and refusing a request with no token),
    on the web service and on the catalog service when there is one."""
    deadline = time.monotonic() + timeout
    last_error = "no answer"
    waiting = [server.base_url, *([server.catalog_url] if server.catalog_url else [])]
    while waiting and time.monotonic() < deadline:
        for process in (server.process, server.catalog_process):
            if process is not None and process.poll() is not None:
                raise RuntimeError(
                    f"The app exited with {process.returncode}:\n{server.log_tail()}"
                )
        try:
            response = requests.get(f"{waiting[0]}/iceberg/v1/config", timeout=5)
        except (requests.ConnectionError, requests.Timeout) as error:
            # Refused before gunicorn listens; unanswered while its workers load Django.
            last_error = str(error)
        else:
            if response.status_code == 401:
                waiting.pop(0)
                continue
            last_error = f"{response.status_code}: {response.text[:500]}"
        time.sleep(0.2)
    if waiting:
        raise RuntimeError(
            f"The app did not come up in {timeout}s ({last_error}):\n{server.log_tail()}"
        )


@contextmanager
def catalog_server(
    root: Path,
    *,
    workers: int = 2,
    threads: int = 4,
    extra_env: Mapping[str, str] | None = None,
    production: bool = False,
    deployed: bool = False,
    database_url: str | None = None,
    on_boot: Callable[[CatalogServer], None] | None = None,
) -> Iterator[CatalogServer]:
    """A migrated database under `root` (for SQLite, a copy of one migrated once per test
    process), an editor and its Iceberg client, and the app served with gunicorn on a free
    loopback port until the block ends.

    With `production`, the app runs with webapp.settings.prod, as a deployment does (its
    own SECRET_KEY; cookies not marked Secure, since the tests speak plain HTTP). With
    `deployed`, gunicorn runs with webapp/gunicorn.conf.py, the settings docs/deployment.md gives
    (`workers` and `threads` are then the config's), as two services: the web and the
    engines' catalog. With `database_url` (an empty PostgreSQL database), the app uses it
    instead of a SQLite file. `on_boot` is called once the database is ready and gunicorn
    started, before it serves (processes that need the database but not yet the app may
    start there and load Django while gunicorn does)."""
    root.mkdir(parents=True, exist_ok=True)
    db_path = root / "db.sqlite3"
    warehouse = root / "warehouse"
    warehouse.mkdir(exist_ok=True)
    port = free_port()
    catalog_port = free_port() if deployed else port
    env = server_env(
        db_path=db_path,
        warehouse=warehouse,
        database_url=database_url,
        extra={
            "DJANGO_SUPERUSER_PASSWORD": PASSWORD,
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            # Refresh workers reach the app's own Iceberg REST catalog here.
            "CATALOG_URI": f"http://127.0.0.1:{catalog_port}/iceberg",
            **(DEPLOYED_ENV if deployed else {}),
            **(PRODUCTION_ENV if production else {}),
            **(extra_env or {}),
        },
    )
    server = CatalogServer(
        base_url=f"http://127.0.0.1:{port}",
        warehouse=warehouse,
        db_path=db_path,
        log_path=root / "server.log",
        env=env,
        catalog_url=f"http://127.0.0.1:{catalog_port}" if deployed else None,
    )
    if database_url is None and not db_path.exists():
        # A copy of a database migrated once, with the editor and its client already made.
        server.credential = _copy_prepared_database(server)
    else:
        server.manage("migrate", "--noinput", timeout=300)

    def gunicorn(bind_port: int, log: Any, **extra: str) -> subprocess.Popen:
        return subprocess.Popen(
            [
                *(sys.executable, "-m", "gunicorn", "webapp.wsgi"),
                *(
                    ("-c", str(REPO_ROOT / "webapp" / "gunicorn.conf.py"))
                    if deployed
                    else (
                        *("--workers", str(workers), "--threads", str(threads)),
                        # As deployed (gunicorn.conf.py): engines polling every few seconds
                        # never meet a connection closed as they send on it.
                        *("--timeout", "120", "--keep-alive", "75"),
                    )
                ),
                *("--bind", f"127.0.0.1:{bind_port}", "--graceful-timeout", "5"),
                # Which worker process answered, when, and in how long: what a slow answer
                # under a flood is read from.
                *(
                    "--access-logfile",
                    "-",
                    "--access-logformat",
                    '%(p)s %(t)s "%(r)s" %(s)s %(L)ss',
                ),
            ],
            cwd=REPO_ROOT,
            env={**env, **extra},
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    with server.log_path.open("ab") as log:
        server.process = gunicorn(port, log)
        if deployed:
            # docs/deployment.md: the engines' catalog service, at full priority.
            server.catalog_process = gunicorn(catalog_port, log, WEB_NICE="0", WEB_WORKERS="2")
    try:
        if on_boot is not None:
            on_boot(server)
        if not server.credential:
            # The users are made while gunicorn boots: both take seconds of Django start-up.
            server.credential = _make_editor(server)
        _wait_until_serving(server, timeout=60)
        yield server
    finally:
        server.stop()

"""The whole materialized-table machinery in subprocesses, as a deployment runs it: the app
under gunicorn (tests.live_server), a Celery worker (threads pool; its own Spark JVM, started
by its first job and kept), celery-beat on the database scheduler, and the streaming process
of continuous tables (`manage.py run_streams`; its Spark starts with the first continuous
table), all on one SQLite file and a real Redis (REDIS_URL, started by scripts/test.sh).

The worker and the streaming process can be killed with SIGKILL and started again."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from tests.live_server import REPO_ROOT, CatalogServer, catalog_server

#: Settings for the stack: beat ticks are seconds apart, so a silent worker is noticed fast.
STACK_ENV = {
    "MT_ABANDONED_AFTER_SECONDS": "12",
    "SPARK_DRIVER_MEMORY": "1g",
    "CELERY_WORKER_CONCURRENCY": "4",
    # A streaming process killed and started again takes its tables back within seconds.
    "STREAM_LEASE_SECONDS": "6",
}


@dataclass(frozen=True)
class Answer:
    """What a request finally answered (after its Spark job, if it had one)."""

    status_code: int
    text: str

    def json(self) -> Any:
        return json.loads(self.text)


@dataclass
class RefreshStack:
    server: CatalogServer
    root: Path
    worker: subprocess.Popen | None = None
    beat: subprocess.Popen | None = None
    streams: subprocess.Popen | None = None
    api: requests.Session = field(default=None, repr=False)  # type: ignore[assignment]

    def _spawn(self, name: str, *args: str, command: tuple[str, ...] = ()) -> subprocess.Popen:
        log = (self.root / f"{name}.log").open("ab")
        return subprocess.Popen(
            list(command) or [sys.executable, "-m", "celery", "-A", "webapp", *args],
            cwd=REPO_ROOT,
            env=self.server.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def start_worker(self, *, wait: bool = True, nice: int = 0) -> None:
        """A worker; with `wait`, once it says it is alive (its heartbeat row), as the web
        side checks before it hands out a Spark job. `nice` lowers its CPU priority, as a
        worker sharing a machine with the catalog's services should run."""
        started = time.time()
        celery = (sys.executable, "-m", "celery", "-A", "webapp", "worker", "-l", "info")
        threads = ("--pool", "threads", "-c", "4", "-n", "w@%h")
        self.worker = self._spawn(
            "worker", command=(*(("nice", "-n", str(nice)) if nice else ()), *celery, *threads)
        )
        if nice:
            _lower_session(self.worker.pid, nice)
        if wait:
            self.wait_for_worker(since=started)

    def wait_for_worker(self, *, since: float) -> None:
        """Until the worker says it is alive with a heartbeat since `since` (epoch seconds)."""
        self.wait_for(
            lambda: self._worker_seen_since(since), timeout=90, what="the worker to start"
        )

    def _worker_seen_since(self, moment: float) -> bool:
        from datetime import datetime

        response = self.api.get(f"{self.server.base_url}/api/workers/", timeout=30)
        for worker in response.json() if response.ok else []:
            if worker["name"].endswith(f":{self.worker.pid}") and worker["alive"]:
                return datetime.fromisoformat(worker["seen_at"]).timestamp() >= moment - 1
        return False

    def kill_worker(self) -> None:
        """SIGKILL the worker and everything it started (its Spark JVM), as a crash would."""
        assert self.worker is not None
        os.killpg(self.worker.pid, signal.SIGKILL)
        self.worker.wait(timeout=30)

    def kill_jvm(self, process: subprocess.Popen | None) -> int:
        """SIGKILL the Spark JVM of the worker or the streaming process alone, as an
        OutOfMemoryError ends it (Spark's handler exits the JVM) while the Python process
        lives on; returns its pid."""
        assert process is not None
        [jvm] = [pid for pid in _descendants(process.pid) if _command(pid) == "java"]
        os.kill(jvm, signal.SIGKILL)
        # Gone once it is a zombie (its parent, the worker, reaps it when it looks).
        self.wait_for(
            lambda: _state(jvm) in ("Z", ""), timeout=30, what="the JVM to exit", every=0.05
        )
        return jvm

    def start_streams(self) -> None:
        """The streaming process (its Spark starts with the first continuous table)."""
        self.streams = self._spawn(
            "streams",
            command=(sys.executable, str(REPO_ROOT / "manage.py"), "run_streams", "--poll", "1"),
        )

    def kill_streams(self) -> None:
        """SIGKILL the streaming process and its Spark JVM, as a crash would."""
        assert self.streams is not None
        os.killpg(self.streams.pid, signal.SIGKILL)
        self.streams.wait(timeout=30)

    def start_beat(self) -> None:
        self.beat = self._spawn(
            "beat",
            "beat",
            "-l",
            "info",
            "--scheduler",
            "django_celery_beat.schedulers:DatabaseScheduler",
            "--max-interval",
            "1",
        )

    def log(self, name: str, lines: int = 80) -> str:
        path = self.root / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def statements(self, sql: str, namespace: str | None = None) -> Answer:
        """POST /api/statements/, and when part of the script ran as a Spark job (202),
        the whole script's answer once the job finished: what a client that follows the
        job sees."""
        body: dict[str, Any] = {"sql": sql}
        if namespace:
            body["namespace"] = namespace
        first = self.api.post(f"{self.server.base_url}/api/statements/", json=body, timeout=60)
        if first.status_code != 202:
            return Answer(first.status_code, first.text)
        job = self.job(first.json()["job"]["url"])
        answer = dict(job["result"] or {"results": []})
        answer["results"] = first.json()["results"][:-1] + answer.get("results", [])
        if job["state"] != "SUCCEEDED" and "error" not in answer:
            answer["error"] = job["error"]
        return Answer(job["status"] or 500, json.dumps(answer))

    def job(self, url: str, *, timeout: float = 300) -> dict:
        """A Spark job, once it finished."""
        return self.wait_for(
            lambda: (lambda job: job if job["state"] not in ("QUEUED", "RUNNING") else None)(
                self.api.get(f"{self.server.base_url}{url}", timeout=30).json()
            ),
            timeout=timeout,
            what=f"the Spark job {url}",
        )

    def follow(self, response: requests.Response) -> Answer:
        """The final answer of a request that may have become a Spark job (202)."""
        if response.status_code != 202:
            return Answer(response.status_code, response.text)
        job = self.job(response.json()["job"]["url"])
        if job["state"] == "SUCCEEDED":
            return Answer(job["status"], json.dumps(job["result"]))
        return Answer(job["status"] or 500, json.dumps({"error": job["error"]}))

    def run(self, run_id: int) -> dict:
        response = self.api.get(f"{self.server.base_url}/api/refresh-runs/{run_id}/", timeout=30)
        response.raise_for_status()
        return response.json()

    def wait_for(self, predicate, *, timeout: float, what: str, every: float = 0.25) -> Any:
        """`predicate`'s first true value, asked every `every` seconds (callers whose
        predicate runs a Spark query ask less often)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(every)
        raise AssertionError(
            f"Timed out after {timeout}s waiting for {what}\n--- worker ---\n"
            f"{self.log('worker')}\n--- streams ---\n{self.log('streams')}\n--- beat ---\n"
            f"{self.log('beat', 30)}\n--- server ---\n{self.server.log_tail(30)}"
        )

    def stop(self) -> None:
        """SIGKILL beat, the worker and the streaming process with their JVMs: the stack is
        thrown away, and a warm shutdown would wait for the jobs and micro-batches under
        way (seconds each; the services' own shutdown has tests of its own)."""
        for process in (self.beat, self.worker, self.streams):
            if process is not None and process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
        for process in (self.beat, self.worker, self.streams):
            if process is not None:
                process.wait(timeout=30)


def _lower_session(pid: int, nice: int) -> None:
    """Where the kernel groups processes by session for scheduling (autogroup), a process's
    own nice value only orders it within its session: the worker runs in a session of its
    own, so the session's priority is lowered too."""
    # Without autogroup (no such file), the nice value alone applies.
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/autogroup").write_text(str(nice))


#: The stack's own Redis database: messages other tests left in the broker are not its own.
#: Two test runs at once on one Redis (people working side by side) each set another
#: (LAKEVIEW_STACK_REDIS_DB), or their workers take each other's messages.
STACK_REDIS_DB = int(os.environ.get("LAKEVIEW_STACK_REDIS_DB", "3"))


def stack_redis_url(db: int = STACK_REDIS_DB) -> str:
    """REDIS_URL with the stack's database (`db`: a module's own, so that its messages never
    cross another stack's), emptied of what an earlier stack left."""
    import redis

    base = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    url = base.rsplit("/", 1)[0] + f"/{db}"
    redis.Redis.from_url(url).flushdb()
    return url


@contextmanager
def refresh_stack(
    root: Path,
    *,
    deployed: bool = False,
    extra_env: dict[str, str] | None = None,
    worker: bool = True,
    database_url: str | None = None,
    redis_db: int = STACK_REDIS_DB,
) -> Iterator[RefreshStack]:
    """The app, a worker and beat; yields once the worker answers (Spark starts lazily).
    `redis_db`: the stack's own Redis database (stack_redis_url)."""
    root.mkdir(parents=True, exist_ok=True)
    # Tables written by other systems may be attached from <root>/external.
    (root / "external").mkdir(exist_ok=True)
    (root / "spark-local").mkdir(exist_ok=True)
    extra = {
        **STACK_ENV,
        "REDIS_URL": stack_redis_url(redis_db),
        "ATTACH_LOCATIONS": str(root / "external"),
        # Spark's scratch folders (the jars it copies, ~45 MB a JVM) in the stack's folder,
        # not /tmp: a JVM killed by a test or by stop() never removes its own.
        "SPARK_LOCAL_DIRS": str(root / "spark-local"),
        **(extra_env or {}),
    }
    booted: list[RefreshStack] = []
    started = time.time()

    def boot(server: CatalogServer) -> None:
        # The worker, beat and the streaming process load Django while gunicorn does.
        stack = RefreshStack(server=server, root=root)
        booted.append(stack)
        if worker:
            stack.start_worker(wait=False)
        stack.start_beat()
        stack.start_streams()

    try:
        with catalog_server(
            root / "app",
            extra_env=extra,
            deployed=deployed,
            database_url=database_url,
            on_boot=boot,
        ) as server:
            [stack] = booted
            try:
                stack.api = server.api_session()
                if worker:
                    stack.wait_for_worker(since=started)
                yield stack
            finally:
                stack.stop()  # before the app
    finally:
        for stack in booted:  # the app did not come up
            stack.stop()


@contextmanager
def postgres_database(server_url: str) -> Iterator[str]:
    """An empty database of its own on the PostgreSQL server `server_url` names (the one
    scripts/test.sh starts: PG_DATABASE_URL), dropped afterwards; yields its URL."""
    import uuid

    import psycopg

    name = f"stack_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{server_url.rsplit('/', 1)[0]}/{name}"
    finally:
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _descendants(pid: int) -> list[int]:
    """The processes under `pid`, from /proc (each one's parent is field 4 of its stat)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = (entry / "stat").read_text()
                parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [], [pid]
    while frontier:
        children = [child for child, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


def _command(pid: int) -> str:
    with contextlib.suppress(OSError):
        return (Path("/proc") / str(pid) / "comm").read_text().strip()
    return ""


def _state(pid: int) -> str:
    """A process's state letter (R, S, Z...), or "" once it is gone."""
    with contextlib.suppress(OSError, IndexError):
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    return ""

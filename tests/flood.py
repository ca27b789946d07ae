"""A flood of requests that need a worker's Spark, sent all at once beside engines loading a
table through the Iceberg REST catalog: what every flood request answered and how long it
took, and the engines' load-table latencies while the flood ran and before it. Shared by
tests/spark/test_abuse.py (the bar) and bench/flood.py (the figures)."""

from __future__ import annotations

import http.client
import itertools
import json
import multiprocessing
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit

import requests


@dataclass(frozen=True)
class Request:
    """One flood request as plain data, so that a process of its own can send it."""

    what: str
    method: str
    url: str
    headers: dict[str, str]
    params: dict[str, str] | None = None
    json: dict[str, Any] | None = None


#: Each call gives a round's requests, every one new (its own filter or table name), so
#: that none is answered from an earlier round's.
Round = Callable[[], list[Request]]


@dataclass(frozen=True)
class Shot:
    what: str
    status: int
    seconds: float
    text: str


@dataclass
class Measured:
    shots: list[Shot] = field(default_factory=list)
    #: load-table latencies (seconds) of the requests that started while the flood ran
    during: list[float] = field(default_factory=list)
    #: the same, in a quiet moment just before
    quiet: list[float] = field(default_factory=list)
    flood_seconds: float = 0.0


def percentile(values: list[float], share: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _load_loop(url: str, token: str, interval: float, stopping: Any, results: Any) -> None:
    """An engine loading one table every `interval` seconds on its own kept-alive HTTP
    connection, in a process of its own as an engine's JVM is: what it measures is the
    catalog's answer, not this process's other threads (the flood's 50 senders) holding the
    GIL. It paces itself as an engine planning queries does: clients spinning on two cores
    beside the server would measure the machine's scheduler, not the catalog. It speaks
    plain http.client, not requests: the harness shares the two cores with the stack, and
    requests cost a millisecond of CPU a call, a fifth of a core at 200 loads a second.
    CLOCK_MONOTONIC is the machine's, so its start times compare with the parent's windows."""
    target = urlsplit(url)
    headers = {"Authorization": f"Bearer {token}"}
    connection = http.client.HTTPConnection(target.netloc, timeout=30)
    samples: list[tuple[float, float]] = []  # (start, seconds)
    failures = 0
    while not stopping.is_set():
        started = time.monotonic()
        try:
            connection.request("GET", target.path, headers=headers)
            response = connection.getresponse()
            response.read()
            status = response.status
        except (OSError, http.client.HTTPException):
            connection.close()  # reconnects at the next request
            status = 0
        elapsed = time.monotonic() - started
        if status != 200:
            failures += 1
        samples.append((started, elapsed))
        stopping.wait(max(0.0, interval - elapsed))
    results.put((samples, failures))


def _burst(requests_: list[Request], results: Any) -> None:
    """Every request at once (a thread and a connection each, released together, through
    http.client for the reason `_load_loop` gives); puts
    (shots, began, ended) on `results`. It runs in a process of its own, as the engines do:
    what it times is the stack's answers, not the caller's heap (a long pytest run's garbage
    collections pause every thread) or the caller's other threads holding the GIL."""
    barrier = threading.Barrier(len(requests_) + 1)
    shots: list[Shot | None] = [None] * len(requests_)

    def fire(index: int, request: Request) -> None:
        # Everything but the exchange is ready before the release: what is timed is a new
        # connection, the request and the whole answer.
        target = urlsplit(request.url)
        path = target.path + (f"?{urlencode(request.params)}" if request.params else "")
        body = json.dumps(request.json).encode() if request.json is not None else None
        headers = {**request.headers, **({"Content-Type": "application/json"} if body else {})}
        connection = http.client.HTTPConnection(target.netloc, timeout=60)
        barrier.wait()
        started = time.monotonic()
        try:
            connection.request(request.method, path, body=body, headers=headers)
            response = connection.getresponse()
            status, text = response.status, response.read().decode(errors="replace")[:2000]
        except (OSError, http.client.HTTPException) as error:
            status, text = 0, str(error)
        finally:
            connection.close()
        shots[index] = Shot(request.what, status, time.monotonic() - started, text)

    threads = [
        threading.Thread(target=fire, args=(i, request), daemon=True)
        for i, request in enumerate(requests_)
    ]
    for thread in threads:
        thread.start()
    barrier.wait()
    began = time.monotonic()
    for thread in threads:
        thread.join(timeout=120)
    results.put(([shot for shot in shots if shot is not None], began, time.monotonic()))


def measure(
    sends: Round,
    *,
    load_table_url: str,
    token: str,
    engines: int = 4,
    interval: float = 0.01,
    quiet_seconds: float = 3.0,
    rounds: int = 1,
) -> Measured:
    """Engines load the table (each every `interval` seconds) for `quiet_seconds`, then a
    round of requests goes at once (one thread and connection each, released together),
    `rounds` times; the engines keep loading all along."""
    measured = Measured()
    # Spawned, not forked: the caller may hold a JVM gateway and many threads.
    context = multiprocessing.get_context("spawn")
    stopping, results, answers = context.Event(), context.Queue(), context.Queue()
    pool = [
        context.Process(
            target=_load_loop, args=(load_table_url, token, interval, stopping, results)
        )
        for _ in range(engines)
    ]
    for engine in pool:
        engine.start()
    time.sleep(2.0)  # the engines' interpreters start; their first loads are not counted
    quiet_start = time.monotonic()
    time.sleep(quiet_seconds)
    quiet_end = time.monotonic()
    windows: list[tuple[float, float]] = []
    for _ in range(rounds):
        sender = context.Process(target=_burst, args=(sends(), answers))
        sender.start()
        shots, began, ended = answers.get(timeout=300)
        sender.join(timeout=30)
        windows.append((began, ended))
        measured.shots.extend(shots)
        time.sleep(0.5)
    stopping.set()
    collected = [results.get(timeout=60) for _ in pool]
    for engine in pool:
        engine.join(timeout=30)
    for samples, _failures in collected:
        for started, seconds in samples:
            if quiet_start <= started < quiet_end:
                measured.quiet.append(seconds)
            elif any(begin <= started <= end for begin, end in windows):
                measured.during.append(seconds)
    measured.flood_seconds = sum(end - begin for begin, end in windows)
    return measured


# -- the scenario: a viewer and an editor against a stack ------------------------------------


@dataclass(frozen=True)
class Scenario:
    base_url: str
    viewer_token: str
    editor_token: str
    engine_token: str
    load_table_url: str


def prepare(stack: object, namespace: str = "flood") -> Scenario:
    """A namespace with a table and a view over it, a viewer user, and their tokens (the
    stack is tests.refresh_stack.RefreshStack; nothing here needs a worker)."""
    server = stack.server  # type: ignore[attr-defined]
    base = server.base_url
    server.manage(
        "shell",
        "-c",
        "from django.contrib.auth.models import Group, User; "
        "u = User.objects.create_user('viola', password='viola-password'); "
        "u.groups.add(Group.objects.get_or_create(name='viewer')[0])",
    )
    viewer = requests.post(
        f"{base}/api/token/", data={"username": "viola", "password": "viola-password"}, timeout=30
    ).json()["token"]
    editor = stack.api  # type: ignore[attr-defined]
    editor_token = editor.headers["Authorization"].removeprefix("Token ")
    engine = server.iceberg_session()
    schema = {
        "type": "struct", "schema-id": 0,
        "fields": [
            {"id": 1, "name": "id", "type": "long", "required": False},
            {"id": 2, "name": "ds", "type": "string", "required": False},
        ],
    }  # fmt: skip
    iceberg = server.iceberg_uri
    assert engine.post(f"{iceberg}/v1/namespaces", json={"namespace": [namespace]}).ok
    assert engine.post(
        f"{iceberg}/v1/namespaces/{namespace}/tables", json={"name": "t", "schema": schema}
    ).ok
    created = editor.post(
        f"{base}/api/namespaces/{namespace}/views/",
        json={"name": "v", "sql": "SELECT id, ds FROM t"},
        timeout=30,
    )
    assert created.status_code in (201, 202), created.text
    return Scenario(
        base_url=base,
        viewer_token=viewer,
        editor_token=editor_token,
        engine_token=engine.headers["Authorization"].removeprefix("Bearer "),
        load_table_url=f"{iceberg}/v1/namespaces/{namespace}/tables/t",
    )


_sent = itertools.count(1)


def abusive_sends(scenario: Scenario, *, count: int = 50, namespace: str = "flood") -> Round:
    """Rounds of `count` requests that each need a worker's Spark, half a viewer's
    previews, half an editor's CREATE MATERIALIZED TABLE."""
    base = scenario.base_url
    viewer = {"Authorization": f"Token {scenario.viewer_token}"}
    editor = {"Authorization": f"Token {scenario.editor_token}"}

    def preview(index: int) -> Request:
        return Request(
            f"preview {index}",
            "GET",
            f"{base}/api/namespaces/{namespace}/views/v/preview",
            viewer,
            params={"filter": f"id > {next(_sent)}"},
        )

    def create(index: int) -> Request:
        return Request(
            f"create {index}",
            "POST",
            f"{base}/api/statements/",
            editor,
            json={
                "sql": f"CREATE MATERIALIZED TABLE flood_{next(_sent)} FRESHNESS = "
                "INTERVAL '1' HOUR REFRESH_MODE = FULL AS SELECT ds, count(*) AS n FROM t "
                "GROUP BY ds",
                "namespace": namespace,
            },
        )

    return lambda: [preview(i) if i % 2 else create(i) for i in range(count)]

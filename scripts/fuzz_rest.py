"""Fuzz the app's machine endpoints with schemathesis and count the server errors.

Two surfaces, each from its own OpenAPI description:
- the Iceberg REST catalog at /iceberg, from Iceberg's specification (apache/iceberg,
  open-api/rest-catalog-open-api.yaml, as of the Iceberg release the app targets, 1.10;
  pass its path with --iceberg-spec), restricted to the endpoints the app's GET /v1/config
  lists ("GET /v1/{prefix}/namespaces": this catalog uses no prefix, so {prefix} is dropped);
- the management API at /api, from the app's own /api/schema/.

Every operation gets --max-examples valid requests (schemathesis's positive mode), as many
invalid ones (negative mode) and the spec's own examples; when its path names objects, valid
and invalid requests again against a namespace `ns` with a table `t`, a view `v` and a
materialized table `m` (reading `t`, partitioned by a date column) that the script makes
(and makes again before each run, after a run dropped them). The
goal is zero 5xx: the run prints each one with a reproduction and the server's traceback,
and exits 1 if there was any. One 503 is not counted: the documented "no worker is
running" answer (type Unavailable) of what needs a worker's Spark, as the app this script
starts has no worker; the per-operation lines show those as "503 no worker".

    .venv/bin/python scripts/fuzz_rest.py --iceberg-spec /tmp/rest-catalog-open-api.yaml
    .venv/bin/python scripts/fuzz_rest.py --url http://127.0.0.1:8000 --credential ID:SECRET \\
        --api-user USER --api-password PASSWORD --iceberg-spec ...   # an app already running

Without --url it starts the app under gunicorn with a fresh SQLite database and warehouse
(tests/live_server.py), on loopback only, in --workdir (default: a new folder under /tmp,
kept after the run with the server's log), with its own Redis database (number
LAKEVIEW_FUZZ_REDIS_DB, default 5, emptied first), where what it queues waits for no one."""

from __future__ import annotations

import argparse
import copy
import functools
import json
import os
import re
import shlex
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

import schemathesis  # noqa: E402
from hypothesis import HealthCheck, Phase, Verbosity, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.errors import Unsatisfiable  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402

SPEC_HELP = (
    "Iceberg's REST OpenAPI file is not part of this repository: take "
    "open-api/rest-catalog-open-api.yaml from https://github.com/apache/iceberg at the tag of "
    "the Iceberg release the app targets (apache-iceberg-1.10.x), e.g.\n"
    "  curl -fsSL -o /tmp/rest-catalog-open-api.yaml https://raw.githubusercontent.com/"
    "apache/iceberg/apache-iceberg-1.10.1/open-api/rest-catalog-open-api.yaml\n"
    "and pass --iceberg-spec /tmp/rest-catalog-open-api.yaml."
)

#: The Redis database of the app this script starts (tests/refresh_stack.py's are 3, 7, 9).
FUZZ_REDIS_DB = int(os.environ.get("LAKEVIEW_FUZZ_REDIS_DB", "5"))

#: Path parameters that name the objects `seed` makes, so that examples reach real ones.
EXISTING = {"namespace": "ns", "table": "t", "view": "v", "name": "v", "version_id": 1}
#: The management API calls tables, views and materialized tables {name}: under .../tables/
#: it is `t`, under .../materialized-tables/ `m` ("-tables/", not "/tables/").
NAME_UNDER = {"/tables/{name}": "t", "/views/{name}": "v", "/materialized-tables/{name}": "m"}


def existing_for(path: str, names: set[str]) -> dict[str, Any]:
    """The seeded objects' names for an operation's path parameters."""
    pinned = {k: v for k, v in EXISTING.items() if k in names}
    if "name" in pinned:
        pinned["name"] = next((n for part, n in NAME_UNDER.items() if part in path), "v")
    return pinned


def no_worker(status: int | None, answer: str) -> bool:
    """The documented 503 of an operation that needs a worker's Spark when none runs (the
    app this script starts has none): {"type": "Unavailable", ...}, not a server error."""
    if status != 503:
        return False
    try:
        body = json.loads(answer)
    except ValueError:
        return False
    return isinstance(body, dict) and body.get("type") == "Unavailable"


# --- the Iceberg specification, cut down to what /v1/config lists --------------------------


def iceberg_schema(spec: dict[str, Any], endpoints: list[str]) -> tuple[dict[str, Any], list]:
    """Iceberg's spec without the optional {prefix} (this catalog uses none), keeping only
    the operations GET /v1/config lists (as "METHOD /v1/{prefix}/path"). Also returns the
    listed endpoints the spec does not describe."""
    listed = set()
    for endpoint in endpoints:
        method, _, path = endpoint.partition(" ")
        listed.add((method.lower(), path.replace("/{prefix}", "")))
    paths: dict[str, Any] = {}
    found = set()
    for path, item in spec["paths"].items():
        plain = path.replace("/{prefix}", "")
        kept = {
            method: operation
            for method, operation in item.items()
            if method != "parameters" and (method, plain) in listed
        }
        if not kept:
            continue
        found.update((method, plain) for method in kept)
        parameters = [
            p
            for p in item.get("parameters", [])
            if not (p.get("$ref", "").endswith("/prefix") or p.get("name") == "prefix")
        ]
        paths[plain] = {**kept, **({"parameters": parameters} if parameters else {})}
    spec = copy.deepcopy(spec)
    spec["paths"] = paths
    spec["servers"] = [{"url": "/"}]
    missing = sorted(f"{m.upper()} {p}" for m, p in listed - found)
    return spec, missing


def load_spec(path: Path) -> dict[str, Any]:
    if not path.is_file():
        sys.exit(f"--iceberg-spec {path}: no such file.\n{SPEC_HELP}")
    spec = yaml.safe_load(path.read_text())
    if not isinstance(spec, dict) or "/v1/config" not in spec.get("paths", {}):
        sys.exit(f"--iceberg-spec {path}: not Iceberg's REST catalog OpenAPI.\n{SPEC_HELP}")
    return spec


# --- results ------------------------------------------------------------------------------


@dataclass
class ServerError:
    label: str
    status: int | None
    method: str
    url: str
    body: str
    answer: str
    curl: str
    traceback: str
    cause: str


@dataclass
class Tally:
    log_path: Path | None
    sent: Counter = field(default_factory=Counter)
    statuses: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    notes: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    errors: list[ServerError] = field(default_factory=list)

    def log_offset(self) -> int:
        try:
            return self.log_path.stat().st_size if self.log_path else 0
        except OSError:
            return 0

    def log_since(self, offset: int) -> str:
        if self.log_path is None:
            return ""
        time.sleep(0.05)  # the worker writes its traceback before it answers; be generous
        with self.log_path.open("rb") as log:
            log.seek(offset)
            return log.read(200_000).decode(errors="replace")

    def record(
        self,
        label: str,
        case: Any,
        request: requests.PreparedRequest | None,
        status: int | None,
        answer: str,
        log: str,
        token_name: str,
    ) -> None:
        self.sent[label] += 1
        if no_worker(status, answer):
            self.statuses[label]["503 no worker"] += 1
            return
        key = f"{status // 100}xx" if status is not None else "no answer"
        self.statuses[label][key] += 1
        if status is not None and status < 500:
            return
        traceback = _traceback(log)
        self.errors.append(
            ServerError(
                label=label,
                status=status,
                method=case.method.upper(),
                url=request.url if request is not None else case.formatted_path,
                body=_short(_request_body(request) if request is not None else case.body),
                answer=_short(answer),
                curl=_curl(request, token_name) if request is not None else "",
                traceback=traceback,
                cause=_cause(traceback, status, answer),
            )
        )

    def failed(self) -> set[str]:
        return {error.label for error in self.errors}


def _short(text: Any, limit: int = 400) -> str:
    text = str(text)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _request_body(request: requests.PreparedRequest) -> str:
    body = request.body
    if body is None:
        return ""
    if isinstance(body, bytes):
        return body.decode(errors="backslashreplace")
    return str(body)


def _curl(request: requests.PreparedRequest, token_name: str) -> str:
    """The request as a curl command; the token is left to a shell variable."""
    parts = ["curl", "-sS", "-X", shlex.quote(request.method or "GET"), shlex.quote(request.url)]
    for name, value in request.headers.items():
        if name.lower() == "authorization":
            scheme = value.split(" ", 1)[0]
            parts += ["-H", f'"{name}: {scheme} ${token_name}"']
        elif name.lower() == "content-type" or name.lower().startswith("x-"):
            parts += ["-H", shlex.quote(f"{name}: {value}")]
    if request.body is not None:
        parts += ["--data-binary", shlex.quote(_request_body(request))]
    return " ".join(parts)


TRACEBACK = re.compile(r"^Traceback \(most recent call last\):$", re.M)
FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)', re.M)


def _traceback(log: str) -> str:
    """The Python traceback in a slice of the server log, from the line before the first
    "Traceback" (which says what failed) to the exception line of the last one, or ''."""
    lines = log.splitlines()
    starts = [i for i, line in enumerate(lines) if line == "Traceback (most recent call last):"]
    if not starts:
        return ""
    end = len(lines)
    for index in range(starts[-1] + 1, len(lines)):
        if lines[index] and not lines[index][0].isspace():
            end = index + 1  # the exception line
            break
    return "\n".join(lines[max(starts[0] - 1, 0) : end]).strip()


def _cause(traceback: str, status: int | None, answer: str) -> str:
    """What a 5xx is, for grouping: the exception and the deepest frame in the app's code."""
    if not traceback:
        return f"{status}: {_short(answer, 120)}"
    exception = traceback.strip().splitlines()[-1]
    frames = [
        f for f in FRAME.findall(traceback) if str(REPO_ROOT) in f[0] and "/.venv/" not in f[0]
    ]
    where = ""
    if frames:
        path, line, function = frames[-1]
        where = f"{Path(path).relative_to(REPO_ROOT)}:{line} in {function}"
    return f"{exception.split(':', 1)[0]} at {where}" if where else _short(exception, 160)


# --- the application under test -----------------------------------------------------------


#: The materialized table `m`: its definition (as POST .../materialized-tables/ takes it)
#: and the schema Spark derives for its query, which the app's own shell fakes below.
MT_QUERY = "SELECT id, CAST(id AS STRING) AS ds FROM t"
MT_BODY = {
    "name": "m",
    "query": MT_QUERY,
    "freshness": {"value": 1, "unit": "DAY"},
    "partitioned_by": ["ds"],
    "options": {"partition.fields.ds.date-formatter": "yyyy-MM-dd"},
}
MT_SPARK_SCHEMA = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "ds", "type": "string", "nullable": True, "metadata": {}},
        ],
    }
)


def make_mt_code(username: str) -> str:
    """Python for the started app's `manage.py shell -c` that makes `m` if it is missing.

    Creating a materialized table asks a worker's Spark for its query's schema, and the
    app this script starts has no worker. So the schema is given (as the fake Spark of
    tests/integration/test_mt_api.py gives it) and the first refresh run stays queued (no
    worker would take it); the rest is the service's own create, so the row, its table,
    version and schedule are what a worker-backed create makes."""
    return f"""
from unittest import mock
from django.contrib.auth import get_user_model
from catalog.core.errors import CatalogError
from refresh import selectors, services
from refresh.core.freshness import Freshness, TimeUnit
try:
    selectors.get_materialized_table("ns", "m")
except CatalogError:
    with (
        mock.patch("refresh.analysis.query_schema", return_value={MT_SPARK_SCHEMA!r}),
        mock.patch("refresh.runs.dispatch"),
    ):
        services.create_materialized_table(
            namespace="ns", name="m", query={MT_QUERY!r}, freshness=Freshness(1, TimeUnit.DAY),
            partitioned_by={MT_BODY["partitioned_by"]!r}, options={MT_BODY["options"]!r},
            actor=get_user_model().objects.get(username={username!r}),
        )
"""


class Seeder:
    """A namespace `ns` with a table `t`, a view `v` and a materialized table `m`, made
    again before each run after a run dropped or renamed them. A renamed object keeps its
    location, and no two objects share one, so `t` and `v` come back at a fresh location
    when their first one is taken.

    `m` is made by `make_mt` (the started app's shell, see make_mt_code) or, against an app
    already running, by POST /api/.../materialized-tables/, which needs a live worker: when
    that fails, the routes that name a materialized table only meet a missing one."""

    COLUMN = {"id": 1, "name": "id", "type": "long", "required": False}

    def __init__(
        self,
        base_url: str,
        iceberg: requests.Session,
        api: requests.Session | None = None,
        make_mt: Callable[[], None] | None = None,
    ) -> None:
        self.url = f"{base_url}/iceberg/v1/namespaces"
        self.mt_url = f"{base_url}/api/namespaces/ns/materialized-tables/"
        self.iceberg = iceberg
        self.api = api
        self.make_mt = make_mt
        self.folder = ""  # where `ns`'s objects live (learnt from the first `t`)
        self.remade = 0
        self.mt_failed = False  # warned once; not tried again

    def __call__(self) -> None:
        self.iceberg.post(self.url, json={"namespace": ["ns"]}, timeout=30)
        self._make("tables", "t", {"schema": {"type": "struct", "fields": [self.COLUMN]}})
        version = {
            "version-id": 1, "schema-id": 0, "timestamp-ms": 1, "summary": {},
            "representations": [{"type": "sql", "sql": "SELECT id FROM ns.t", "dialect": "spark"}],
            "default-namespace": ["ns"],
        }  # fmt: skip
        schema = {"type": "struct", "schema-id": 0, "fields": [self.COLUMN]}
        self._make("views", "v", {"schema": schema, "view-version": version})
        self._make_mt()

    def _make_mt(self) -> None:
        if self.api is None or self.mt_failed:
            return
        found = self.api.get(f"{self.mt_url}m/", timeout=30)
        if found.status_code == 200:
            # Back to ACTIVATED, as made: left SUSPENDED by the RESUME run (before_each),
            # SUSPEND would meet only 409s.
            if found.json().get("state") == "SUSPENDED":
                self.api.post(f"{self.mt_url}m/resume", json={}, timeout=30)
            return
        try:
            if self.make_mt is not None:
                self.make_mt()
            else:
                answer = self.api.post(self.mt_url, json=MT_BODY, timeout=60)
                if answer.status_code != 201:
                    raise RuntimeError(f"{answer.status_code} {answer.text[:300]}")
        except Exception as error:  # noqa: BLE001 - fuzz on without it, and say so
            self.mt_failed = True
            print(
                f"  warning: making ns.m failed, so the materialized-table routes only meet "
                f"a missing one: {_short(error, 600)}"
            )
            return
        if self.api.get(f"{self.mt_url}m/", timeout=30).status_code != 200:
            self.mt_failed = True
            print("  warning: ns.m was made but GET .../materialized-tables/m/ does not find it")

    def _make(self, kind: str, name: str, body: dict[str, Any]) -> None:
        if self.iceberg.head(f"{self.url}/ns/{kind}/{name}", timeout=30).status_code == 204:
            return
        answer = self.iceberg.post(f"{self.url}/ns/{kind}", json={"name": name, **body}, timeout=30)
        if answer.status_code == 409 and self.folder:
            self.remade += 1
            location = f"{self.folder}/{name}-fuzz-{self.remade}"
            answer = self.iceberg.post(
                f"{self.url}/ns/{kind}",
                json={"name": name, "location": location, **body},
                timeout=30,
            )
        if answer.status_code != 200:
            print(f"  warning: making ns.{name} failed: {answer.status_code} {answer.text[:300]}")
        elif kind == "tables" and not self.folder:
            self.folder = answer.json()["metadata"]["location"].rstrip("/").rsplit("/", 1)[0]

    def before_each(self, label: str) -> None:
        """Before each request of `label`: RESUME only acts on a suspended table (on `m` as
        made it is a 409), so `m` is suspended again before each one."""
        if self.api is not None and label.endswith("/materialized-tables/{name}/resume"):
            self.api.post(f"{self.mt_url}m/suspend", timeout=30)


# --- fuzzing ------------------------------------------------------------------------------


def fuzz(
    schema: Any,
    *,
    base_url: str,
    session: requests.Session,
    token_name: str,
    max_examples: int,
    tally: Tally,
    deadline: float,
    reseed: Seeder,
    only: re.Pattern[str] | None = None,
) -> bool:
    """Each operation (whose path `only` matches, when given): valid and invalid requests
    with random path parameters, then valid ones and the spec's examples against the seeded
    objects. False if time ran out."""
    for result in schema.get_all_operations():
        try:
            operation = result.ok()
        except Exception as error:  # noqa: BLE001 - an operation schemathesis cannot read
            print(f"  skipped an operation schemathesis cannot read: {error}")
            continue
        if only is not None and not only.search(operation.path):
            continue
        label = f"{operation.method.upper()} {operation.path}"
        names = {p.name for p in operation.path_parameters}
        pinned = existing_for(operation.path, names)
        seeded = ["valid, seeded", "invalid, seeded"] if pinned else []
        runs = ["valid", "invalid", *seeded, "spec examples"]
        for name in runs:
            if time.monotonic() > deadline:
                print(f"  time is up before {label} ({name})")
                return False
            reseed()
            try:
                strategy = _strategy(operation, name, pinned)
                if strategy is None:
                    continue
                before = functools.partial(reseed.before_each, label)
                _run(strategy, label, base_url, session, token_name, max_examples, tally, before)
            except Unsatisfiable:
                tally.notes[label].append(f"no {name} example")
            except Exception as error:  # noqa: BLE001 - a schema schemathesis cannot use
                note = f"{name}: stopped by {type(error).__name__}: {_short(error, 120)}"
                tally.notes[label].append(note)
        statuses = ", ".join(f"{k} {v}" for k, v in sorted(tally.statuses[label].items()))
        notes = f" [{'; '.join(tally.notes[label])}]" if tally.notes[label] else ""
        mark = "  5xx!" if label in tally.failed() else ""
        print(f"  {label}: {tally.sent[label]} sent: {statuses or '-'}{notes}{mark}", flush=True)
    return True


def _strategy(operation: Any, name: str, pinned: dict[str, Any]) -> Any:
    if name == "valid":
        return operation.as_strategy(generation_mode=GenerationMode.POSITIVE)
    if name == "invalid":
        return operation.as_strategy(generation_mode=GenerationMode.NEGATIVE)
    if name == "valid, seeded":
        return operation.as_strategy(
            generation_mode=GenerationMode.POSITIVE, path_parameters=pinned
        )
    if name == "invalid, seeded":
        return operation.as_strategy(
            generation_mode=GenerationMode.NEGATIVE, path_parameters=pinned
        )
    strategies = operation.get_strategies_from_examples()
    if not strategies:
        return None
    strategy = st.one_of(strategies)
    if not pinned:
        return strategy

    def pin(case: Any) -> Any:
        case.path_parameters = {**(case.path_parameters or {}), **pinned}
        return case

    return strategy.map(pin)


def _run(
    strategy: Any,
    label: str,
    base_url: str,
    session: requests.Session,
    token_name: str,
    max_examples: int,
    tally: Tally,
    before: Callable[[], None],
) -> None:
    @settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        print_blob=False,
        verbosity=Verbosity.quiet,
    )
    @given(strategy)
    def run(case: Any) -> None:
        before()
        offset = tally.log_offset()
        try:
            response = case.call(base_url=base_url, session=session, timeout=60)
        except requests.RequestException as error:
            tally.record(
                label, case, error.request, None, f"{type(error).__name__}: {error}",
                tally.log_since(offset), token_name,
            )  # fmt: skip
            return
        except Exception as error:  # noqa: BLE001 - a case schemathesis cannot send
            tally.statuses[label][f"not sent ({type(error).__name__})"] += 1
            return
        status = response.status_code
        log = tally.log_since(offset) if status >= 500 else ""
        tally.record(label, case, response.request, status, response.text, log, token_name)

    run()


# --- main ---------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--iceberg-spec", type=Path, help="Iceberg's REST OpenAPI YAML file")
    parser.add_argument("--url", help="an app already running (default: start one)")
    parser.add_argument("--credential", help="CLIENT_ID:SECRET of an editor's catalog client")
    parser.add_argument("--api-user", help="an editor's username (with --url)")
    parser.add_argument("--api-password", help="that editor's password (with --url)")
    parser.add_argument("--api-token", help="or that editor's DRF token (with --url)")
    parser.add_argument("--max-examples", type=int, default=50, help="per operation and mode")
    parser.add_argument("--minutes", type=float, default=15.0, help="stop after this long")
    parser.add_argument("--skip-api", action="store_true", help="fuzz /iceberg only")
    parser.add_argument("--workdir", type=Path, help="database, warehouse, server log")
    parser.add_argument("--workers", type=int, default=3, help="gunicorn workers")
    parser.add_argument(
        "--only", type=re.compile, help="fuzz only the paths this regular expression matches"
    )
    args = parser.parse_args()
    if args.iceberg_spec is None:
        print(f"No --iceberg-spec: only /api is fuzzed.\n{SPEC_HELP}\n")
        if args.skip_api:
            return 2
    spec = load_spec(args.iceberg_spec) if args.iceberg_spec else None
    if args.url and not args.credential:
        parser.error("--url needs --credential (a catalog client's CLIENT_ID:SECRET)")
    if args.url and not (args.skip_api or args.api_token or args.api_user):
        parser.error("--url needs --api-user/--api-password or --api-token (or --skip-api)")
    started = time.monotonic()
    deadline = started + args.minutes * 60
    with ExitStack() as stack:
        if args.url:
            base_url = args.url.rstrip("/")
            client_id, _, secret = (args.credential or "").partition(":")
            answer = requests.post(
                f"{base_url}/iceberg/v1/oauth/tokens",
                data={
                    "grant_type": "client_credentials",
                    "client_id": client_id,
                    "client_secret": secret,
                    "scope": "catalog",
                },
                timeout=30,
            )
            answer.raise_for_status()
            token = answer.json()["access_token"]
            api_token = args.api_token
            if not api_token and not args.skip_api:
                answer = requests.post(
                    f"{base_url}/api/token/",
                    data={"username": args.api_user, "password": args.api_password},
                    timeout=30,
                )
                answer.raise_for_status()
                api_token = answer.json()["token"]
            log_path = None
            make_mt = None
            print(f"App at {base_url}: 5xx tracebacks are in its own log")
        else:
            from tests.live_server import catalog_server
            from tests.refresh_stack import stack_redis_url

            root = args.workdir or Path(tempfile.mkdtemp(prefix="fuzz-rest-"))
            root.mkdir(parents=True, exist_ok=True)
            if (root / "db.sqlite3").exists():
                sys.exit(f"{root} already holds a database: choose an empty --workdir")
            # Its own Redis database, emptied first: the refresh runs and maintenance runs
            # it queues wait there for a worker that never comes, instead of in the default
            # one, where a worker of another app on this Redis would take them; and no
            # such worker's heartbeat makes this app think a worker is running.
            redis_url = stack_redis_url(FUZZ_REDIS_DB)
            server = stack.enter_context(
                catalog_server(
                    root, workers=args.workers, threads=2, extra_env={"REDIS_URL": redis_url}
                )
            )
            base_url = server.base_url
            token = server.bearer_token()
            api_token = server.api_session().headers["Authorization"].split(" ", 1)[1]
            log_path = server.log_path

            def make_mt(server: Any = server) -> None:
                server.manage("shell", "-c", make_mt_code(server.username))

            print(f"App on {base_url}; database, warehouse and log in {root}")
            print(f"Server log: {log_path}")
        tally = Tally(log_path=log_path)
        iceberg = requests.Session()
        iceberg.headers["Authorization"] = f"Bearer {token}"

        api = requests.Session()
        api.headers["Authorization"] = f"Token {api_token}"
        reseed = Seeder(base_url, iceberg, None if args.skip_api else api, make_mt)
        reseed()
        finished = True
        if spec is not None:
            config = iceberg.get(f"{base_url}/iceberg/v1/config", timeout=30)
            config.raise_for_status()
            endpoints = config.json().get("endpoints") or []
            document, missing = iceberg_schema(spec, endpoints)
            schema = schemathesis.openapi.from_dict(document)
            print(f"/iceberg: {len(endpoints)} endpoints listed by /v1/config")
            for endpoint in missing:
                print(f"  not in the spec, not fuzzed: {endpoint}")
            finished = fuzz(
                schema,
                base_url=f"{base_url}/iceberg",
                session=iceberg,
                token_name="ICEBERG_TOKEN",
                max_examples=args.max_examples,
                tally=tally,
                deadline=deadline,
                reseed=reseed,
                only=args.only,
            )
        if not args.skip_api and finished:
            answer = api.get(f"{base_url}/api/schema/", params={"format": "json"}, timeout=30)
            answer.raise_for_status()
            print("/api: the app's own schema (/api/schema/)")
            finished = fuzz(
                schemathesis.openapi.from_dict(answer.json()),
                base_url=base_url,
                session=api,
                token_name="API_TOKEN",
                max_examples=args.max_examples,
                tally=tally,
                deadline=deadline,
                reseed=reseed,
                only=args.only,
            )
        report(tally, log_path, token_name_hint=args.url is None)
        failed = tally.failed()
        minutes = (time.monotonic() - started) / 60
        print(
            f"{len(tally.statuses) - len(failed)} passed, {len(failed)} failed "
            f"({sum(tally.sent.values())} requests, {minutes:.1f} min"
            f"{'' if finished else ', stopped by --minutes'})"
        )
        if log_path:
            print(f"Server log: {log_path}")
        return 1 if failed else 0


def report(tally: Tally, log_path: Path | None, *, token_name_hint: bool) -> None:
    if not tally.errors:
        return
    by_label: dict[str, list[ServerError]] = defaultdict(list)
    for error in tally.errors:
        by_label[error.label].append(error)
    print("\n5xx per operation:")
    for label, errors in sorted(by_label.items()):
        statuses = Counter(str(e.status) for e in errors)
        print(f"  {label}: {len(errors)} ({', '.join(f'{k}: {v}' for k, v in statuses.items())})")
        for error in errors[:2]:
            print(f"    {error.status} {error.method} {error.url}")
            if error.body:
                print(f"      body: {error.body}")
            print(f"      answer: {error.answer}")
            print(f"      cause: {error.cause}")
            print(f"      reproduce: {error.curl}")
    by_cause: dict[str, list[ServerError]] = defaultdict(list)
    for error in tally.errors:
        by_cause[error.cause].append(error)
    print(f"\nDistinct causes ({len(by_cause)}):")
    for number, (cause, errors) in enumerate(sorted(by_cause.items()), 1):
        labels = sorted({e.label for e in errors})
        first = min(errors, key=lambda e: len(e.body) + len(e.url))
        print(f"\n[{number}] {cause}: {len(errors)} requests on {', '.join(labels)}")
        print(f"    shortest: {first.status} {first.method} {first.url}")
        if first.body:
            print(f"      body: {first.body}")
        print(f"      reproduce: {first.curl}")
        if first.traceback:
            print("    " + "\n    ".join(first.traceback.splitlines()[-14:]))
    if token_name_hint:
        print(
            "\nThe reproductions read $ICEBERG_TOKEN (POST /iceberg/v1/oauth/tokens with the "
            "client's credentials) and $API_TOKEN (POST /api/token/)."
        )


if __name__ == "__main__":
    sys.exit(main())

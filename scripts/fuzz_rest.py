"""Fuzz the app's machine endpoints with schemathesis and count the server errors.

Two surfaces, each from its own OpenAPI description:
- the Iceberg REST catalog at /iceberg, from Iceberg's specification
  (apache/iceberg, open-api/rest-catalog-open-api.yaml; pass its path with --iceberg-spec),
  restricted to the endpoints the app's GET /v1/config lists;
- the management API at /api, from the app's own /api/schema/.

Every operation gets --max-examples valid and as many invalid requests (schemathesis's
positive and negative modes). The goal is zero 5xx: the run prints each one with a
reproduction and exits 1 if there was any.

    .venv/bin/python scripts/fuzz_rest.py --iceberg-spec /path/to/rest-catalog-open-api.yaml
    .venv/bin/python scripts/fuzz_rest.py --url http://127.0.0.1:8000 --credential ID:SECRET \\
        --api-user USER --api-password PASSWORD --iceberg-spec ...   # an app already running

Without --url it starts the app under gunicorn with a fresh SQLite database and warehouse
(tests/live_server.py), on loopback only."""

from __future__ import annotations

import argparse
import copy
import sys
import tempfile
import time
from collections import Counter, defaultdict
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import requests
import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

import schemathesis  # noqa: E402
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402


def iceberg_schema(spec_path: Path, endpoints: list[str]) -> dict[str, Any]:
    """Iceberg's spec without the optional {prefix} (this catalog uses none), keeping only
    the operations GET /v1/config lists (as "METHOD /v1/{prefix}/path")."""
    spec = yaml.safe_load(spec_path.read_text())
    listed = {tuple(e.split(" ", 1)) for e in endpoints}
    listed = {(method.lower(), path.replace("/{prefix}", "")) for method, path in listed}
    paths: dict[str, Any] = {}
    for path, item in spec["paths"].items():
        plain = path.replace("/{prefix}", "")
        kept = {}
        for method, operation in item.items():
            if method == "parameters":
                continue
            if (method, plain) in listed:
                kept[method] = operation
        if kept:
            parameters = [
                p for p in item.get("parameters", []) if "prefix" not in str(p.get("$ref", ""))
            ]
            paths[plain] = {**kept, **({"parameters": parameters} if parameters else {})}
    spec = copy.deepcopy(spec)
    spec["paths"] = paths
    spec["servers"] = [{"url": "/"}]
    return spec


class Tally:
    def __init__(self) -> None:
        self.statuses: dict[str, Counter] = defaultdict(Counter)
        self.errors: dict[str, list[str]] = defaultdict(list)

    def record(self, label: str, case: Any, response: requests.Response) -> None:
        self.statuses[label][f"{response.status_code // 100}xx"] += 1
        if response.status_code >= 500 and len(self.errors[label]) < 3:
            self.errors[label].append(
                f"{response.status_code} {case.method} {response.request.url}\n"
                f"      body: {str(case.body)[:300]}\n      answer: {response.text[:300]}"
            )


#: Path parameters that name the objects `seed` makes, so that examples reach real ones.
EXISTING = {"namespace": "ns", "table": "t", "view": "v", "name": "v"}


def seed(base_url: str, iceberg: requests.Session) -> None:
    """A namespace `ns` with a table `t` and a view `v` (again after a run dropped them)."""
    iceberg.post(f"{base_url}/iceberg/v1/namespaces", json={"namespace": ["ns"]}, timeout=30)
    column = {"id": 1, "name": "id", "type": "long", "required": False}
    iceberg.post(
        f"{base_url}/iceberg/v1/namespaces/ns/tables",
        json={"name": "t", "schema": {"type": "struct", "fields": [column]}},
        timeout=30,
    )
    version = {
        "version-id": 1, "schema-id": 0, "timestamp-ms": 1, "summary": {},
        "representations": [{"type": "sql", "sql": "SELECT id FROM ns.t", "dialect": "spark"}],
        "default-namespace": ["ns"],
    }  # fmt: skip
    iceberg.post(
        f"{base_url}/iceberg/v1/namespaces/ns/views",
        json={
            "name": "v",
            "schema": {"type": "struct", "schema-id": 0, "fields": [column]},
            "view-version": version,
        },
        timeout=30,
    )


def fuzz(
    schema: Any,
    *,
    base_url: str,
    session: requests.Session,
    max_examples: int,
    tally: Tally,
    deadline: float,
    reseed: Any,
) -> None:
    """Each operation: valid and invalid requests with random path parameters, then valid
    ones against the seeded objects."""
    for result in schema.get_all_operations():
        operation = result.ok()
        label = f"{operation.method.upper()} {operation.path}"
        names = {p.name for p in operation.path_parameters}
        pinned = {k: v for k, v in EXISTING.items() if k in names}
        runs = [(GenerationMode.POSITIVE, None), (GenerationMode.NEGATIVE, None)]
        if pinned:
            runs.append((GenerationMode.POSITIVE, pinned))
        for mode, path_parameters in runs:
            if time.monotonic() > deadline:
                print(f"  time is up before {label} ({mode.value})")
                return
            reseed()
            strategy = operation.as_strategy(generation_mode=mode, path_parameters=path_parameters)
            try:
                _run(strategy, label, base_url, session, max_examples, tally)
            except Exception as error:  # noqa: BLE001 - a schema schemathesis cannot use
                tally.statuses[label][f"not generated ({type(error).__name__})"] += 1
        print(f"  {label}: {dict(tally.statuses[label])}", flush=True)


def _run(
    strategy: Any,
    label: str,
    base_url: str,
    session: requests.Session,
    max_examples: int,
    tally: Tally,
) -> None:
    @settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )
    @given(strategy)
    def run(case: Any) -> None:
        try:
            response = case.call(base_url=base_url, session=session, timeout=30)
        except requests.RequestException as error:
            tally.statuses[label]["transport error"] += 1
            tally.errors[label].append(f"{case.method} {case.path}: {error}")
            return
        tally.record(label, case, response)

    run()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iceberg-spec", type=Path, help="Iceberg's REST OpenAPI YAML")
    parser.add_argument("--url", help="an app already running (default: start one)")
    parser.add_argument("--credential", help="CLIENT_ID:SECRET of an editor (with --url)")
    parser.add_argument("--api-user", help="an editor's username (with --url)")
    parser.add_argument("--api-password", help="that editor's password (with --url)")
    parser.add_argument("--max-examples", type=int, default=50)
    parser.add_argument("--minutes", type=float, default=15.0, help="stop after this long")
    parser.add_argument("--skip-api", action="store_true", help="fuzz /iceberg only")
    args = parser.parse_args()
    if args.iceberg_spec is None:
        print(
            "No --iceberg-spec: only /api is fuzzed. For /iceberg, pass the path of Iceberg's "
            "open-api/rest-catalog-open-api.yaml (apache/iceberg on GitHub)."
        )
    deadline = time.monotonic() + args.minutes * 60
    tally = Tally()
    with ExitStack() as stack:
        if args.url:
            base_url, credential = args.url.rstrip("/"), args.credential or ""
            token = requests.post(
                f"{base_url}/iceberg/v1/oauth/tokens",
                data={"grant_type": "client_credentials"},
                auth=tuple(credential.split(":", 1)),
                timeout=30,
            ).json()["access_token"]
            api_token = requests.post(
                f"{base_url}/api/token/",
                data={"username": args.api_user, "password": args.api_password},
                timeout=30,
            ).json()["token"]
            log = "(the app's own log)"
        else:
            from tests.live_server import catalog_server

            root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="fuzz-")))
            server = stack.enter_context(catalog_server(root, workers=3, threads=2))
            base_url = server.base_url
            token = server.bearer_token()
            api_token = server.api_session().headers["Authorization"].split(" ", 1)[1]
            log = str(server.log_path)
            print(f"App on {base_url}; its log: {log} (kept until the run ends)")
        iceberg = requests.Session()
        iceberg.headers["Authorization"] = f"Bearer {token}"

        def reseed() -> None:
            seed(base_url, iceberg)

        if args.iceberg_spec is not None:
            endpoints = iceberg.get(f"{base_url}/iceberg/v1/config", timeout=30).json()["endpoints"]
            schema = schemathesis.openapi.from_dict(iceberg_schema(args.iceberg_spec, endpoints))
            print(f"/iceberg: {len(endpoints)} endpoints listed by /v1/config")
            fuzz(
                schema,
                base_url=f"{base_url}/iceberg",
                session=iceberg,
                max_examples=args.max_examples,
                tally=tally,
                deadline=deadline,
                reseed=reseed,
            )
        if not args.skip_api:
            api = requests.Session()
            api.headers["Authorization"] = f"Token {api_token}"
            document = api.get(f"{base_url}/api/schema/?format=json", timeout=30).json()
            print("/api: the app's own schema")
            fuzz(
                schemathesis.openapi.from_dict(document),
                base_url=base_url,
                session=api,
                max_examples=args.max_examples,
                tally=tally,
                deadline=deadline,
                reseed=reseed,
            )
        failed = sorted(label for label in tally.statuses if tally.errors[label])
        for label in failed:
            print(f"5xx on {label}:")
            for error in tally.errors[label]:
                print(f"    {error}")
        if failed:
            print(f"Server log: {log}")
            if not args.url:
                print(Path(log).read_text(errors="replace")[-4000:])
        print(f"{len(tally.statuses) - len(failed)} passed, {len(failed)} failed")
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

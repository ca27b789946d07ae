"""Where a load-table's time goes in the app: the WSGI application of bench/rest_load.py
called in process (no gunicorn, no sockets) on a throwaway catalog set up as that bench
sets it up (SQLite, a 5-snapshot table, a superuser's token and a namespace reader's),
with every request counted for /metrics as `make run` serves.

    .venv/bin/python bench/rest_profile.py                      # µs per request, each kind
    .venv/bin/python bench/rest_profile.py --profile load-table # + cProfile's top functions
    valgrind --tool=callgrind --callgrind-out-file=cg.out \\
        .venv/bin/python bench/rest_profile.py --only load-table --requests 300 --callgrind

Kinds: bare-view, load-table, load-granted, load-304. `--callgrind` (under valgrind's
callgrind, started with `--instr-atstart=no`): after the set-up and 200 warm-up requests of
the first kind, freezes the collector's objects and turns the instrumentation on with
`callgrind_control -i on` for `--requests` requests only, so that callgrind's "Collected"
divided by `--requests` is the instructions of one request (bench/README.md).
`PROFILE_SKIP_MIDDLEWARE=ClassName,...` leaves those middleware out (what each costs)."""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import secrets
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

KINDS = ("bare-view", "load-table", "load-granted", "load-304")


def setup_env(directory: Path) -> None:
    (directory / "warehouse").mkdir()
    (directory / "metrics").mkdir()
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "webapp.settings.dev",
            "DEBUG": "0",
            "LOG_LEVEL": "WARNING",
            "DATABASE_URL": f"sqlite:///{directory / 'db.sqlite3'}",
            "WAREHOUSE": str(directory / "warehouse"),
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "SECRET_KEY": secrets.token_urlsafe(32),
            "PROMETHEUS_MULTIPROC_DIR": str(directory / "metrics"),
        }
    )


def call(app, method: str, path: str, headers: dict | None = None, body: bytes = b"",
         content_type: str = "") -> tuple[str, dict, bytes]:  # fmt: skip
    environ = {
        "REQUEST_METHOD": method,
        "SCRIPT_NAME": "",
        "PATH_INFO": path,
        "QUERY_STRING": "",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8000",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "HTTP_HOST": "127.0.0.1:8000",
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": False,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
        "CONTENT_LENGTH": str(len(body)),
    }
    if content_type:
        environ["CONTENT_TYPE"] = content_type
    for name, value in (headers or {}).items():
        environ["HTTP_" + name.upper().replace("-", "_")] = value
    answered: dict = {}

    def start_response(status, response_headers, exc_info=None):
        answered["status"] = status
        answered["headers"] = dict(response_headers)

    chunks = app(environ, start_response)
    data = b"".join(chunks)
    if hasattr(chunks, "close"):
        chunks.close()
    return answered["status"], answered["headers"], data


def setup_catalog(app) -> dict[str, tuple[str, dict]]:
    import json
    import urllib.parse

    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from bench.rest_load import TABLE_SCHEMA
    from catalog.services import grants
    from catalog.services.credentials import create_client

    call_command("migrate", "--noinput", verbosity=0)
    users = get_user_model().objects
    admin = users.create_superuser("bench", "bench@example.com", secrets.token_urlsafe(16))
    reader = users.create_user("reader")

    def token(user) -> str:
        client, secret = create_client(name="bench", user=user)
        form = urllib.parse.urlencode(
            {
                "grant_type": "client_credentials",
                "client_id": client.client_id,
                "client_secret": secret,
                "scope": "PRINCIPAL_ROLE:ALL",
            }  # fmt: skip
        ).encode()
        status, _, data = call(app, "POST", "/iceberg/v1/oauth/tokens", body=form,
                               content_type="application/x-www-form-urlencoded")  # fmt: skip
        assert status.startswith("200"), (status, data)
        return json.loads(data)["access_token"]

    admin_token = token(admin)
    auth = {"Authorization": f"Bearer {admin_token}"}

    def post(path: str, document: dict) -> dict:
        status, _, data = call(app, "POST", path, auth, json.dumps(document).encode(),
                               "application/json")  # fmt: skip
        assert status.startswith("200"), (path, status, data)
        return json.loads(data)

    base = "/iceberg/v1"
    post(f"{base}/namespaces", {"namespace": ["bench"]})
    table = post(f"{base}/namespaces/bench/tables", {"name": "orders", "schema": TABLE_SCHEMA})
    location, parent = table["metadata"]["location"], None
    for n in range(1, 6):
        snapshot_id = 1000 + n
        snapshot = {
            "snapshot-id": snapshot_id, "sequence-number": n,
            "timestamp-ms": int(time.time() * 1000),
            "manifest-list": f"{location}/metadata/snap-{snapshot_id}-1-{n:08x}.avro",
            "summary": {"operation": "append", "added-records": str(25_000 * n)},
            "schema-id": 0, **({"parent-snapshot-id": parent} if parent else {}),
        }  # fmt: skip
        post(f"{base}/namespaces/bench/tables/orders", {
            "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main",
                              "snapshot-id": parent}],
            "updates": [{"action": "add-snapshot", "snapshot": snapshot},
                        {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch",
                         "snapshot-id": snapshot_id}],
        })  # fmt: skip
        parent = snapshot_id
    grants.grant(privilege="read_data", principal_type="user", principal="reader",
                 securable_type="namespace", namespace="bench", actor=admin)  # fmt: skip
    reader_auth = {"Authorization": f"Bearer {token(reader)}"}
    load = f"{base}/namespaces/bench/tables/orders"
    _, headers, _ = call(app, "GET", load, auth)
    return {
        "bare-view": ("/bench/bare", auth),
        "load-table": (load, auth),
        "load-granted": (load, reader_auth),
        "load-304": (load, {**auth, "If-None-Match": headers["ETag"]}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(KINDS))
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--profile", default="", help="a kind to run under cProfile")
    parser.add_argument("--top", type=int, default=45)
    parser.add_argument("--callgrind", action="store_true", help="see the module's text")
    parser.add_argument("--sort", default="tottime")
    args = parser.parse_args()

    directory = Path(tempfile.mkdtemp(prefix="lakeview-profile-"))
    try:
        setup_env(directory)
        from bench.rest_load import _django_app, application

        if skip := os.environ.get("PROFILE_SKIP_MIDDLEWARE"):  # experiments: a middleware's cost
            from django.conf import settings

            settings.MIDDLEWARE = [
                m for m in settings.MIDDLEWARE if m.rsplit(".", 1)[1] not in skip.split(",")
            ]

        _django_app()
        kinds = setup_catalog(application)
        wanted = args.only.split(",")
        expected = {"load-304": "304"}
        for kind in wanted:
            path, headers = kinds[kind]
            for _ in range(200):  # warm-up: caches, the pointer query's compilation
                status, _, _ = call(application, "GET", path, headers)
            assert status.startswith(expected.get(kind, "200")), (kind, status)
        if args.callgrind:
            # Under valgrind --tool=callgrind --instr-atstart=no: only the requests counted.
            import gc
            import subprocess

            path, headers = kinds[wanted[0]]
            gc.collect()
            gc.freeze()  # the set-up's objects: not traversed by the counted requests' passes
            subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], check=True,
                           capture_output=True)  # fmt: skip
            for _ in range(args.requests):
                call(application, "GET", path, headers)
            subprocess.run(["callgrind_control", "-i", "off", str(os.getpid())], check=True,
                           capture_output=True)  # fmt: skip
            return
        if args.requests == 0:
            return
        for kind in wanted:
            path, headers = kinds[kind]
            best = float("inf")
            for _ in range(5):
                started = time.perf_counter()
                for _ in range(args.requests // 5):
                    call(application, "GET", path, headers)
                best = min(best, (time.perf_counter() - started) / (args.requests // 5))
            print(f"{kind:<13} {best * 1e6:8.1f} µs/request (best of 5 batches)", flush=True)
        if args.profile:
            path, headers = kinds[args.profile]
            profiler = cProfile.Profile()
            profiler.enable()
            for _ in range(args.requests):
                call(application, "GET", path, headers)
            profiler.disable()
            out = io.StringIO()
            stats = pstats.Stats(profiler, stream=out)
            stats.sort_stats(args.sort).print_stats(args.top)
            print(out.getvalue())
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()

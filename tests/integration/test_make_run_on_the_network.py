"""`HOST=0.0.0.0 make run` serves other machines (issue 47): the development server is
started as scripts/run.sh starts it (its addresses evaluated from webapp/run_addresses.py,
then `manage.py runserver "$RUN_ADDRPORT"` with the development settings), and asked
through an address of this machine that is not loopback, as another machine asks it, by
the machine's name, and at the CATALOG_URI the worker and the streaming host are given.
Django answers 400 to a Host header ALLOWED_HOSTS does not list: each must get past that."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.live_server import REPO_ROOT, free_port

#: run.sh's own lines, between its settings and the worker's start.
START = """
addresses="$(HOST="$HOST" PORT="$PORT" python -m webapp.run_addresses)"
eval "$addresses"
printf '%s\\n' "$CATALOG_URI" > "$CATALOG_URI_FILE"
exec python manage.py runserver "$RUN_ADDRPORT" --noreload
"""


def outside_address() -> str | None:
    """An IPv4 address of this machine's own network namespace that is not loopback (as
    `ip -o addr` lists them), or None."""
    if shutil.which("ip") is None:
        return None
    listed = subprocess.run(
        ["ip", "-o", "-4", "addr", "show", "scope", "global"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    for line in listed.splitlines():
        words = line.split()
        if "inet" in words:
            return words[words.index("inet") + 1].split("/")[0]
    return None


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    port = free_port()
    catalog_uri_file = tmp_path / "catalog-uri"
    env = {
        **os.environ,
        "HOST": "0.0.0.0",
        "PORT": str(port),
        "CATALOG_URI_FILE": str(catalog_uri_file),
        "DJANGO_SETTINGS_MODULE": "webapp.settings.dev",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(REPO_ROOT),
    }
    for name in ("ALLOWED_HOSTS", "CATALOG_URI"):
        env.pop(name, None)
    log = (tmp_path / "server.log").open("wb")
    server = subprocess.Popen(
        ["bash", "-c", START], cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert server.poll() is None, (tmp_path / "server.log").read_text()
            try:
                requests.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
                break
            except requests.ConnectionError:
                time.sleep(0.2)
        yield port, catalog_uri_file
    finally:
        server.terminate()
        server.wait(timeout=20)
        log.close()


def test_on_every_address_other_machines_and_the_workers_get_past_the_host_check(served):
    address = outside_address()
    if address is None:
        pytest.skip("this machine has no address but loopback")
    port, catalog_uri_file = served

    # Another machine, by this machine's address and by its name.
    for host in (address, socket.gethostname()):
        page = requests.get(f"http://{host}:{port}/login/", timeout=10)
        assert page.status_code == 200, (host, page.status_code, page.text[:300])
        assert 'name="password"' in page.text

    # The worker and the streaming host: a reachable address, which the catalog answers
    # (401: it wants their credential), never 0.0.0.0 or a 400 for the Host.
    catalog_uri = catalog_uri_file.read_text().strip()
    assert catalog_uri == f"http://127.0.0.1:{port}/iceberg"
    config = requests.get(f"{catalog_uri}/v1/config", timeout=10)
    assert config.status_code == 401, config.text[:300]

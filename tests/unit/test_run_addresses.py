"""`make run`'s addresses (webapp/run_addresses.py, which scripts/run.sh evaluates): which
address the development server listens on, which host names it answers to, and where the
local worker and streaming host reach its Iceberg REST catalog, for each HOST."""

from __future__ import annotations

import subprocess
from pathlib import Path

from webapp.run_addresses import decide

REPO_ROOT = Path(__file__).resolve().parents[2]
NAMES = ["lakehost", "lakehost.lan"]
ADDRESSES = ["192.0.2.7", "fd00::7"]


def decided(**environ: str):
    return decide(environ, names=lambda: NAMES, addresses=lambda: ADDRESSES)


def test_by_default_it_serves_this_machine_only():
    found = decided()
    assert found.addrport == "127.0.0.1:8000"
    assert found.allowed_hosts == ["127.0.0.1", "localhost"]
    assert found.catalog_uri == "http://127.0.0.1:8000/iceberg"
    assert found.urls == ["http://127.0.0.1:8000/"]


def test_on_every_address_it_answers_to_the_machines_names_and_the_workers_use_loopback():
    found = decided(HOST="0.0.0.0", PORT="8010")
    assert found.addrport == "0.0.0.0:8010"
    # 0.0.0.0 listens on IPv4 only: the IPv6 address is no way in.
    assert found.allowed_hosts == [
        "127.0.0.1",
        "localhost",
        "lakehost",
        "lakehost.lan",
        "192.0.2.7",
    ]
    # 0.0.0.0 is an address to listen on, never one to connect to (nor a Host it allows).
    assert found.catalog_uri == "http://127.0.0.1:8010/iceberg"
    assert found.urls[0] == "http://127.0.0.1:8010/"
    assert "http://192.0.2.7:8010/" in found.urls and "http://lakehost:8010/" in found.urls


def test_on_every_ipv6_address_the_addresses_are_bracketed_as_a_host_header_has_them():
    found = decided(HOST="::")
    assert found.addrport == "[::]:8000"
    assert {"192.0.2.7", "[fd00::7]", "[::1]"} <= set(found.allowed_hosts)
    assert found.catalog_uri == "http://[::1]:8000/iceberg"


def test_on_one_address_it_answers_there_and_the_workers_connect_there():
    found = decided(HOST="192.0.2.7")
    assert found.addrport == "192.0.2.7:8000"
    assert found.allowed_hosts == ["127.0.0.1", "localhost", "192.0.2.7"]
    assert found.catalog_uri == "http://192.0.2.7:8000/iceberg"


def test_what_the_user_sets_is_kept_and_the_catalogs_host_is_allowed_too():
    found = decided(
        HOST="0.0.0.0", ALLOWED_HOSTS="lv.example.com", CATALOG_URI="http://lv-catalog:8000/iceberg"
    )
    assert found.allowed_hosts == ["lv.example.com", "lv-catalog"]
    assert found.catalog_uri == "http://lv-catalog:8000/iceberg"
    assert decided(HOST="0.0.0.0", ALLOWED_HOSTS="lv.example.com").allowed_hosts == [
        "lv.example.com",
        "127.0.0.1",
    ]


def test_the_exports_read_back_in_the_shell_as_they_were_decided():
    found = decided(HOST="::", ALLOWED_HOSTS="a b,c'd")
    echoed = subprocess.run(
        ["bash", "-c", 'eval "$1"; printf "%s|%s|%s|%s" "$RUN_ADDRPORT" "$ALLOWED_HOSTS" '
         '"$CATALOG_URI" "$RUN_URLS"', "-", found.exports()],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert echoed.split("|") == [
        "[::]:8000",
        ",".join(found.allowed_hosts),
        "http://[::1]:8000/iceberg",
        " ".join(found.urls),
    ]


def test_make_run_starts_the_server_and_the_workers_with_what_was_decided():
    script = (REPO_ROOT / "scripts" / "run.sh").read_text()
    assert 'addresses="$(HOST="$HOST" PORT="$PORT" python -m webapp.run_addresses)"' in script
    assert 'eval "$addresses"' in script
    assert 'runserver "$RUN_ADDRPORT"' in script
    # The catalog's address is decided there only, never from HOST again.
    assert "CATALOG_URI=" not in script

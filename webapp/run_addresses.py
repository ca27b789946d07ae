"""`make run`'s addresses (scripts/run.sh asks this before it starts anything): from `HOST`
and `PORT`, the development server's address, the host names the app answers to
(`ALLOWED_HOSTS`) and where the local worker and streaming host reach its Iceberg REST
catalog (`CATALOG_URI`). Django-free and quick, so that the script can ask it first.

- `HOST=127.0.0.1` (the default) serves this machine only, as `localhost` or `127.0.0.1`.
- `HOST=0.0.0.0` (or `::`) listens on every address of the machine. Django answers 400
  to a `Host` header ALLOWED_HOSTS does not list, so the machine's names and its addresses
  (`hostname -I`) are added: how other machines reach it. The workers run on this machine
  and reach it at loopback: 0.0.0.0 is an address to listen on, not one to connect to.
- `HOST=<an address or a name>` listens there only: that is what the workers use too, and
  it is added to ALLOWED_HOSTS.

An `ALLOWED_HOSTS` or `CATALOG_URI` set in the environment is kept as given, and the
catalog's host is added to ALLOWED_HOSTS (the workers' requests must pass the same check).
`python -m webapp.run_addresses` prints the result as shell `export` lines."""

from __future__ import annotations

import ipaddress
import os
import shlex
import socket
import subprocess
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = "8000"
DEFAULT_ALLOWED_HOSTS = ("127.0.0.1", "localhost")
#: Addresses that mean "every address of this machine" to a server.
WILDCARDS = {"0.0.0.0": "127.0.0.1", "::": "::1", "[::]": "::1"}


@dataclass(frozen=True)
class Addresses:
    """What scripts/run.sh runs with."""

    #: `manage.py runserver`'s argument.
    addrport: str
    allowed_hosts: list[str]
    catalog_uri: str
    #: Where people reach the app, for the script's banner: this machine's first.
    urls: list[str]

    def exports(self) -> str:
        values = {
            "RUN_ADDRPORT": self.addrport,
            "ALLOWED_HOSTS": ",".join(self.allowed_hosts),
            "CATALOG_URI": self.catalog_uri,
            "RUN_URLS": " ".join(self.urls),
        }
        return "".join(f"export {name}={shlex.quote(value)}\n" for name, value in values.items())


def _is_ipv6(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).version == 6
    except ValueError:
        return False


def url_host(host: str) -> str:
    """`host` as it stands in a URL and in a Host header (and so in ALLOWED_HOSTS, which
    Django compares with the header's host): an IPv6 address in brackets."""
    bare = host.strip("[]")
    return f"[{bare}]" if _is_ipv6(bare) else bare


def machine_names() -> list[str]:
    """This machine's host name and fully qualified name."""
    names = [socket.gethostname(), socket.getfqdn()]
    return [name for name in dict.fromkeys(names) if name and name != "localhost"]


def machine_addresses() -> list[str]:
    """The addresses of this machine's interfaces but loopback and link-local ones, as
    `hostname -I` lists them (Debian's hostname, on every Debian machine and image);
    none when it cannot tell."""
    try:
        listed = subprocess.run(
            ["hostname", "-I"], capture_output=True, text=True, timeout=5, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    found = []
    for word in listed.split():
        try:
            ipaddress.ip_address(word)
        except ValueError:
            continue
        found.append(word)
    return found


def decide(
    environ: Mapping[str, str],
    *,
    names: Callable[[], Iterable[str]] = machine_names,
    addresses: Callable[[], Iterable[str]] = machine_addresses,
) -> Addresses:
    """The addresses for the environment's HOST, PORT, ALLOWED_HOSTS and CATALOG_URI
    (`names` and `addresses` tell the machine's own, asked only for a wildcard HOST)."""
    host = (environ.get("HOST") or DEFAULT_HOST).strip()
    port = (environ.get("PORT") or DEFAULT_PORT).strip()
    wildcard = host in WILDCARDS
    # Where this machine's own processes connect: loopback for a wildcard, else the address
    # (or name) the server listens on, which is the only one it answers at.
    local = WILDCARDS[host] if wildcard else host.strip("[]")
    catalog_uri = environ.get("CATALOG_URI") or f"http://{url_host(local)}:{port}/iceberg"

    outside: list[str] = []
    if wildcard:
        ipv4_only = host == "0.0.0.0"
        outside += list(names())
        outside += [a for a in addresses() if not (ipv4_only and _is_ipv6(a))]
    elif local not in DEFAULT_ALLOWED_HOSTS:
        outside.append(local)

    given = environ.get("ALLOWED_HOSTS")
    if given:
        allowed = [item.strip() for item in given.split(",") if item.strip()]
    else:
        allowed = [*DEFAULT_ALLOWED_HOSTS, *(url_host(item) for item in outside)]
    catalog_host = urlsplit(catalog_uri).hostname
    if catalog_host:
        allowed.append(url_host(catalog_host))

    urls = [f"http://{url_host(local)}:{port}/"]
    urls += [f"http://{url_host(item)}:{port}/" for item in outside if item != local]
    return Addresses(
        addrport=f"{url_host(host)}:{port}",
        allowed_hosts=list(dict.fromkeys(allowed)),
        catalog_uri=catalog_uri,
        urls=list(dict.fromkeys(urls)),
    )


if __name__ == "__main__":
    print(decide(os.environ).exports(), end="")

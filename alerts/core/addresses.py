"""Where a webhook may be sent. Only http and https; and never to an address in loopback,
private, link-local, shared, multicast, reserved or unspecified ranges, IPv4 or IPv6
(IPv4-mapped, 6to4, Teredo and NAT64 addresses are judged by the IPv4 address inside),
unless an operator allows that network (ALERTS_ALLOWED_NETWORKS): a webhook must not become
a way to reach the app's own network (server-side request forgery).

A name is resolved and every address it gives is checked, at creation and again at each
send, and the send connects to the address checked (webhooks.post): a name whose DNS
answer changes in between (DNS rebinding) is caught at the send."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from catalog.core.errors import InvalidInput

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], list[Address]]

DEFAULT_PORTS = {"http": 80, "https": 443}
MAX_URL_LENGTH = 2048
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


@dataclass(frozen=True)
class Target:
    """A webhook URL taken apart: where to connect, what to ask for."""

    scheme: str
    host: str  # a name, or an IP address without brackets
    port: int
    path: str  # with its query


def parse_networks(items: Iterable[str], *, field: str = "ALERTS_ALLOWED_NETWORKS") -> list:
    """CIDR networks (or single addresses) from a setting's items."""
    networks: list[Network] = []
    for item in items:
        try:
            networks.append(ipaddress.ip_network(item.strip(), strict=False))
        except ValueError:
            raise InvalidInput(
                f"{item!r} is not a network (10.0.0.0/8, ::1)", field=field
            ) from None
    return networks


def parse_url(url: str, *, field: str = "url") -> Target:
    if not isinstance(url, str) or not url.strip():
        raise InvalidInput("A webhook URL is required", field=field)
    url = url.strip()
    if len(url) > MAX_URL_LENGTH:
        raise InvalidInput(f"The URL is longer than {MAX_URL_LENGTH} characters", field=field)
    if any(ord(c) < 33 or ord(c) == 127 for c in url):
        raise InvalidInput("The URL holds spaces or control characters", field=field)
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise InvalidInput("A webhook URL must start with http:// or https://", field=field)
    if parts.username is not None or parts.password is not None:
        raise InvalidInput(
            "A webhook URL may not hold a user or password: the subscription's secret "
            "signs each request",
            field=field,
        )
    host = parts.hostname
    if not host:
        raise InvalidInput("The URL names no host", field=field)
    try:
        port = parts.port or DEFAULT_PORTS[scheme]
    except ValueError:
        raise InvalidInput("The URL's port is not a number from 1 to 65535", field=field) from None
    if not 0 < port < 65536:
        raise InvalidInput("The URL's port is not a number from 1 to 65535", field=field)
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return Target(scheme=scheme, host=host, port=port, path=path)


def inner_ipv4(address: Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries (mapped, 6to4, Teredo's client, NAT64)."""
    if isinstance(address, ipaddress.IPv4Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def is_public(address: Address) -> bool:
    """Whether `address` is a unicast address of the public internet."""
    if address.is_multicast or address.is_unspecified or address.is_reserved:
        return False
    if address.is_loopback or address.is_link_local or address.is_private:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.is_site_local:
        return False
    if not address.is_global:  # shared (100.64/10) and the rest IANA does not route
        return False
    inner = inner_ipv4(address)
    return inner is None or is_public(inner)


def allowed(address: Address, networks: Sequence[Network]) -> bool:
    """Whether a webhook may connect to `address`: a public one, or one inside a network the
    operator allowed (an IPv4-mapped address counts as its IPv4 address there too)."""
    if is_public(address):
        return True
    candidates = [address]
    inner = inner_ipv4(address)
    if inner is not None:
        candidates.append(inner)
    return any(
        candidate.version == network.version and candidate in network
        for candidate in candidates
        for network in networks
    )


def resolve(host: str, port: int) -> list[Address]:
    """Every address `host` resolves to (an address literal is itself)."""
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    found: list[Address] = []
    for info in infos:
        address = ipaddress.ip_address(info[4][0].split("%", 1)[0])
        if address not in found:
            found.append(address)
    return found


def check_url(
    url: str,
    networks: Sequence[Network],
    *,
    field: str = "url",
    resolver: Resolver = resolve,
) -> tuple[Target, list[Address]]:
    """The URL taken apart, and the addresses it may be sent to (all of them allowed), or
    InvalidInput naming `field`."""
    target = parse_url(url, field=field)
    try:
        addresses = resolver(target.host, target.port)
    except (OSError, UnicodeError):
        addresses = []
    if not addresses:
        raise InvalidInput(f"The host {target.host} cannot be resolved", field=field)
    refused = [str(a) for a in addresses if not allowed(a, networks)]
    if refused:
        raise InvalidInput(
            f"The URL's host {target.host} resolves to {', '.join(refused)}: a loopback, "
            "private, link-local, multicast or reserved address, which webhooks may not "
            "reach unless an administrator allows that network (ALERTS_ALLOWED_NETWORKS)",
            field=field,
        )
    return target, addresses

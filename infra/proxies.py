"""Who sent a request: the client behind a trusted proxy (TRUSTED_PROXIES).

A TLS proxy or load balancer in front of the app connects to it itself, so the socket's
address (REMOTE_ADDR) is the proxy's for every client, and the scheme is the proxy's plain
HTTP. The proxy says who its client was and how it came in: `X-Forwarded-For` and
`X-Forwarded-Proto`, or RFC 7239's `Forwarded: for=...;proto=...`. Any client can write
those headers too, so they are read only from a connection whose address lies in one of
the TRUSTED_PROXIES networks; from anyone else they are ignored entirely.

`TrustedProxyMiddleware`, first in MIDDLEWARE (every path: pages, /api, /iceberg,
/metrics), decides once per request and writes the answer where everything already looks:

- `REMOTE_ADDR` becomes the client's address, and the socket's own is kept under
  `SOCKET_ADDRESS` (`socket_address()`). `client_address()` reads it; the sign-in throttle,
  /metrics' allowed networks and the log lines go through it. Django's META is the WSGI
  environ itself, so gunicorn's access log, written after the response from the same
  environ, names the client too.
- `wsgi.url_scheme` becomes the scheme the client used, which is what Django's
  `request.is_secure()`, `build_absolute_uri()` and the CSRF origin check read. Django's
  own hook for this, SECURE_PROXY_SSL_HEADER, believes the header from any sender, so it
  stays unset.

The client is the right-most address of the chain that is not a trusted proxy: each proxy
appends the address it was connected from, so walking from the right, every hop up to the
first untrusted one was written by a proxy we trust, and everything left of it was written
by the client or a hop nobody vouches for. A hop that is not an address (`unknown`, an
obfuscated `_name`, garbage) ends the walk: the last address vouched for is used. When a
request carries both headers and they name different clients, one of them came from the
client (a proxy that appends `X-Forwarded-For` passes a forged `Forwarded` on untouched),
so neither is believed and the socket's address stands: a forger can only make itself look
like the proxy, never like another client.

Why not a library: werkzeug's ProxyFix and django-xff count hops instead of checking the
sender's network, and django-ipware ranks the "best" address out of many headers, some of
which (X-Real-IP, CF-Connecting-IP) any client can set; none sets the scheme."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable
from functools import cache
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

if TYPE_CHECKING:  # the settings import this module: it must not import django.http
    from django.http import HttpRequest, HttpResponse

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

#: The META key (and WSGI environ key) that keeps the socket's own address once
#: REMOTE_ADDR names the client a trusted proxy relayed.
SOCKET_ADDRESS = "lakeview.socket_address"

SCHEMES = ("http", "https")


def parse_networks(values: Iterable[str], *, setting: str) -> tuple[Network, ...]:
    """Networks from CIDRs or single addresses (`10.0.0.0/8`, `192.0.2.7`, `::1`); an
    ImproperlyConfigured naming the setting and the value otherwise."""
    networks = []
    for value in values:
        try:
            networks.append(ipaddress.ip_network(value.strip(), strict=False))
        except ValueError:
            raise ImproperlyConfigured(
                f"{setting}: {value!r} is not a network or an address (as 10.0.0.0/8 or 192.0.2.7)"
            ) from None
    return tuple(networks)


@cache
def _trusted_networks(values: tuple[str, ...]) -> tuple[Network, ...]:
    return parse_networks(values, setting="TRUSTED_PROXIES")


def parse_address(text: str) -> Address | None:
    """An address as REMOTE_ADDR or a proxy header writes it, without its port: `192.0.2.1`,
    `192.0.2.1:4711`, `2001:db8::1`, `[2001:db8::1]`, `[2001:db8::1]:4711`; an IPv4-mapped
    IPv6 address as the IPv4 one. None for anything else (`unknown`, `_hidden`, garbage)."""
    text = text.strip().strip('"').strip()
    if text.startswith("["):
        text, bracket, _port = text[1:].partition("]")
        if not bracket:
            return None
    elif text.count(":") == 1:  # IPv4 with a port; an IPv6 address has at least two
        text = text.partition(":")[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def is_trusted(address: Address | None, networks: tuple[Network, ...]) -> bool:
    return address is not None and any(address in network for network in networks)


def _split_outside_quotes(text: str, separator: str) -> list[str]:
    """`text` split at `separator`, except inside an RFC 7230 quoted string."""
    parts, current, quoted, escaped = [], [], False, False
    for char in text:
        if escaped:
            escaped = False
        elif quoted and char == "\\":
            escaped = True
        elif char == '"':
            quoted = not quoted
        elif char == separator and not quoted:
            parts.append("".join(current))
            current = []
            continue
        current.append(char)
    parts.append("".join(current))
    return parts


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = value[1:-1]
        out, escaped = [], False
        for char in value:
            if char == "\\" and not escaped:
                escaped = True
                continue
            out.append(char)
            escaped = False
        return "".join(out)
    return value


def forwarded_elements(header: str) -> list[dict[str, str]]:
    """RFC 7239's `Forwarded` as one dict per element (per hop), names in lower case; a
    pair that is not `name=value` is left out."""
    elements = []
    for element in _split_outside_quotes(header, ","):
        pairs: dict[str, str] = {}
        for pair in _split_outside_quotes(element, ";"):
            name, equals, value = pair.partition("=")
            if equals and name.strip():
                pairs[name.strip().lower()] = _unquote(value)
        elements.append(pairs)
    return elements


def _client_hop(hops: list[Address | None], networks: tuple[Network, ...]) -> tuple[int, Address]:
    """Which hop is the client, and its address: the right-most hop that is not a trusted
    proxy. `hops` ends with the socket's address, which is a trusted proxy's."""
    for index in range(len(hops) - 2, -1, -1):
        hop = hops[index]
        if hop is None:  # not an address: nobody vouches for what is left of it
            # The hop to its right: a trusted proxy already walked over, or the socket.
            return index + 1, hops[index + 1]  # type: ignore[return-value]
        if not is_trusted(hop, networks):
            return index, hop
    # Every hop is a trusted proxy's address: the left-most of them sent the request.
    return 0, hops[0]  # type: ignore[return-value]


def _scheme(value: str | None) -> str | None:
    value = (value or "").strip().lower()
    return value if value in SCHEMES else None


def decide(meta: dict) -> tuple[str, str | None] | None:
    """(the client's address, the scheme it used or None) for a request whose socket address
    is a trusted proxy's; None when the headers are not to be read (no trusted proxies, an
    untrusted sender, headers that contradict each other)."""
    values = tuple(getattr(settings, "TRUSTED_PROXIES", ()))
    if not values:
        return None
    networks = _trusted_networks(values)
    socket = parse_address(meta.get("REMOTE_ADDR", ""))
    if socket is None or not is_trusted(socket, networks):
        return None
    protos = [p for p in meta.get("HTTP_X_FORWARDED_PROTO", "").split(",") if p.strip()]
    candidates: list[tuple[Address, str | None]] = []
    xff = meta.get("HTTP_X_FORWARDED_FOR")
    if xff is not None:
        hops = [parse_address(hop) for hop in xff.split(",")]
        index, address = _client_hop([*hops, socket], networks)
        # A list that follows X-Forwarded-For hop by hop: the client's own hop; otherwise
        # (one value, the usual case) what the proxy nearest to us says.
        aligned = len(protos) == len(hops) and index < len(protos)
        proto = protos[index] if aligned else (protos[-1] if protos else None)
        candidates.append((address, _scheme(proto)))
    forwarded = meta.get("HTTP_FORWARDED")
    if forwarded is not None:
        elements = forwarded_elements(forwarded)
        hops = [parse_address(element.get("for", "")) for element in elements]
        index, address = _client_hop([*hops, socket], networks)
        candidates.append(
            (address, _scheme(elements[index].get("proto") if index < len(elements) else None))
        )
    if not candidates:  # a scheme alone: the proxy's own connection is the client's
        return str(socket), _scheme(protos[-1] if protos else None)
    if len({address for address, _ in candidates}) > 1:
        return None  # the two headers disagree: one of them is the client's own
    scheme = next((s for _, s in reversed(candidates) if s), None)
    return str(candidates[0][0]), scheme


def client_address(request: HttpRequest) -> str:
    """The address of the client: the socket's, or the one a trusted proxy relayed."""
    return request.META.get("REMOTE_ADDR", "")


def socket_address(request: HttpRequest) -> str:
    """The address of the connection itself (the proxy's, behind a trusted proxy)."""
    return request.META.get(SOCKET_ADDRESS, request.META.get("REMOTE_ADDR", ""))


class TrustedProxyMiddleware:
    """Puts the client's address and scheme in place (see the module) before any other
    middleware reads them."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if settings.TRUSTED_PROXIES:
            decided = decide(request.META)
            if decided is not None:
                address, scheme = decided
                request.META[SOCKET_ADDRESS] = request.META.get("REMOTE_ADDR", "")
                request.META["REMOTE_ADDR"] = address
                if scheme:
                    request.META["wsgi.url_scheme"] = scheme
        return self.get_response(request)

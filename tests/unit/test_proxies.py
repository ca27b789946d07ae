"""The client behind a trusted proxy (infra/proxies.py): its address and scheme come from
X-Forwarded-For / X-Forwarded-Proto or Forwarded only when the connection is a trusted
proxy's, walking from the right; garbage is ignored, never an error."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpResponse
from django.test import RequestFactory
from gunicorn.config import Config

from infra.proxies import (
    SOCKET_ADDRESS,
    TrustedProxyMiddleware,
    client_address,
    decide,
    forwarded_elements,
    parse_address,
    parse_networks,
    socket_address,
)

PROXY = "10.0.0.2"


@pytest.fixture(autouse=True)
def proxies_in_ten_slash_eight(settings) -> None:
    settings.TRUSTED_PROXIES = ["10.0.0.0/8", "2001:db8:ffff::1"]
    settings.ALLOWED_HOSTS = ["lakeview.example.com"]


def meta(remote: str = PROXY, **headers: str) -> dict:
    return {"REMOTE_ADDR": remote, **{f"HTTP_{k.upper()}": v for k, v in headers.items()}}


@pytest.mark.parametrize(
    ("written", "address"),
    [
        ("192.0.2.1", "192.0.2.1"),
        (" 192.0.2.1:4711 ", "192.0.2.1"),
        ("2001:db8::1", "2001:db8::1"),
        ("[2001:db8::1]", "2001:db8::1"),
        ('"[2001:db8:cafe::17]:4711"', "2001:db8:cafe::17"),
        ("::ffff:192.0.2.1", "192.0.2.1"),
        ("unknown", None),
        ("_hidden", None),
        ("[2001:db8::1", None),
        ("999.1.1.1", None),
        ("", None),
        ("<script>", None),
    ],
)
def test_an_address_is_read_without_its_port_and_anything_else_is_none(written, address):
    parsed = parse_address(written)
    assert (str(parsed) if parsed else None) == address


def test_forwarded_is_split_into_hops_outside_quoted_strings():
    header = 'for="_a,b;c";proto=https, For=192.0.2.60;proto=http;by=203.0.113.43, junk'
    assert forwarded_elements(header) == [
        {"for": "_a,b;c", "proto": "https"},
        {"for": "192.0.2.60", "proto": "http", "by": "203.0.113.43"},
        {},
    ]


def test_a_sender_outside_the_trusted_networks_is_not_believed_at_all():
    headers = {"x_forwarded_for": "198.51.100.7", "x_forwarded_proto": "https"}
    assert decide(meta("203.0.113.9", **headers)) is None
    assert decide(meta("203.0.113.9", forwarded="for=198.51.100.7;proto=https")) is None


def test_with_no_trusted_proxies_nothing_is_believed(settings):
    settings.TRUSTED_PROXIES = []
    assert decide(meta(x_forwarded_for="198.51.100.7")) is None


@pytest.mark.parametrize(
    ("xff", "client"),
    [
        ("198.51.100.7", "198.51.100.7"),
        # What the client wrote itself (on the left) is passed over.
        ("6.6.6.6, 198.51.100.7, 10.0.0.3", "198.51.100.7"),
        ("198.51.100.7:4711", "198.51.100.7"),
        ("[2001:db8::7]:443", "2001:db8::7"),
        # Every hop a trusted proxy: the left-most of them sent it.
        ("10.0.0.5, 10.0.0.3", "10.0.0.5"),
        # A hop that is not an address ends the walk at the last address vouched for.
        ("198.51.100.7, garbage, 10.0.0.3", "10.0.0.3"),
        ("198.51.100.7, unknown", PROXY),
        ("", PROXY),
    ],
)
def test_the_client_is_the_right_most_hop_that_is_not_a_trusted_proxy(xff, client):
    assert decide(meta(x_forwarded_for=xff)) == (client, None)


def test_the_scheme_comes_from_x_forwarded_proto_and_anything_but_http_or_https_is_ignored():
    assert decide(meta(x_forwarded_for="198.51.100.7", x_forwarded_proto="https")) == (
        "198.51.100.7",
        "https",
    )
    assert decide(meta(x_forwarded_proto="HTTPS")) == (PROXY, "https")
    assert decide(meta(x_forwarded_proto="javascript")) == (PROXY, None)
    # A list that follows X-Forwarded-For hop by hop: the client's own hop.
    chained = meta(x_forwarded_for="198.51.100.7, 10.0.0.3", x_forwarded_proto="https, http")
    assert decide(chained) == ("198.51.100.7", "https")


@pytest.mark.parametrize(
    ("header", "decided"),
    [
        ('for="[2001:db8:cafe::17]:4711";proto=https', ("2001:db8:cafe::17", "https")),
        ("for=192.0.2.60;proto=http;by=203.0.113.43, for=10.0.0.3", ("192.0.2.60", "http")),
        (
            'for=6.6.6.6, for=192.0.2.60;proto=https, for="[2001:db8:ffff::1]"',
            ("192.0.2.60", "https"),
        ),
        ("for=unknown;proto=https", (PROXY, None)),
        ("for=_hidden", (PROXY, None)),
        ("proto=https", (PROXY, None)),
        (";;;,,,=", (PROXY, None)),
        ('for="unterminated', (PROXY, None)),
    ],
)
def test_forwarded_gives_the_client_and_its_proto_from_the_same_hop(header, decided):
    assert decide(meta(forwarded=header)) == decided


def test_both_headers_naming_one_client_are_believed_and_naming_two_neither_is():
    same = meta(x_forwarded_for="198.51.100.7", forwarded="for=198.51.100.7;proto=https")
    assert decide(same) == ("198.51.100.7", "https")
    # A proxy that appends X-Forwarded-For passes a client's forged Forwarded on untouched.
    forged = meta(x_forwarded_for="198.51.100.7", forwarded="for=192.0.2.1")
    assert decide(forged) is None


def test_a_trusted_proxy_written_as_an_ipv4_mapped_address_is_recognised():
    assert decide(meta("::ffff:10.0.0.2", x_forwarded_for="198.51.100.7")) == (
        "198.51.100.7",
        None,
    )


def test_a_setting_that_is_not_a_network_is_refused_naming_it():
    with pytest.raises(ImproperlyConfigured, match="TRUSTED_PROXIES: 'proxy.local'"):
        parse_networks(["10.0.0.0/8", "proxy.local"], setting="TRUSTED_PROXIES")
    assert [str(n) for n in parse_networks(["192.0.2.7", "::1"], setting="X")] == [
        "192.0.2.7/32",
        "::1/128",
    ]


def through_the_middleware(**request_meta: str):
    # The proxy passes the Host header on (docs/deployment.md).
    request = RequestFactory().get("/namespaces/", HTTP_HOST="lakeview.example.com", **request_meta)
    TrustedProxyMiddleware(lambda r: HttpResponse())(request)
    return request


def test_behind_a_trusted_tls_proxy_the_request_is_secure_and_its_links_are_https():
    request = through_the_middleware(
        REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="198.51.100.7", HTTP_X_FORWARDED_PROTO="https"
    )

    assert request.is_secure()
    assert request.build_absolute_uri("/api/") == "https://lakeview.example.com/api/"
    assert client_address(request) == "198.51.100.7"
    assert socket_address(request) == PROXY
    assert request.META[SOCKET_ADDRESS] == PROXY


def test_from_an_untrusted_sender_the_request_keeps_its_own_address_and_scheme():
    request = through_the_middleware(
        REMOTE_ADDR="203.0.113.9",
        HTTP_X_FORWARDED_FOR="198.51.100.7",
        HTTP_X_FORWARDED_PROTO="https",
        HTTP_FORWARDED="for=198.51.100.7;proto=https",
    )

    assert not request.is_secure()
    assert request.build_absolute_uri("/api/") == "http://lakeview.example.com/api/"
    assert client_address(request) == socket_address(request) == "203.0.113.9"
    assert SOCKET_ADDRESS not in request.META


def test_gunicorn_believes_no_senders_forwarded_headers_so_that_trusted_proxies_alone_decide():
    namespace = runpy.run_path(str(Path(__file__).parents[2] / "webapp" / "gunicorn.conf.py"))
    config = Config()
    config.set("forwarded_allow_ips", namespace["forwarded_allow_ips"])

    assert config.forwarded_allow_ips == []
    assert "127.0.0.1" in Config().forwarded_allow_ips  # what it would believe otherwise

"""Notifications' pure rules: the webhook signature a receiver checks, which URLs and
addresses a webhook may reach, and one message per change of a table's state."""

from __future__ import annotations

import ipaddress

import pytest

from alerts.core import addresses, signing
from alerts.core.events import OK, Event, Seen, step
from catalog.core.errors import InvalidInput

BODY = b'{"event":"FAILED","table":"ns.daily"}'


def test_a_signature_made_with_the_secret_verifies_and_any_change_breaks_it() -> None:
    value = signing.header("whsec_one", 1_700_000_000, BODY)
    assert value.startswith("t=1700000000,v1=")
    assert signing.verify("whsec_one", value, BODY, now=1_700_000_010)
    assert not signing.verify("whsec_two", value, BODY, now=1_700_000_010)
    assert not signing.verify("whsec_one", value, BODY + b" ", now=1_700_000_010)
    changed_time = value.replace("t=1700000000", "t=1700000001")
    assert not signing.verify("whsec_one", changed_time, BODY, now=1_700_000_010)


def test_the_signature_is_hmac_sha256_over_the_timestamp_a_dot_and_the_body() -> None:
    import hashlib
    import hmac

    expected = hmac.new(b"s", b"42." + BODY, hashlib.sha256).hexdigest()
    assert signing.header("s", 42, BODY) == f"t=42,v1={expected}"


def test_an_old_signature_is_refused_as_a_replay() -> None:
    value = signing.header("s", 1_000, BODY)
    assert signing.verify("s", value, BODY, now=1_000 + signing.TOLERANCE_SECONDS)
    assert not signing.verify("s", value, BODY, now=1_001 + signing.TOLERANCE_SECONDS)


@pytest.mark.parametrize("value", ["", "v1=abc", "t=x,v1=abc", "t=1,t=1,v1=abc", "t=１,v1=a"])
def test_a_malformed_signature_header_does_not_verify(value: str) -> None:
    assert not signing.verify("s", value, BODY, now=1)


def test_each_secret_is_new() -> None:
    assert signing.new_secret() != signing.new_secret()
    assert len(signing.new_secret()) > 40


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.0.0.1",
        "172.16.5.4",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "224.0.0.1",
        "240.0.0.1",
        "255.255.255.255",
        "::1",
        "::",
        "fe80::1",
        "fc00::1",
        "ff02::1",
        "::ffff:127.0.0.1",
        "::ffff:169.254.169.254",
        "64:ff9b::a9fe:a9fe",
        "2002:a9fe:a9fe::1",
    ],
)
def test_loopback_private_link_local_multicast_and_reserved_addresses_are_not_public(
    address: str,
) -> None:
    assert not addresses.is_public(ipaddress.ip_address(address))
    assert not addresses.allowed(ipaddress.ip_address(address), [])


@pytest.mark.parametrize("address", ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"])
def test_public_addresses_are_allowed(address: str) -> None:
    assert addresses.allowed(ipaddress.ip_address(address), [])


def test_an_allowed_network_admits_its_addresses_ipv4_mapped_ones_too() -> None:
    networks = addresses.parse_networks(["127.0.0.0/8", "fd00::/8"])
    assert addresses.allowed(ipaddress.ip_address("127.0.0.1"), networks)
    assert addresses.allowed(ipaddress.ip_address("::ffff:127.0.0.1"), networks)
    assert addresses.allowed(ipaddress.ip_address("fd12::1"), networks)
    assert not addresses.allowed(ipaddress.ip_address("10.0.0.1"), networks)
    assert not addresses.allowed(ipaddress.ip_address("::1"), networks)


def test_a_malformed_allowed_network_is_named() -> None:
    with pytest.raises(InvalidInput, match="'ten' is not a network"):
        addresses.parse_networks(["ten"])


def resolver(table: dict[str, list[str]]):
    return lambda host, port: [ipaddress.ip_address(a) for a in table[host]]


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://hooks.example.com/x", "http:// or https://"),
        ("file:///etc/passwd", "http:// or https://"),
        ("gopher://hooks.example.com", "http:// or https://"),
        ("https://user:pw@hooks.example.com/", "user or password"),
        ("https:///path", "no host"),
        ("https://hooks.example.com:99999/", "port"),
        ("https://hooks.example.com:abc/", "port"),
        ("https://hooks.example.com/a b", "spaces or control"),
        ("", "required"),
        ("https://" + "a" * 3000 + ".com", "longer than"),
    ],
)
def test_only_plain_http_and_https_urls_with_a_host_are_taken(url: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=message) as refused:
        addresses.check_url(url, [], field="webhook_url", resolver=resolver({}))
    assert refused.value.field == "webhook_url"


@pytest.mark.parametrize(
    "url",
    [
        "http://10.0.0.1/hook",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]:8080/",
        "http://[::ffff:127.0.0.1]/",
        "https://0177.0.0.1/",
    ],
)
def test_a_url_naming_an_internal_address_is_refused(url: str) -> None:
    real = addresses.resolve
    with pytest.raises(InvalidInput, match="webhooks may not reach") as refused:
        addresses.check_url(url, [], field="webhook_url", resolver=real)
    assert refused.value.field == "webhook_url"


def test_a_name_is_refused_when_any_of_its_addresses_is_internal() -> None:
    names = resolver({"hooks.example.com": ["93.184.215.14", "10.1.2.3"]})
    with pytest.raises(InvalidInput, match="10.1.2.3"):
        addresses.check_url("https://hooks.example.com/x", [], resolver=names)


def test_a_name_of_public_addresses_is_taken_apart_with_its_port_and_query() -> None:
    names = resolver({"hooks.example.com": ["93.184.215.14"]})
    target, found = addresses.check_url(
        "HTTPS://Hooks.Example.com:8443/in?x=1#frag", [], resolver=names
    )
    assert target == addresses.Target("https", "hooks.example.com", 8443, "/in?x=1")
    assert found == [ipaddress.ip_address("93.184.215.14")]


def test_a_name_that_does_not_resolve_is_refused() -> None:
    def fails(host: str, port: int):
        raise OSError("no such host")

    with pytest.raises(InvalidInput, match="cannot be resolved"):
        addresses.check_url("https://nowhere.invalid/", [], resolver=fails)


def test_the_loopback_is_reached_only_when_its_network_is_allowed() -> None:
    networks = addresses.parse_networks(["127.0.0.1/32"])
    target, found = addresses.check_url("http://127.0.0.1:9000/", networks)
    assert (target.port, found) == (9000, [ipaddress.ip_address("127.0.0.1")])


def run(*seen: Seen) -> list[Event | None]:
    state, events = OK, []
    for each in seen:
        state, event = step(state, each)
        events.append(event)
    return events


def test_a_failure_is_told_once_and_the_success_after_it_is_a_recovery() -> None:
    f, s = Seen.RUN_FAILED, Seen.RUN_SUCCEEDED
    assert run(f, f, f, s, s) == [Event.FAILED, None, None, Event.RECOVERED, None]


def test_a_suspension_after_failures_is_told_and_then_a_recovery() -> None:
    assert run(Seen.RUN_FAILED, Seen.SUSPENDED, Seen.RUN_FAILED, Seen.RUN_SUCCEEDED) == [
        Event.FAILED,
        Event.SUSPENDED,
        None,
        Event.RECOVERED,
    ]


def test_lateness_is_told_once_and_ends_on_time_or_with_a_success() -> None:
    assert run(Seen.LATE, Seen.LATE, Seen.ON_TIME, Seen.ON_TIME) == [
        Event.LATE,
        None,
        Event.RECOVERED,
        None,
    ]
    assert run(Seen.LATE, Seen.RUN_SUCCEEDED) == [Event.LATE, Event.RECOVERED]


def test_a_failing_table_falling_behind_is_not_told_twice_nor_recovered_by_the_clock() -> None:
    assert run(Seen.RUN_FAILED, Seen.LATE, Seen.ON_TIME) == [Event.FAILED, None, None]
    assert run(Seen.LATE, Seen.RUN_FAILED) == [Event.LATE, Event.FAILED]


def test_maintenance_and_verification_problems_are_told_once_until_they_clear() -> None:
    m = [Seen.MAINTENANCE_FAILED, Seen.MAINTENANCE_FAILED, Seen.MAINTENANCE_SUCCEEDED]
    assert run(*m, Seen.MAINTENANCE_FAILED) == [Event.MAINTENANCE_FAILED, None, None,
                                                Event.MAINTENANCE_FAILED]  # fmt: skip
    assert run(Seen.DIFFERS, Seen.DIFFERS, Seen.EXACT, Seen.DIFFERS) == [
        Event.VERIFICATION_DIFFERS,
        None,
        None,
        Event.VERIFICATION_DIFFERS,
    ]


def test_a_receiver_answering_a_byte_at_a_time_is_cut_off_after_a_bounded_time() -> None:
    import socket
    import threading
    import time

    from alerts.core import webhooks

    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def drip() -> None:
        client, _ = server.accept()
        client.recv(65536)
        with client:
            for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 1000:
                if stop.is_set():
                    return
                try:
                    client.send(bytes([byte]))
                except OSError:
                    return
                time.sleep(0.1)

    threading.Thread(target=drip, daemon=True).start()
    target = addresses.Target("http", "127.0.0.1", server.getsockname()[1], "/")
    started = time.monotonic()
    try:
        with pytest.raises(Exception):  # noqa: B017 - http.client's or the socket's error
            webhooks.post(target, [ipaddress.ip_address("127.0.0.1")], b"{}", {}, timeout=0.3)
    finally:
        stop.set()
        server.close()
    assert time.monotonic() - started < 0.3 * webhooks.TOTAL_TIMEOUTS + 1


def test_a_refused_connection_is_an_oserror() -> None:
    import socket

    from alerts.core import webhooks

    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
    target = addresses.Target("http", "127.0.0.1", port, "/")
    with pytest.raises(OSError):
        webhooks.post(target, [ipaddress.ip_address("127.0.0.1")], b"{}", {}, timeout=1)

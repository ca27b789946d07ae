"""The webhook guard (alerts.core.addresses, alerts.core.webhooks) where it decides: a
subscription's creation through the API, and each delivery's attempt. Only the DNS is faked:
`socket.getaddrinfo`, the one resolution the guard makes, answers the test's names. The
receivers are real HTTP(S) servers on loopback addresses: the receiver on 127.0.0.1, which
the test allows (ALERTS_ALLOWED_NETWORKS, as development allows its own receivers), and a
decoy on 127.0.0.2, outside that network, on the same port: it stands for the app's own
network, and a request that a second DNS answer or a redirect sent there lands in it."""

from __future__ import annotations

import ipaddress
import socket
import ssl
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from rest_framework.test import APIClient

from alerts import services as alerts
from alerts.models import Delivery, Subscription
from tests.integration.test_monitoring import materialized
from tests.webhook_receiver import Receiver

pytestmark = pytest.mark.django_db(transaction=False)

NAME = "hooks.example.test"
PUBLIC = "93.184.215.14"


class Names:
    """A test DNS in place of socket.getaddrinfo: each name set answers each lookup with the
    next of its answers (the last one for good), and counts its lookups; addresses and
    other names go to the real resolver."""

    def __init__(self, real: Callable[..., list]) -> None:
        self.real = real
        self.answers: dict[str, list[list[str]]] = {}
        self.lookups: Counter[str] = Counter()

    def set(self, name: str, *answers: list[str]) -> None:
        self.answers[name] = [list(answer) for answer in answers]

    def __call__(
        self, host: Any, port: Any, family: int = 0, type: int = 0, proto: int = 0, flags: int = 0
    ) -> list:
        name = host.decode() if isinstance(host, bytes) else host
        if not isinstance(name, str) or name.lower() not in self.answers:
            return self.real(host, port, family, type, proto, flags)
        name = name.lower()
        self.lookups[name] += 1
        queued = self.answers[name]
        number = int(port or 0)
        found = []
        for text in queued.pop(0) if len(queued) > 1 else queued[0]:
            if ipaddress.ip_address(text).version == 6:
                found.append((socket.AF_INET6, socket.SOCK_STREAM, 6, "", (text, number, 0, 0)))
            else:
                found.append((socket.AF_INET, socket.SOCK_STREAM, 6, "", (text, number)))
        return found


@pytest.fixture
def names(monkeypatch) -> Names:
    fake = Names(socket.getaddrinfo)
    # socket.create_connection looks names up through this module attribute too: a second
    # lookup of a name at the connect would be counted, and would get the next answer.
    monkeypatch.setattr(socket, "getaddrinfo", fake)
    return fake


@pytest.fixture
def receiver(settings) -> Iterator[Receiver]:
    settings.ALERTS_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    settings.ALERTS_RETRY_BASE_SECONDS = 0
    running = Receiver("127.0.0.1")
    yield running
    running.stop()


@pytest.fixture
def decoy(receiver) -> Iterator[Receiver]:
    running = Receiver("127.0.0.2", receiver.port)
    yield running
    running.stop()


@pytest.fixture
def client(editor) -> APIClient:
    api = APIClient()
    api.force_authenticate(editor)
    return api


def subscribe(url: str) -> Subscription:
    materialized("ns", "daily")
    return alerts.create_subscription(materialized_table="ns.daily", webhook_url=url)


def attempt(subscription: Subscription) -> Delivery:
    """A TEST message to `subscription` and one attempt at it, as the worker makes it."""
    delivery = alerts.send_test(subscription.pk)
    alerts.deliver(delivery.pk)
    delivery.refresh_from_db()
    return delivery


@pytest.mark.parametrize(
    ("name", "answer"),
    [
        ("hooks.loopback.test", ["127.0.0.2"]),
        ("hooks.private.test", ["10.1.2.3"]),
        ("hooks.metadata.test", ["169.254.169.254"]),
        ("hooks.mapped.test", ["::ffff:192.168.0.10"]),
        ("hooks.ula.test", ["fd00::5"]),
        ("hooks.mixed.test", [PUBLIC, "10.9.9.9"]),
    ],
)
def test_a_webhook_to_a_name_that_resolves_to_an_internal_address_is_refused_with_a_400(
    client, names, receiver, name, answer
) -> None:
    materialized("ns", "daily")
    names.set(name, answer)
    refused = client.post(
        "/api/subscriptions/",
        {"materialized_table": "ns.daily", "webhook_url": f"https://{name}/hook"},
        format="json",
    )
    assert refused.status_code == 400, refused.content
    assert refused.json()["field"] == "webhook_url"
    refused_address = ipaddress.ip_address(answer[-1])  # as Python writes it
    assert f"host {name} resolves to {refused_address}" in refused.json()["error"]
    assert names.lookups[name] == 1
    # The same URL once its name resolves to a public address only: the answer decided.
    names.set(name, [PUBLIC])
    made = client.post(
        "/api/subscriptions/",
        {"materialized_table": "ns.daily", "webhook_url": f"https://{name}/hook"},
        format="json",
    )
    assert made.status_code == 201, made.content


def test_a_name_that_resolves_to_an_internal_address_by_the_send_fails_it_without_a_request(
    names, receiver, decoy
) -> None:
    names.set(NAME, [PUBLIC])
    subscription = subscribe(receiver.url_for(NAME))
    names.set(NAME, ["127.0.0.2"])

    delivery = attempt(subscription)

    assert (delivery.status, delivery.attempts) == ("FAILED", 1)
    assert f"host {NAME} resolves to 127.0.0.2" in delivery.error
    assert decoy.requests == [] and receiver.requests == []


def test_the_request_goes_to_the_address_checked_and_the_name_is_not_looked_up_again(
    names, receiver, decoy
) -> None:
    names.set(NAME, ["127.0.0.1"])
    subscription = subscribe(receiver.url_for(NAME))
    # DNS rebinding: the name's next answer, were it asked again between the check and the
    # connection, is the decoy's address.
    names.set(NAME, ["127.0.0.1"], ["127.0.0.2"])
    names.lookups.clear()

    delivery = attempt(subscription)

    assert delivery.status == "DELIVERED", delivery.error
    assert names.lookups[NAME] == 1
    assert decoy.requests == []
    [request] = receiver.requests
    assert request["headers"]["Host"] == f"{NAME}:{receiver.port}"
    assert receiver.events(subscription.secret) == ["TEST"]


@pytest.mark.parametrize(
    ("status", "location", "shown"),
    [
        (302, "http://127.0.0.2:{port}/stolen?token=t", "http://127.0.0.2:{port}/..."),
        (307, "http://internal.example.test:{port}/stolen", "http://internal.example.test:"),
        (308, "/elsewhere", "another path"),
    ],
)
def test_a_redirect_is_not_followed_and_its_delivery_fails_saying_so(
    names, receiver, decoy, status, location, shown
) -> None:
    names.set(NAME, ["127.0.0.1"])
    names.set("internal.example.test", ["127.0.0.2"])
    subscription = subscribe(receiver.url_for(NAME))
    receiver.statuses = [(status, {"Location": location.format(port=receiver.port)})]

    delivery = attempt(subscription)

    assert (delivery.status, delivery.attempts, delivery.response_code) == ("FAILED", 1, status)
    assert "webhooks do not follow redirects" in delivery.error
    assert shown.format(port=receiver.port) in delivery.error
    assert "token" not in delivery.error and "stolen" not in delivery.error
    assert decoy.requests == []
    assert len(receiver.requests) == 1
    assert names.lookups["internal.example.test"] == 0


def certificates(folder: Path, name: str) -> tuple[Path, Path, Path]:
    """A certificate authority's certificate, and a server certificate for `name` it signed
    with its key: their files (CA, certificate, key)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.now(UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Lakeview test CA")])
    usage = dict.fromkeys(
        (
            "content_commitment",
            "key_encipherment",
            "data_encipherment",
            "key_agreement",
            "encipher_only",
            "decipher_only",
        ),
        False,
    )
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, **usage),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    paths = folder / "ca.pem", folder / "server.pem", folder / "server-key.pem"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return paths


@pytest.fixture
def tls_receiver(settings, tmp_path, monkeypatch) -> Iterator[Receiver]:
    """An HTTPS receiver on 127.0.0.1 whose certificate names NAME, signed by a CA that the
    sender trusts (SSL_CERT_FILE, which the default context's verify paths read)."""
    settings.ALERTS_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    settings.ALERTS_RETRY_BASE_SECONDS = 0
    ca, certificate, key = certificates(tmp_path, NAME)
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate, key)
    running = Receiver("127.0.0.1", tls=context)
    yield running
    running.stop()


def test_an_https_webhook_goes_to_the_checked_address_with_the_names_sni_and_certificate(
    names, tls_receiver
) -> None:
    names.set(NAME, ["127.0.0.1"])
    subscription = subscribe(tls_receiver.url_for(NAME))
    names.lookups.clear()

    delivery = attempt(subscription)

    assert delivery.status == "DELIVERED", delivery.error
    assert names.lookups[NAME] == 1
    assert tls_receiver.server_names == [NAME]
    [request] = tls_receiver.requests
    assert request["headers"]["Host"] == f"{NAME}:{tls_receiver.port}"
    assert tls_receiver.events(subscription.secret) == ["TEST"]


def test_an_https_receiver_whose_certificate_names_another_host_is_not_sent_the_message(
    names, tls_receiver
) -> None:
    names.set("other.example.test", ["127.0.0.1"])
    subscription = subscribe(tls_receiver.url_for("other.example.test"))

    delivery = attempt(subscription)

    assert delivery.status == "PENDING" and delivery.attempts == 1  # tried again later
    assert "CERTIFICATE_VERIFY_FAILED" in delivery.error
    assert tls_receiver.requests == []

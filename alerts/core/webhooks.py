"""Sending one webhook request: a POST to an address already checked (addresses.check_url),
with the name kept for the Host header and TLS (SNI and the certificate's name). Connecting
to the checked address, not to the name again, is what keeps a DNS answer that changed
since the check from sending the request elsewhere. Redirects are not followed."""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from alerts.core.addresses import Address, Target

#: How much of a receiver's answer is kept with the delivery.
ANSWER_BYTES = 2000
#: The whole exchange with an address may take this many `timeout`s.
TOTAL_TIMEOUTS = 3


@dataclass(frozen=True)
class Answer:
    status: int
    text: str
    #: A redirect's Location (never followed), else empty.
    location: str = ""


class _Pinned(http.client.HTTPConnection):
    def __init__(self, target: Target, address: Address, timeout: float) -> None:
        super().__init__(target.host, target.port, timeout=timeout)
        self._address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((str(self._address), self.port), self.timeout)


class _PinnedTLS(http.client.HTTPSConnection):
    def __init__(self, target: Target, address: Address, timeout: float) -> None:
        super().__init__(
            target.host, target.port, timeout=timeout, context=ssl.create_default_context()
        )
        self._address = address

    def connect(self) -> None:
        sock = socket.create_connection((str(self._address), self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)


def post(
    target: Target,
    addresses: Sequence[Address],
    body: bytes,
    headers: Mapping[str, str],
    *,
    timeout: float,
) -> Answer:
    """POST `body` to the first of `addresses` that accepts a connection. `timeout` bounds
    each step (connect, each read); the whole exchange with one address is cut after
    TOTAL_TIMEOUTS of them, so a receiver sending its answer a byte at a time cannot hold
    a worker. Raises OSError (http.client's errors included) when none answers."""
    error: Exception | None = None
    for address in addresses:
        kind = _PinnedTLS if target.scheme == "https" else _Pinned
        connection = kind(target, address, timeout)
        cut = threading.Timer(timeout * TOTAL_TIMEOUTS, _cut, args=[connection])
        cut.daemon = True
        cut.start()
        try:
            connection.request("POST", target.path, body=body, headers=dict(headers))
            response = connection.getresponse()
            text = response.read(ANSWER_BYTES).decode("utf-8", "replace")
            location = (response.getheader("Location") or "")[:2000]
            return Answer(status=response.status, text=text, location=location)
        except ConnectionRefusedError as refused:  # another address may answer
            error = refused
        finally:
            cut.cancel()
            connection.close()
    raise error or OSError("no address to connect to")


def _cut(connection: http.client.HTTPConnection) -> None:
    """End a connection that took too long: a blocked read returns at once."""
    sock = connection.sock
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)

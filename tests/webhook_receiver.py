"""A webhook receiver served by the test itself, on a loopback address: it keeps every request
(path, headers, body), answers each with the next answer queued (200 when none), checks
signatures as docs/operations.md tells a receiver to, and can go down and come back on its
port (a receiver that was down). With an SSL context it serves HTTPS and records the name
each client asked for (SNI)."""

from __future__ import annotations

import json
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from alerts.core import signing

#: A queued answer: a status, or a status and headers (a redirect's Location).
Queued = int | tuple[int, dict[str, str]]


class Receiver:
    def __init__(
        self, host: str = "127.0.0.1", port: int = 0, *, tls: ssl.SSLContext | None = None
    ) -> None:
        self.host = host
        self.port = port
        self.tls = tls
        self.requests: list[dict[str, Any]] = []
        self.statuses: list[Queued] = []
        #: The server names clients asked for in their TLS handshakes (HTTPS only).
        self.server_names: list[str | None] = []
        self.server: ThreadingHTTPServer | None = None
        self.start()

    @property
    def url(self) -> str:
        return self.url_for(self.host)

    def url_for(self, host: str, path: str = "/hooks/lakeview") -> str:
        """This receiver's URL with another host (a name the test's resolver gives its
        address)."""
        scheme = "https" if self.tls else "http"
        return f"{scheme}://{host}:{self.port}{path}"

    def start(self) -> None:
        """Listen (again, on the same port after stop())."""
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.requests.append(
                    {"path": self.path, "headers": dict(self.headers), "body": body}
                )
                queued = receiver.statuses.pop(0) if receiver.statuses else 200
                status, headers = queued if isinstance(queued, tuple) else (queued, {})
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: object) -> None:
                pass

        server = ThreadingHTTPServer((self.host, self.port), Handler)
        if self.tls is not None:
            self.tls.sni_callback = lambda sock, name, context: self.server_names.append(name)
            server.socket = self.tls.wrap_socket(server.socket, server_side=True)
        self.port = server.server_port
        self.server = server
        threading.Thread(target=server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        """Stop listening: a connection to the port is refused, as to a receiver that is down."""
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def events(self, secret: str) -> list[str]:
        """The events received, each one's signature checked with `secret`."""
        found = []
        for request in self.requests:
            header = request["headers"][signing.HEADER]
            assert signing.verify(secret, header, request["body"], now=time.time()), header
            found.append(json.loads(request["body"])["event"])
        return found

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(request["body"]) for request in self.requests]

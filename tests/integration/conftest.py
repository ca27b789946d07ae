"""Fixtures shared by the integration tests that speak the Iceberg REST protocol."""

from __future__ import annotations

import threading
import time

import pytest

from tests.integration.test_iceberg_rest import Iceberg, token_for

#: How long a live server's request thread may take to see its client's connection close.
REQUEST_THREAD_GRACE_SECONDS = 10.0


@pytest.fixture
def api(editor) -> Iceberg:
    """The protocol, as an editor's engine speaks it."""
    return Iceberg(token_for(editor))


@pytest.fixture
def ns(api) -> str:
    """A namespace `ns`, made over the protocol."""
    assert api.post("/namespaces", {"namespace": ["ns"]}).status_code == 200
    return "ns"


def _live_request_threads() -> list[threading.Thread]:
    # Django's ThreadedWSGIServer serves each client connection on a thread of its own,
    # named after socketserver's process_request_thread.
    return [t for t in threading.enumerate() if t.name.endswith("(process_request_thread)")]


@pytest.fixture(autouse=True)
def live_server_clients_closed(request) -> None:
    """A test that drives `live_server` closes its HTTP clients (`with RestCatalog(...)`).

    The live server serves each kept-alive connection on a thread of its own, and that
    thread keeps its database connection (CONN_MAX_AGE) for as long as the client keeps the
    socket: past the test, and on PostgreSQL past the run, whose test database then cannot
    be dropped ("being accessed by other users"). A client left open is caught here, on
    SQLite too."""
    yield
    if "live_server" not in request.fixturenames:
        return
    deadline = time.monotonic() + REQUEST_THREAD_GRACE_SECONDS
    while (held := _live_request_threads()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not held, (
        f"{len(held)} live server request thread(s) still serve a client the test left "
        "open; close it (e.g. `with RestCatalog(...) as catalog:`)"
    )

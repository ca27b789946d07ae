"""Fixtures shared by the integration tests that speak the Iceberg REST protocol."""

from __future__ import annotations

import pytest

from tests.integration.test_iceberg_rest import Iceberg, token_for


@pytest.fixture
def api(editor) -> Iceberg:
    """The protocol, as an editor's engine speaks it."""
    return Iceberg(token_for(editor))


@pytest.fixture
def ns(api) -> str:
    """A namespace `ns`, made over the protocol."""
    assert api.post("/namespaces", {"namespace": ["ns"]}).status_code == 200
    return "ns"

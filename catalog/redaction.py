"""Table properties whose values some readers may not see, left out of what the catalog
answers them: the Iceberg REST catalog's loads and commit answers, the table's page and its
API. The app that writes such a property registers who may not see it (`hide`); the
catalog knows nothing of why. The refresh app hides a materialized table's query from
those who may not read every source (refresh.rights).

Only answers change: a commit stores what the engine sends, and the metadata file keeps
every property. A load of a table without such a property costs a substring search of its
cached body; one with it asks the registered function (a query or two; none for a reader
of the whole catalog)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from catalog import access

#: property key -> whether it is hidden from a principal on the table of that object id.
HIDDEN: dict[str, Callable[[access.Principal, int], bool]] = {}


def hide(key: str, hidden: Callable[[access.Principal, int], bool]) -> None:
    HIDDEN[key] = hidden


def hidden_keys(principal: access.Principal, object_id: int, keys: Any) -> set[str]:
    """The keys among `keys` the principal may not see on that table."""
    return {key for key in keys if key in HIDDEN and HIDDEN[key](principal, object_id)}


def properties(
    principal: access.Principal, object_id: int, found: Mapping[str, str]
) -> dict[str, str]:
    """`found` without what the principal may not see."""
    hidden = hidden_keys(principal, object_id, found)
    return {key: value for key, value in found.items() if key not in hidden}


def _marker(key: str) -> bytes:
    return json.dumps(key).encode()


def load_body(principal: access.Principal, object_id: int, body: bytes) -> bytes | None:
    """A LoadTableResult's bytes without what the principal may not see, or None when
    nothing is hidden (the body is answered as it is)."""
    present = [key for key in HIDDEN if _marker(key) in body]
    if not present:
        return None
    hidden = hidden_keys(principal, object_id, present)
    if not hidden:
        return None
    document = json.loads(body)
    _strip(document.get("metadata"), hidden)
    return json.dumps(document).encode()


def load_result(principal: access.Principal, object_id: int, document: dict) -> dict:
    """A LoadTableResult (as a dict) without what the principal may not see."""
    metadata = document.get("metadata")
    found = metadata.get("properties") if isinstance(metadata, dict) else None
    if isinstance(found, dict):
        _strip(metadata, hidden_keys(principal, object_id, list(found)))
    return document


def _strip(metadata: Any, hidden: set[str]) -> None:
    if not hidden or not isinstance(metadata, dict):
        return
    found = metadata.get("properties")
    if isinstance(found, dict):
        metadata["properties"] = {k: v for k, v in found.items() if k not in hidden}


def tag(etag: str, hidden: bool) -> str:
    """The entity tag of a load that left properties out: another tag than the whole
    body's, so that no cache answers one principal with the other's."""
    return f'{etag[:-1]}-redacted"' if hidden else etag

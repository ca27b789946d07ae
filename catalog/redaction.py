"""Table properties whose values some readers may not see, left out of what the catalog
answers them: the Iceberg REST catalog's loads and commit answers, the table's page and its
API. The app that writes such a property registers who may not see it (`hide`); the
catalog knows nothing of why. The refresh app hides a materialized table's query from
those who may not read every source (refresh.rights).

Only answers change: a commit stores what the engine sends, and the metadata file keeps
every property. The ETag of an answer that holds such a property says which form it is
(`tag`), so that a 304 never confirms a form the principal no longer gets. A load of a
table without such a property costs a substring search of its cached body; one with it
asks the registered function (a query or two; none for a reader of the whole catalog)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

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


@functools.cache  # asked on every load-table whose body is not left as it is
def _marker(key: str) -> bytes:
    return json.dumps(key).encode()


class Redacted(NamedTuple):
    #: The answer without what the principal may not see; None when nothing is left out.
    body: Any
    #: Whether the answer holds a property some principals may not see (its ETag then
    #: depends on who asks: `tag`).
    hideable: bool


def load_body(principal: access.Principal, object_id: int, body: bytes) -> Redacted:
    """A LoadTableResult's bytes without what the principal may not see (`body` None when
    nothing is hidden: the body is answered as it is)."""
    present = [key for key in HIDDEN if _marker(key) in body]
    if not present:
        return Redacted(None, False)
    hidden = hidden_keys(principal, object_id, present)
    if not hidden:
        return Redacted(None, True)
    document = json.loads(body)
    _strip(document.get("metadata"), hidden)
    return Redacted(json.dumps(document).encode(), True)


def load_result(principal: access.Principal, object_id: int, document: dict) -> Redacted:
    """A LoadTableResult (as a dict, changed in place) without what the principal may not
    see (`body` None when nothing is hidden)."""
    metadata = document.get("metadata")
    found = metadata.get("properties") if isinstance(metadata, dict) else None
    if not isinstance(found, dict) or not any(key in HIDDEN for key in found):
        return Redacted(None, False)
    hidden = hidden_keys(principal, object_id, list(found))
    _strip(metadata, hidden)
    return Redacted(document if hidden else None, True)


def _strip(metadata: Any, hidden: set[str]) -> None:
    if not hidden or not isinstance(metadata, dict):
        return
    found = metadata.get("properties")
    if isinstance(found, dict):
        metadata["properties"] = {k: v for k, v in found.items() if k not in hidden}


def tag(etag: str, answer: Redacted) -> str:
    """The entity tag of a load's answer. An answer holding a property some principals may
    not see has a tag of its own for each of its two forms (shown whole, or without what is
    hidden), never the plain one: a client holding the plain tag gets a 304 decided from the
    table's pointer alone, which is right only for a body that is the same for everyone;
    one holding either other tag is answered once the body has been redacted for it again,
    so that a grant or a revoke since changes the tag and no 304 keeps a stale answer."""
    if not answer.hideable:
        return etag
    return f'{etag[:-1]}-redacted"' if answer.body is not None else f'{etag[:-1]}-whole"'

"""Freshness-aware loading (Iceberg REST OpenAPI since 1.8): an `ETag` on LoadTable,
CreateTable, RegisterTable and UpdateTable responses, and `304 Not Modified` for a
LoadTable whose `If-None-Match` names the current tag.

A tag names one state of one table as one representation: the pointer (the metadata
location, and the table's UUID and last-updated-ms, which tell a file an attached table's
writer rewrote in place from the file it replaced) and the `snapshots` mode asked for (the
spec asks for distinct tags for `refs` and `all`, whose bodies may differ). Everything in
it is on the table's pointer row, so a 304 needs no metadata file read. A body holding a
property some principals may not see (catalog.redaction) has a tag per form instead, and
its 304 waits until the principal's form is known. Views have no ETag in the spec: their
loads are always 200."""

from __future__ import annotations

import functools
import hashlib
import re
from typing import NamedTuple

from django.http import HttpRequest, HttpResponse, HttpResponseNotModified

from catalog.core.errors import InvalidInput

#: LoadTable's `snapshots` query parameter; absent means `all`.
SNAPSHOT_MODES = frozenset({"all", "refs"})
DEFAULT_SNAPSHOTS = "all"

# One member of an If-None-Match list (RFC 9110 section 8.8.3): an optional weak prefix and a
# quoted opaque tag, which may itself hold commas, so the list is scanned, not split.
_ENTITY_TAG = re.compile(r'\s*(?:W/)?"([\x21\x23-\x7e\x80-\xff]*)"\s*(?:,|$)')
_LIST_SEPARATOR = re.compile(r"\s*,")


class TableState(NamedTuple):
    """What identifies a table's current state: its pointer row's values."""

    metadata_location: str
    uuid: str
    last_updated_ms: int


def snapshots_mode(request: HttpRequest) -> str:
    """The `snapshots` mode asked for, refused (400) unless the spec's `all` or `refs`."""
    if not request.META.get("QUERY_STRING"):  # most loads: no parameters to parse
        return DEFAULT_SNAPSHOTS
    value = request.GET.get("snapshots")
    if value is None or value == "":
        return DEFAULT_SNAPSHOTS
    mode = value.lower()
    if mode not in SNAPSHOT_MODES:
        raise InvalidInput(
            f"Invalid value for snapshots: {value[:50]!r}; expected all or refs",
            field="snapshots",
        )
    return mode


@functools.lru_cache(maxsize=4096)
def table_tag(state: TableState, snapshots: str = DEFAULT_SNAPSHOTS) -> str:
    """A strong entity tag, quoted: SHA-256 of the table's state and the snapshots mode.
    Remembered for the last few thousand states (a load asks for the same one again and
    again; the key is the whole state, so a remembered tag is never another state's)."""
    text = "\n".join(
        (state.metadata_location, state.uuid.lower(), str(state.last_updated_ms), snapshots)
    )
    return '"' + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest() + '"'


def _opaque_tags(header: str) -> list[str] | None:
    """The opaque tags an If-None-Match value lists, or None for `*`. A member that is not
    an entity tag is skipped (it can match nothing), as is anything after it up to the next
    comma outside quotes."""
    if header.strip() == "*":
        return None
    tags: list[str] = []
    position = 0
    while position < len(header):
        found = _ENTITY_TAG.match(header, position)
        if found is not None:
            tags.append(found.group(1))
            position = found.end()
            continue
        # Not an entity tag: skip to the next separator (or the end) and go on.
        separator = _LIST_SEPARATOR.search(header, position)
        if separator is None:
            break
        position = separator.end()
    return tags


def none_match_fails(header: str | None, tag: str) -> bool:
    """True when If-None-Match says the client holds the current representation: `*` (the
    table exists, which the caller established), or a listed tag equal to `tag` by RFC 9110's
    weak comparison (a `W/` prefix on either side is ignored)."""
    if not header:
        return False
    if header == tag:  # what a client that cached our answer sends: no list to parse
        return True
    tags = _opaque_tags(header)
    if tags is None:
        return True
    return tag.removeprefix("W/").strip('"') in tags


def not_modified(tag: str) -> HttpResponse:
    """304 with no body; it carries the ETag, as the 200 would have (RFC 9110 15.4.5)."""
    response = HttpResponseNotModified()
    response["ETag"] = tag
    return response

"""LoadTable's read path, the catalog's hottest request (every query an engine plans, every
trigger of a streaming query): one query for the pointer, then either a 304 or the body.

- **The pointer query** reads the table's pointer row (metadata location, UUID,
  last-updated-ms), whether it is attached, and whether the request's bearer token is still
  good, in one round trip. The token was verified by `resource.authorize`, which may trust
  it for up to `auth.VERIFIED_TOKEN_TTL`; checking it again here costs nothing extra and
  means a revoked client never gets a table, or a 304, from this endpoint.
- **The body** is the metadata file's JSON in a LoadTableResult. It is kept per process in
  a cache bounded in bytes and keyed by the whole pointer state read by the query above,
  never by name: a key can only be asked for after the database named it, so the cache can
  never answer with an older pointer than the database's at the time of the request.
  Metadata files are never rewritten under a name by this catalog; an attached table's
  writer may rewrite one in place, which changes its last-updated-ms, and so the key."""

from __future__ import annotations

import json
import threading
import uuid
from collections import OrderedDict
from datetime import UTC, datetime
from typing import Any, NamedTuple

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Exists, OuterRef, QuerySet
from django.utils import timezone

from catalog.core.errors import NoSuchTable
from catalog.iceberg_rest import auth, objects
from catalog.iceberg_rest.etags import TableState
from catalog.models import Attachment, Table

#: Per process, unless settings.LOAD_TABLE_CACHE_BYTES says otherwise: the bodies of a few
#: thousand ordinary tables (a LoadTableResult is the metadata file plus a few dozen bytes).
DEFAULT_CACHE_BYTES = 32 * 1024 * 1024


class Pointer(NamedTuple):
    state: TableState
    attached: bool


# The pointer query is built by the ORM once per database connection's backend and then
# run as plain SQL with each request's values: building and compiling it anew took most of
# a load's time (about 1 ms of 1.3). Sentinel values mark where the request's values go.
_NAMESPACE, _NAME, _DIGEST = "\x00namespace\x00", "\x00name\x00", "\x00digest\x00"
_NOW = datetime(1970, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
_prepared: dict[tuple[str, str], tuple[str, list[Any], Any]] = {}
_prepared_lock = threading.Lock()


def _pointer_queryset(namespace: str, name: str, token_digest: str, now: datetime) -> QuerySet:
    return (
        Table.objects.filter(namespace__name=namespace, name=name)
        .order_by()
        .annotate(
            attached=Exists(Attachment.objects.filter(table_id=OuterRef("pk"))),
            token_ok=auth.still_valid(token_digest, now=now),
        )
        .values_list("metadata_location", "uuid", "last_updated_ms", "attached", "token_ok")[:1]
    )


def _prepare(db: Any) -> tuple[str, list[Any], Any]:
    """The compiled SQL, its parameters with the sentinels, and `_NOW` as the database
    takes it (a string on SQLite): built once per connection alias and backend."""
    key = (db.alias, db.vendor)
    prepared = _prepared.get(key)
    if prepared is None:
        queryset = _pointer_queryset(_NAMESPACE, _NAME, _DIGEST, _NOW)
        sql, params = queryset.query.get_compiler(connection=db).as_sql()
        now = db.ops.adapt_datetimefield_value(_NOW)
        if not {_NAMESPACE, _NAME, _DIGEST, now} <= set(params):
            # The ORM changed how it passes these values: fail loudly, never run a query
            # that would look for the sentinels themselves.
            raise RuntimeError(f"The pointer query does not take its values as parameters: {sql}")
        prepared = (sql, list(params), now)
        with _prepared_lock:
            _prepared[key] = prepared
    return prepared


def _run_pointer_query(namespace: str, name: str, token_digest: str) -> tuple | None:
    db = connections[DEFAULT_DB_ALIAS]
    sql, template, sentinel_now = _prepare(db)
    # Each sentinel in the compiled parameters is replaced by the request's value, in the
    # database's form; any other parameter is a constant of the query.
    replace = {
        _NAMESPACE: namespace,
        _NAME: name,
        _DIGEST: token_digest,
        sentinel_now: db.ops.adapt_datetimefield_value(timezone.now()),
    }
    params = [replace.get(value, value) for value in template]
    with db.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()


def pointer(namespace: str, name: str, *, token_digest: str) -> Pointer:
    """The table's pointer row, read with the token check in one query.

    InvalidCredentials (401) when the token is no longer good, whether or not the table
    exists; NoSuchTable (404) when it does not exist."""
    row = _run_pointer_query(namespace, name, token_digest)
    if row is None:
        # A miss must not tell a revoked client whether the table exists: ask about the
        # token alone (a second query, on misses only).
        if not auth.is_still_valid(token_digest):
            _refuse(token_digest)
        raise NoSuchTable(f"Table does not exist: {namespace}.{name}", field="name")
    location, table_uuid, last_updated_ms, attached, token_ok = row
    if not token_ok:
        _refuse(token_digest)
    # Plain SQL returns the database's own forms: SQLite keeps a UUID as 32 hex digits and
    # booleans as 0/1; the tag wants the UUID's canonical text, as the metadata has it.
    state = TableState(location, str(uuid.UUID(str(table_uuid))), int(last_updated_ms))
    return Pointer(state, bool(attached))


def state_of(table: Table) -> TableState:
    """The state of a row already read (an attached table after following its writer)."""
    return TableState(table.metadata_location, str(table.uuid), int(table.last_updated_ms))


def _refuse(token_digest: str) -> None:
    auth.forget(token_digest)
    raise auth.InvalidCredentials("Not authorized: the bearer token is missing, unknown or expired")


class BodyCache:
    """A least-recently-used map of response bodies, bounded by the sum of their sizes in
    bytes; a body larger than the whole bound is not kept. Thread-safe (gthread workers)."""

    def __init__(self, max_bytes: int) -> None:
        if max_bytes < 0:
            raise ValueError("max_bytes must not be negative")
        self.max_bytes = max_bytes
        self._entries: OrderedDict[TableState, bytes] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def size(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: TableState) -> bytes | None:
        with self._lock:
            body = self._entries.get(key)
            if body is not None:
                self._entries.move_to_end(key)
            return body

    def put(self, key: TableState, body: bytes) -> None:
        if len(body) > self.max_bytes:
            return
        with self._lock:
            previous = self._entries.pop(key, None)
            if previous is not None:
                self._bytes -= len(previous)
            self._entries[key] = body
            self._bytes += len(body)
            while self._bytes > self.max_bytes:
                _, evicted = self._entries.popitem(last=False)
                self._bytes -= len(evicted)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0


bodies = BodyCache(int(getattr(settings, "LOAD_TABLE_CACHE_BYTES", DEFAULT_CACHE_BYTES)))


def body(state: TableState) -> bytes:
    """The LoadTableResult for this state, from the cache or from its metadata file."""
    cached = bodies.get(state)
    if cached is not None:
        return cached
    # A miss reads and parses the file once per process and state: a file that is not a
    # JSON object is refused here as on every read (InvalidMetadata), never cached.
    encoded = json.dumps(objects.load_result(state.metadata_location, config={})).encode()
    bodies.put(state, encoded)
    return encoded

"""LoadTable's read path, the catalog's hottest request (every query an engine plans, every
trigger of a streaming query): one query for the pointer, then either a 304 or the body.

- **The pointer query** reads the table's pointer row (metadata location, UUID,
  last-updated-ms), whether it is attached, and whether the request's bearer token is still
  good, in one round trip. The token was verified by `resource.authorize`, which may trust
  it for up to `credentials.VERIFIED_TOKEN_TTL`; checking it again here costs nothing extra and
  means a revoked client never gets a table, or a 304, from this endpoint.
- **The body** is the metadata file's JSON in a LoadTableResult. It is kept per process in
  a cache bounded in bytes and keyed by the whole pointer state read by the query above,
  never by name: a key can only be asked for after the database named it, so the cache can
  never answer with an older pointer than the database's at the time of the request.
  Metadata files are never rewritten under a name by this catalog; an attached table's
  writer may rewrite one in place, which changes its last-updated-ms, and so the key."""

from __future__ import annotations

import calendar
import json
import re
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, NamedTuple

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import BooleanField, Case, Exists, OuterRef, QuerySet, Value, When
from django.utils import timezone

from catalog import access, selectors
from catalog.iceberg_rest import objects
from catalog.iceberg_rest.etags import TableState
from catalog.models import Attachment, ColumnMask, RowFilter, Table
from catalog.services import credentials

#: Per process, unless settings.LOAD_TABLE_CACHE_BYTES says otherwise: the bodies of a few
#: thousand ordinary tables (a LoadTableResult is the metadata file plus a few dozen bytes).
DEFAULT_CACHE_BYTES = 32 * 1024 * 1024


class Pointer(NamedTuple):
    state: TableState
    attached: bool
    #: Whether the principal surely may read the table (catalog.access.may_read_condition);
    #: False means the grant check must be asked.
    read_ok: bool
    #: The row's id and owner, for the grant check (catalog.access).
    object_id: int
    owner_id: int | None
    #: Whether the table has a row filter or a column mask (catalog.policies decides then
    #: whether this principal may load it).
    protected: bool = False


# The pointer query is built by the ORM once per database connection's backend and then
# run as plain SQL with each request's values: building and compiling it anew took most of
# a load's time (about 1 ms of 1.3). Sentinel values mark where the request's values go.
_NAMESPACE, _NAME, _DIGEST = "\x00namespace\x00", "\x00name\x00", "\x00digest\x00"
_USER, _CLIENT = -7_300_000_000_000_000_001, -7_300_000_000_000_000_002
_NOW = datetime(1970, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
_prepared: dict[tuple[str, str], _PointerQuery] = {}
_prepared_lock = threading.Lock()


def _pointer_queryset(
    namespace: str, name: str, token_digest: str, now: datetime, user_id: int, client_id: int
) -> QuerySet:
    return (
        Table.objects.filter(namespace__name=namespace, name=name)
        .order_by()
        .annotate(
            attached=Exists(Attachment.objects.filter(table_id=OuterRef("pk"))),
            protected=Exists(RowFilter.objects.filter(table_id=OuterRef("pk")))
            | Exists(ColumnMask.objects.filter(table_id=OuterRef("pk"))),
            token_ok=credentials.still_valid(token_digest, now=now),
            read_ok=Case(
                When(access.may_read_condition(namespace, user_id, client_id), then=Value(True)),
                default=Value(False),
                output_field=BooleanField(),
            ),
        )
        .values_list(
            "metadata_location",
            "uuid",
            "last_updated_ms",
            "attached",
            "token_ok",
            "read_ok",
            "pk",
            "owner_id",
            "protected",
        )[:1]
    )


class _PointerQuery:
    """The pointer query compiled for one connection alias and backend, run with each
    request's values.

    On SQLite and PostgreSQL it runs on the driver's connection directly, outside Django's
    cursor wrapper, which cost more than the query itself (on SQLite about 23 of 30 us,
    mostly turning `%s` into `?` with a regular expression on every call):

    - SQLite: the SQL in `?` style, converted once; Python's sqlite3 keeps the statement
      compiled in its per-connection cache.
    - PostgreSQL: a server-side prepared statement (psycopg 3, `prepare=True` on a
      server-binding cursor), prepared once per connection, so that PostgreSQL no longer
      plans it on every load (about half of its time there). Django disables prepared
      statements unless DATABASES' OPTIONS set `prepare_threshold` (webapp/settings/base.py
      does, unless DB_PREPARED_STATEMENTS=0 for a pooler in transaction mode); without it
      the query runs unprepared, with server-side binding.

    Anything Django would observe still goes through Django's cursor: a debug cursor
    (DEBUG, or a test's CaptureQueriesContext), execute wrappers, other backends. Database
    errors are Django's either way (`wrap_database_errors`), so that a failed connection is
    closed at the end of the request as usual."""

    def __init__(self, db: Any) -> None:
        queryset = _pointer_queryset(_NAMESPACE, _NAME, _DIGEST, _NOW, _USER, _CLIENT)
        sql, params = queryset.query.get_compiler(connection=db).as_sql()
        now = db.ops.adapt_datetimefield_value(_NOW)
        params = list(params)
        slots = {_NAMESPACE: [], _NAME: [], _DIGEST: [], now: [], _USER: [], _CLIENT: []}
        for index, value in enumerate(params):
            if isinstance(value, str | datetime | int) and value in slots:
                slots[value].append(index)
        if not all(slots.values()):
            # The ORM changed how it passes these values: fail loudly, never run a query
            # that would look for the sentinels themselves.
            raise RuntimeError(f"The pointer query does not take its values as parameters: {sql}")
        self.sql = sql
        self.template = params
        self.slots = (
            slots[_NAMESPACE],
            slots[_NAME],
            slots[_DIGEST],
            slots[now],
            slots[_USER],
            slots[_CLIENT],
        )
        self.raw_sql = sql
        self.raw_template = params
        self.raw_slots = self.slots
        self.now = _now_as_taken_by(db)
        self.direct: Callable[[Any, str, list[Any]], tuple | None] | None = None
        if db.vendor == "sqlite" and sql.endswith(" LIMIT 1"):
            self.raw_sql, self.raw_template, self.raw_slots = _numbered(sql, params, self.slots)
            self.direct = _sqlite_fetch
        elif db.vendor == "postgresql" and (cursor_class := _server_binding_cursor()):
            self.direct = _postgresql_fetch(cursor_class)

    def params(
        self, db: Any, namespace: str, name: str, token_digest: str, user_id: int, client_id: int
    ) -> list[Any]:
        """The parameters of `self.sql`, Django's form of the query."""
        return self._fill(
            self.template, self.slots, db, namespace, name, token_digest, user_id, client_id
        )

    def _fill(
        self,
        template: list[Any],
        slots: tuple[list[int], ...],
        db: Any,
        namespace: str,
        name: str,
        token_digest: str,
        user_id: int,
        client_id: int,
    ) -> list[Any]:
        params = template.copy()
        values = (namespace, name, token_digest, self.now(db), user_id, client_id)
        for positions, value in zip(slots, values, strict=True):
            for index in positions:
                params[index] = value
        return params

    def run(
        self, db: Any, namespace: str, name: str, token_digest: str, user_id: int, client_id: int
    ) -> tuple | None:
        values = (db, namespace, name, token_digest, user_id, client_id)
        if self.direct is None or db.queries_logged or db.execute_wrappers:
            with db.cursor() as cursor:
                cursor.execute(self.sql, self.params(*values))
                return cursor.fetchone()
        params = self._fill(self.raw_template, self.raw_slots, *values)
        # What db.cursor() and its execute() do before running a query, bar the wrappers.
        db.close_if_health_check_failed()
        db.ensure_connection()
        db.validate_no_broken_transaction()
        with db.wrap_database_errors:
            return self.direct(db, self.raw_sql, params)


def _numbered(
    sql: str, params: list[Any], slots: tuple[list[int], ...]
) -> tuple[str, list[Any], tuple[list[int], ...]]:
    """The query in SQLite's numbered style (`?1`, `?2`...), each distinct value bound once:
    the ORM's form repeats the request's values and its constants (42 parameters for 13
    values), and binding them was a fifth of the query's cost. Returns the SQL, the
    template of distinct values and where each of the request's values goes in it."""
    from django.db.backends.sqlite3.base import FORMAT_QMARK_REGEX

    slot_of = {index: number for number, positions in enumerate(slots) for index in positions}
    numbers: dict[Any, int] = {}
    template: list[Any] = []
    raw_slots: tuple[list[int], ...] = tuple([] for _ in slots)

    def number(position: int) -> int:
        # A request's value is its slot; a constant is itself. A boolean is bound as the
        # integer SQLite stores for it: sqlite3 first looks for an adapter for a bool
        # (a subclass of int), failing through two attribute lookups on every execute.
        value = params[position]
        if type(value) is bool:
            value = int(value)
        key = ("slot", slot_of[position]) if position in slot_of else (type(value), value)
        if key not in numbers:
            numbers[key] = len(template)
            template.append(value)
            if position in slot_of:
                raw_slots[slot_of[position]].append(numbers[key])
        return numbers[key] + 1

    positions = iter(range(len(params)))
    # The same placeholders Django's SQLite cursor turns into `?`, in the same order.
    numbered = FORMAT_QMARK_REGEX.sub(lambda _: f"?{number(next(positions))}", sql)
    if next(positions, None) is not None:
        raise RuntimeError(f"The pointer query's placeholders and values differ: {sql}")
    return numbered.replace("%%", "%"), template, raw_slots


def _now_as_taken_by(db: Any) -> Callable[[Any], Any]:
    """How to pass the current time to this database: Django's adapt_datetimefield_value of
    timezone.now(), or the same value made directly where it is plainly that (a fraction of
    the cost: on SQLite it was a sixth of a 304's time in the app). On SQLite in UTC, the
    naive UTC time as text; on PostgreSQL, the aware time itself."""
    sample = datetime(2001, 2, 3, 4, 5, 6, 7, tzinfo=UTC)
    if settings.USE_TZ:
        adapted = db.ops.adapt_datetimefield_value(sample)
        if db.vendor == "sqlite" and db.timezone_name == "UTC":
            whole = calendar.timegm(sample.utctimetuple())
            if adapted == str(sample.replace(tzinfo=None)) == _utc_text(whole, sample.microsecond):
                return lambda db: _utc_text(*divmod(time.time_ns() // 1000, 1_000_000))
        elif db.vendor == "postgresql" and adapted is sample:
            return lambda db: datetime.now(UTC)
    return lambda db: db.ops.adapt_datetimefield_value(timezone.now())


#: The last second `_utc_text` wrote, and its text.
_second: tuple[int, str] = (-1, "")


def _utc_text(whole: int, micro: int) -> str:
    """The naive UTC time as str() of a datetime writes it (Django's form on SQLite), from
    seconds since the epoch and microseconds; each second's text is made once (str() of a
    datetime cost 12,000 instructions, a seventieth of a load)."""
    global _second
    second, text = _second
    if second != whole:
        text = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(whole))
        _second = (whole, text)
    return f"{text}.{micro:06d}" if micro else text


def _sqlite_fetch(db: Any, sql: str, params: list[Any]) -> tuple | None:
    """The one row of a query of at most one row (`LIMIT 1`), on a cursor kept per driver
    connection: making and closing one per load cost as much as binding the parameters.

    Only for such a query: a statement not stepped to its end keeps its read transaction,
    and with it an old snapshot of the database for every later read on this connection
    (WAL). sqlite3's fetchone steps past the row it returns, so a statement of one row ends
    (and is reset) within it."""
    cursor = getattr(db, _CURSOR_ATTRIBUTE, None)
    if cursor is None or cursor.connection is not db.connection:
        cursor = db.connection.cursor()
        setattr(db, _CURSOR_ATTRIBUTE, cursor)
    cursor.execute(sql, params)
    return cursor.fetchone()


def _server_binding_cursor() -> type | None:
    """Django's psycopg 3 cursor class that binds parameters on the server (None with
    psycopg 2, which cannot prepare statements)."""
    from django.db.backends.postgresql import base

    return getattr(base, "ServerBindingCursor", None)


def _postgresql_fetch(cursor_class: type) -> Callable[[Any, str, list[Any]], tuple | None]:
    def fetch(db: Any, sql: str, params: list[Any]) -> tuple | None:
        # One cursor per driver connection, kept on Django's connection wrapper (one per
        # thread): making and closing one per load cost a sixth of the query. A new driver
        # connection (Django reconnects after CONN_MAX_AGE) gets a new cursor, and the old
        # pair is let go.
        cursor = getattr(db, _CURSOR_ATTRIBUTE, None)
        if cursor is None or cursor.closed or cursor.connection is not db.connection:
            cursor = cursor_class(db.connection)
            setattr(db, _CURSOR_ATTRIBUTE, cursor)
        cursor.execute(sql, params, prepare=True)
        return cursor.fetchone()

    return fetch


_CURSOR_ATTRIBUTE = "_iceberg_pointer_cursor"


def _prepare(db: Any) -> _PointerQuery:
    """The pointer query for this connection's alias and backend, compiled once."""
    key = (db.alias, db.vendor)
    prepared = _prepared.get(key)
    if prepared is None:
        prepared = _PointerQuery(db)
        with _prepared_lock:
            _prepared[key] = prepared
    return prepared


def _run_pointer_query(
    namespace: str, name: str, token_digest: str, user_id: int, client_id: int
) -> tuple | None:
    db = connections[DEFAULT_DB_ALIAS]
    return _prepare(db).run(db, namespace, name, token_digest, user_id, client_id)


def pointer(
    namespace: str, name: str, *, token_digest: str, user_id: int, client_id: int
) -> Pointer:
    """The table's pointer row, read with the token check and the read grant's usual case
    (`read_ok`) in one query.

    InvalidCredentials (401) when the token is no longer good, whether or not the table
    exists; NoSuchTable (404) when it does not exist. Where `read_ok` is false the caller
    asks catalog.access."""
    row = _run_pointer_query(namespace, name, token_digest, user_id, client_id)
    if row is None:
        # A miss must not tell a revoked client whether the table exists: ask about the
        # token alone (a second query, on misses only).
        if not credentials.is_still_valid(token_digest):
            _refuse(token_digest)
        raise selectors.no_such_table(namespace, name)
    (
        location,
        table_uuid,
        last_updated_ms,
        attached,
        token_ok,
        read_ok,
        object_id,
        owner_id,
        *more,
    ) = row
    if not token_ok:
        _refuse(token_digest)
    # Plain SQL returns the database's own forms: SQLite keeps a UUID as 32 hex digits and
    # booleans as 0/1; the tag wants the UUID's canonical text, as the metadata has it.
    state = TableState(location, _canonical_uuid(table_uuid), int(last_updated_ms))
    protected = bool(more[0])
    return Pointer(state, bool(attached), bool(read_ok), object_id, owner_id, protected)


def _canonical_uuid(value: Any) -> str:
    # 32 hex digits (SQLite) are grouped by slicing, 8-4-4-4-12 as uuid.UUID's text is, at a
    # fraction of parsing them; anything else (PostgreSQL's UUID objects) goes through UUID.
    if isinstance(value, str) and len(value) == 32 and _HEX32.fullmatch(value):
        value = value.lower()
        return f"{value[:8]}-{value[8:12]}-{value[12:16]}-{value[16:20]}-{value[20:]}"
    if isinstance(value, uuid.UUID):
        return str(value)
    return str(uuid.UUID(str(value)))


_HEX32 = re.compile(r"[0-9a-fA-F]{32}")


def state_of(table: Table) -> TableState:
    """The state of a row already read (an attached table after following its writer)."""
    return TableState(table.metadata_location, str(table.uuid), int(table.last_updated_ms))


def _refuse(token_digest: str) -> None:
    credentials.forget(token_digest)
    raise credentials.InvalidCredentials(
        "Not authorized: the bearer token is missing, unknown or expired"
    )


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

"""The audit: every change to the catalog, and every read and refusal, newest first, from
the three records that keep them: `CatalogEvent` (namespaces, objects and their
definitions, engine credentials: every write records one), `GrantChange` (grants, revokes,
changes of owner) and `AccessEvent` (loads through the REST catalog, console queries,
previews, downloads, refused requests: catalog.access_events). The audit page, its CSV
export and GET /api/audit/ read it here; only superusers and those who manage the catalog
may (`may_see`).

Paging is by keyset, never by offset: each record is read by its own query, ordered by
(time, id) under the filters, and stops at the page's end; the three are merged in memory.
The filters use indexes (migrations 0018 and 0023): the time, the actor with the time, the
object's name (exact, under a namespace, or a prefix: ranges in code point order) with the
time, the action with the time, and refusals by time (a partial index). The CSV
export walks the same pages in chunks, so that no export holds more than one chunk.

Retention: rows older than AUDIT_KEEP_DAYS are deleted in bounded batches by celery-beat
(`prune`); 0 keeps them all."""

from __future__ import annotations

import base64
import binascii
import csv
import io
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import CharField, F, Func, Q, QuerySet
from django.db.models.functions import Collate
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from catalog import access
from catalog.core.access import MANAGE
from catalog.core.errors import InvalidInput
from catalog.models import AccessEvent, CatalogEvent, GrantChange

#: What a change is about; an access event is a "read" (allowed) or a "refusal".
CHANGE_KINDS = ("object", "namespace", "grant", "credential")
KINDS = (*CHANGE_KINDS, "read", "refusal")
#: What `kind` filters by: every change, every read, every refusal, or one kind of change.
FILTER_KINDS = ("changes", "reads", "refusals", *CHANGE_KINDS)
OUTCOMES = tuple(AccessEvent.Outcome.values)
#: Actions that are namespaces' and engine credentials' (the others of CatalogEvent are
#: objects'); GrantChange's are grants'.
NAMESPACE_ACTIONS = ("create_namespace", "update_namespace", "drop_namespace")
CREDENTIAL_ACTIONS = ("create_client", "revoke_client")
GRANT_ACTIONS = tuple(GrantChange.Action.values)
#: An action is a word of lower-case letters, digits, underscores and hyphens (drop_table,
#: grant, load-table).
ACTION = re.compile(r"[a-z][a-z0-9_-]{0,63}")
DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
#: The most entries one page holds, and one chunk of an export.
PAGE_MAX = 500
PAGE_SIZE = 50
CHUNK = 1000
#: Ties of time are broken by record (events after grant changes), then by id.
_RANK = {"grant": 0, "event": 1, "access": 2}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: The last code point: a prefix's range ends at the prefix followed by it.
_LAST = "\U0010ffff"
#: What a read (an access event) says beyond the columns every entry has.
_READ_FIELDS = ("outcome", "status", "reason", "channel", "credential", "tables")
CSV_COLUMNS = [
    "occurred_at",
    "actor",
    "action",
    "kind",
    "object_type",
    "object",
    "result",
    "details",
    "count",
    *_READ_FIELDS,
]


def may_see(principal: access.Principal) -> bool:
    """Superusers, and those who manage the whole catalog."""
    return principal.superuser or access.may(principal, MANAGE, access.CATALOG)


# -- filters -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Filters:
    """What the list is narrowed to. `object`: a name ("sales.orders"), which also finds
    what is under it ("sales" finds sales.orders), or a prefix ending in "*" ("sales.ord*").
    `since` is inclusive, `until` exclusive."""

    actor: str = ""
    object: str = ""
    since: datetime | None = None
    until: datetime | None = None
    kind: str = ""
    action: str = ""
    outcome: str = ""

    def query(self) -> dict[str, str]:
        """The filters as query parameters (for links and the export)."""
        found = {
            "actor": self.actor,
            "object": self.object,
            "from": self.since.isoformat() if self.since else "",
            "to": self.until.isoformat() if self.until else "",
            "kind": self.kind,
            "action": self.action,
            "outcome": self.outcome,
        }
        return {key: value for key, value in found.items() if value}


def _moment(value: str, field: str, *, end: bool) -> datetime | None:
    """A date (its day's start; for an end, the next day's start) or an ISO date and time
    (UTC when no offset is given)."""
    value = value.strip()
    if not value:
        return None
    try:
        # A bare date is a day (parse_datetime would read it as its midnight).
        day = parse_date(value) if DATE.fullmatch(value) else None
        moment = None if day is not None else parse_datetime(value)
    except ValueError:
        moment = day = None
    if moment is None and day is None:
        raise InvalidInput(
            f"{field} must be a date (2026-11-29) or an ISO date and time "
            f"(2026-11-29T13:45:00Z), not {value[:40]!r}",
            field=field,
        )
    try:
        if moment is None:
            moment = datetime.combine(day, time.min) + (timedelta(days=1) if end else timedelta())
        if timezone.is_naive(moment):
            moment = moment.replace(tzinfo=UTC)
        # The database compares in UTC: a moment that has none (year 0, year 10000) is out.
        return moment.astimezone(UTC)
    except OverflowError:
        raise InvalidInput(f"{field} is out of the range of dates", field=field) from None


def parse_filters(params: Mapping[str, Any]) -> Filters:
    """The filters from query parameters: actor, object, from, to, kind, action, outcome
    (an access event's: with it, changes are left out). A value
    that cannot be one is an InvalidInput naming its parameter (a 400)."""

    def text(name: str, limit: int) -> str:
        value = str(params.get(name) or "").strip()
        if len(value) > limit:
            raise InvalidInput(f"{name} is at most {limit} characters", field=name)
        if "\x00" in value:
            raise InvalidInput(f"{name} cannot hold a NUL character", field=name)
        return value

    kind = text("kind", 20)
    if kind and kind not in FILTER_KINDS:
        raise InvalidInput(
            f"kind must be one of {', '.join(FILTER_KINDS)}, not {kind!r}", field="kind"
        )
    outcome = text("outcome", 20)
    if outcome and outcome not in OUTCOMES:
        raise InvalidInput(
            f"outcome must be one of {', '.join(OUTCOMES)}, not {outcome!r}", field="outcome"
        )
    action = text("action", 64)
    if action and not ACTION.fullmatch(action):
        raise InvalidInput(
            f"action must be an action's name, such as drop_table, grant or load-table, "
            f"not {action!r}",
            field="action",
        )
    since = _moment(text("from", 40), "from", end=False)
    until = _moment(text("to", 40), "to", end=True)
    if since is not None and until is not None and until <= since:
        raise InvalidInput("to must be later than from", field="to")
    return Filters(
        actor=text("actor", 150),
        object=text("object", 1300),
        since=since,
        until=until,
        kind=kind,
        action=action,
        outcome=outcome,
    )


# -- entries -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One change, read or refusal, whichever record keeps it. The access event's own
    fields (outcome, status, reason, channel, credential, tables) are empty for a change."""

    occurred_at: datetime
    source: str
    id: int
    actor: str
    action: str
    kind: str
    object_type: str
    object: str
    result: str
    details: str
    count: int = 1
    first_occurred_at: datetime | None = None
    outcome: str = ""
    status: int | None = None
    reason: str = ""
    channel: str = ""
    credential: str = ""
    tables: list[str] | None = None

    @property
    def key(self) -> tuple[datetime, int, int]:
        return (self.occurred_at, _RANK[self.source], self.id)

    @property
    def cursor(self) -> str:
        return encode_cursor(self.key)

    def as_dict(self) -> dict[str, Any]:
        return {
            "occurred_at": self.occurred_at,
            "first_occurred_at": self.first_occurred_at,
            "actor": self.actor,
            "action": self.action,
            "kind": self.kind,
            "object_type": self.object_type,
            "object": self.object,
            "result": self.result,
            "details": self.details,
            "count": self.count,
            "outcome": self.outcome,
            "status": self.status,
            "reason": self.reason,
            "channel": self.channel,
            "credential": self.credential,
            "tables": self.tables,
        }


def encode_cursor(key: tuple[datetime, int, int]) -> str:
    moment, rank, row_id = key
    micros = (moment - _EPOCH) // timedelta(microseconds=1)
    return base64.urlsafe_b64encode(f"{micros}:{rank}:{row_id}".encode()).decode().rstrip("=")


def decode_cursor(value: str) -> tuple[datetime, int, int]:
    """A page's `cursor` parameter back to its key; anything else is an InvalidInput."""
    try:
        text = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).decode()
        micros, rank, row_id = (int(part) for part in text.split(":"))
        moment = _EPOCH + timedelta(microseconds=micros)
    except (ValueError, binascii.Error, UnicodeDecodeError, OverflowError):
        raise InvalidInput("cursor is not one this list gave", field="cursor") from None
    if rank not in _RANK.values() or row_id < 0:
        raise InvalidInput("cursor is not one this list gave", field="cursor")
    return moment, rank, row_id


#: How much of a name the name indexes hold (migration 0018): a whole name may be longer
#: than PostgreSQL indexes (a third of a page).
NAME_KEY = 200


class NameKey(Func):
    """A name's first NAME_KEY characters, written as the index's expression is (literal
    bounds: a planner matches no bound parameter to an index's constants)."""

    function = "SUBSTR"
    template = f"%(function)s(%(expressions)s, 1, {NAME_KEY})"
    output_field = CharField()


def _by_name(rows: QuerySet, field: str, wanted: str) -> QuerySet:
    """Rows whose `field` (a name) is `wanted` or under it, or starts with it when it ends
    in "*": each one range of the name index on the name's first NAME_KEY characters, in
    code point order (PostgreSQL compares in the "C" collation there; SQLite's BINARY is
    that order), the whole name compared beside it where the key cannot tell."""
    postgresql = connection.vendor == "postgresql"
    key, whole = f"{field}_key", f"{field}_whole"
    key_column = NameKey(F(field))
    rows = rows.alias(
        **{
            key: Collate(key_column, "C") if postgresql else key_column,
            whole: Collate(F(field), "C") if postgresql else F(field),
        }
    )

    def starting(prefix: str) -> Q:
        if len(prefix) <= NAME_KEY:
            return Q(**{f"{key}__gte": prefix, f"{key}__lt": prefix + _LAST})
        return Q(
            **{key: prefix[:NAME_KEY], f"{whole}__gte": prefix, f"{whole}__lt": prefix + _LAST}
        )

    if wanted.endswith("*"):
        prefix = wanted.rstrip("*")
        return rows.filter(starting(prefix)) if prefix else rows
    exact = Q(**{key: wanted[:NAME_KEY], whole: wanted})
    return rows.filter(exact | starting(wanted + "."))


def _after(key: tuple[datetime, int, int] | None, source: str) -> Q:
    """Rows of `source` that come after the cursor in the list's order (newest first)."""
    if key is None:
        return Q()
    moment, rank, row_id = key
    mine = _RANK[source]
    if mine < rank:
        return Q(occurred_at__lte=moment)
    if mine > rank:
        return Q(occurred_at__lt=moment)
    return Q(occurred_at__lt=moment) | Q(occurred_at=moment, id__lt=row_id)


def _actor_ids(username: str) -> list[int]:
    field = get_user_model().USERNAME_FIELD
    return list(get_user_model().objects.filter(**{field: username}).values_list("pk", flat=True))


def _changes_wanted(filters: Filters) -> bool:
    return not filters.outcome and filters.kind not in ("reads", "refusals")


def _narrowed(
    rows: QuerySet, filters: Filters, *, name_field: str, actor_ids: list[int] | None = None
) -> QuerySet:
    """The filters every source applies alike: the action, who acted and the object's name.
    Catalog events find the actor by account (`actor_ids`); grant changes and reads by the
    name kept with each row, so that a deleted account's rows are still found."""
    if filters.action:
        rows = rows.filter(action=filters.action)
    if actor_ids is not None:
        rows = rows.filter(actor_id__in=actor_ids)
    elif filters.actor:
        rows = rows.filter(actor_name=filters.actor)
    if filters.object:
        rows = _by_name(rows, name_field, filters.object)
    return rows


def _events(filters: Filters, actor_ids: list[int] | None) -> QuerySet | None:
    if filters.kind == "grant" or (filters.action and filters.action in GRANT_ACTIONS):
        return None
    if not _changes_wanted(filters):
        return None
    rows = CatalogEvent.objects.all()
    if filters.kind == "namespace":
        rows = rows.filter(action__in=NAMESPACE_ACTIONS)
    elif filters.kind == "credential":
        rows = rows.filter(action__in=CREDENTIAL_ACTIONS)
    elif filters.kind == "object":
        rows = rows.exclude(action__in=NAMESPACE_ACTIONS + CREDENTIAL_ACTIONS)
    return _narrowed(rows, filters, name_field="object_name", actor_ids=actor_ids)


def _grant_changes(filters: Filters) -> QuerySet | None:
    if filters.kind and filters.kind not in ("grant", "changes"):
        return None
    if not _changes_wanted(filters):
        return None
    if filters.action and filters.action not in GRANT_ACTIONS:
        return None
    rows = GrantChange.objects.all()
    return _narrowed(rows, filters, name_field="securable_name")


def _accesses(filters: Filters) -> QuerySet | None:
    if filters.kind and filters.kind not in ("reads", "refusals"):
        return None
    if filters.action and filters.action in GRANT_ACTIONS:
        return None
    rows = AccessEvent.objects.all()
    if filters.kind:
        wanted = "allowed" if filters.kind == "reads" else "refused"
        if filters.outcome and filters.outcome != wanted:
            return None
        rows = rows.filter(outcome=wanted)
    elif filters.outcome:
        rows = rows.filter(outcome=filters.outcome)
    return _narrowed(rows, filters, name_field="object_name")


def _timed(rows: QuerySet, filters: Filters) -> QuerySet:
    if filters.since is not None:
        rows = rows.filter(occurred_at__gte=filters.since)
    if filters.until is not None:
        rows = rows.filter(occurred_at__lt=filters.until)
    return rows


def _event_entry(row: tuple) -> Entry:
    at, pk, actor, action, object_type, name, result, message, count, first = row
    kind = (
        "namespace"
        if action in NAMESPACE_ACTIONS
        else "credential"
        if action in CREDENTIAL_ACTIONS
        else "object"
    )
    return Entry(
        occurred_at=at,
        source="event",
        id=pk,
        actor=actor or "",
        action=action,
        kind=kind,
        object_type=object_type,
        object=name,
        result=result,
        details=message,
        count=count,
        first_occurred_at=first,
    )


def _grant_entry(row: tuple) -> Entry:
    at, pk, actor, action, privilege, principal_type, principal, securable_type, name, was = row
    details = f"{privilege} to {principal_type} {principal}"
    if action == GrantChange.Action.TRANSFER:
        details = f"owner {principal}" + (f" (was {was})" if was else "")
    return Entry(
        occurred_at=at,
        source="grant",
        id=pk,
        actor=actor or "",
        action=action,
        kind="grant",
        object_type=securable_type,
        object=name,
        result="ok",
        details=details,
    )


def _access_entry(row: tuple) -> Entry:
    at, pk, actor, action, object_type, name, outcome, status, reason = row[:9]
    channel, credential, tables, count, first = row[9:]
    details = f"{channel} by {credential}" + (f"; read {', '.join(tables)}" if tables else "")
    return Entry(
        occurred_at=at,
        source="access",
        id=pk,
        actor=actor,
        action=action,
        kind="refusal" if outcome == "refused" else "read",
        object_type=object_type,
        object=name,
        result=outcome,
        details=details,
        outcome=outcome,
        status=status,
        reason=reason,
        channel=channel,
        credential=credential,
        tables=tables,
        count=count,
        first_occurred_at=first,
    )


_ACCESS_COLUMNS = (
    "occurred_at",
    "id",
    "actor_name",
    "action",
    "object_type",
    "object_name",
    *_READ_FIELDS,
    "count",
    "first_occurred_at",
)
_EVENT_COLUMNS = (
    "occurred_at",
    "id",
    f"actor__{get_user_model().USERNAME_FIELD}",
    "action",
    "object_type",
    "object_name",
    "result",
    "message",
    "count",
    "first_occurred_at",
)
_GRANT_COLUMNS = (
    "occurred_at",
    "id",
    "actor_name",
    "action",
    "privilege",
    "principal_type",
    "principal_name",
    "securable_type",
    "securable_name",
    "previous_owner",
)


def entries(
    filters: Filters, *, after: tuple[datetime, int, int] | None = None, limit: int = PAGE_SIZE
) -> tuple[list[Entry], str | None]:
    """Up to `limit` entries after the cursor's key, newest first, and the next page's
    cursor (None on the last page). Up to three bounded queries (one per record the filters
    can keep), and one for the actor's id when the filters name one (events keep the
    account, not its name)."""
    limit = max(1, min(limit, max(PAGE_MAX, CHUNK)))
    actor_ids = _actor_ids(filters.actor) if filters.actor else None
    found: list[Entry] = []
    events = _events(filters, actor_ids)
    if events is not None:
        rows = _timed(events, filters).filter(_after(after, "event"))
        ordered = rows.order_by("-occurred_at", "-id").values_list(*_EVENT_COLUMNS)
        found += [_event_entry(row) for row in ordered[: limit + 1]]
    changes = _grant_changes(filters)
    if changes is not None:
        rows = _timed(changes, filters).filter(_after(after, "grant"))
        ordered = rows.order_by("-occurred_at", "-id").values_list(*_GRANT_COLUMNS)
        found += [_grant_entry(row) for row in ordered[: limit + 1]]
    accesses = _accesses(filters)
    if accesses is not None:
        rows = _timed(accesses, filters).filter(_after(after, "access"))
        ordered = rows.order_by("-occurred_at", "-id").values_list(*_ACCESS_COLUMNS)
        found += [_access_entry(row) for row in ordered[: limit + 1]]
    found.sort(key=lambda entry: entry.key, reverse=True)
    page = found[:limit]
    return page, (page[-1].cursor if len(found) > limit else None)


def walk(filters: Filters, *, chunk: int = CHUNK) -> Iterator[Entry]:
    """Every entry the filters keep, newest first, read a chunk at a time."""
    after = None
    while True:
        page, cursor = entries(filters, after=after, limit=chunk)
        yield from page
        if cursor is None:
            return
        after = decode_cursor(cursor)


def _cell(value: Any) -> str:
    """A CSV cell a spreadsheet shows as text: names and messages are users' text, and a
    cell starting with =, +, -, @ would be read as a formula (OWASP's CSV injection)."""
    if value is None:
        return ""
    if isinstance(value, list):
        value = " ".join(str(item) for item in value)
    text = value.isoformat() if isinstance(value, datetime) else str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def csv_lines(filters: Filters) -> Iterator[str]:
    """The export: a header, then one line per entry, produced as they are read."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(CSV_COLUMNS)
    yield buffer.getvalue()
    for entry in walk(filters):
        buffer.seek(0)
        buffer.truncate()
        data = entry.as_dict()
        writer.writerow([_cell(data[column]) for column in CSV_COLUMNS])
        yield buffer.getvalue()


def export_name(now: datetime | None = None) -> str:
    return f"lakeview-audit-{(now or timezone.now()):%Y%m%d-%H%M%S}.csv"


# -- retention -----------------------------------------------------------------------------

#: Rows deleted per statement: each batch is one short transaction.
PRUNE_BATCH = 1000


def retention_days() -> int:
    return int(settings.AUDIT_KEEP_DAYS)


def prune(
    *, now: datetime | None = None, keep_days: int | None = None, batch: int = PRUNE_BATCH
) -> int:
    """Delete catalog events, grant changes and access events older than `keep_days`
    (AUDIT_KEEP_DAYS; 0 keeps everything), oldest first, `batch` rows per statement.
    Returns how many went."""
    days = retention_days() if keep_days is None else keep_days
    if days <= 0:
        return 0
    cutoff = (now or timezone.now()) - timedelta(days=days)
    deleted = 0
    for model in (CatalogEvent, GrantChange, AccessEvent):
        while True:
            ids = list(
                model.objects.filter(occurred_at__lt=cutoff)
                .order_by("occurred_at", "id")
                .values_list("id", flat=True)[:batch]
            )
            if not ids:
                break
            deleted += model.objects.filter(id__in=ids).delete()[0]
            if len(ids) < batch:
                break
    return deleted

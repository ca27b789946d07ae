"""Where the paths of the app record access events (the audit of reads and refusals): each
hook is one line calling one of these, and changes nothing of its path's answer.

Recorded (catalog.access_log writes the log line at once and the row in batches):

- `loaded`: a load of a table (200 or 304: a 304 is a load whose answer the engine kept)
  or of a view through the Iceberg REST catalog;
- `read`: a preview of a table or a view (the API's and the pages'), a download of a
  query's result, and a console query as it runs on the worker, with the tables and views
  its plan read (credential "console"), and `query_refused` for one the plan's reads were
  refused (a 403, or a table it may not see: "hidden");
- `refused`: a refused request of the REST catalog, the API or the pages (called where each
  answers its errors: catalog.iceberg_rest.resource, catalog.api.errors and
  `RefusalsMiddleware`): every 403, and every 404 whose error was made by `hidden` (an object
  or namespace that exists, answered as missing because the principal may not see it; the
  reason says "hidden"). A 404 for what does not exist is no access event; neither is a
  401 (no principal). The caller's answer is the same either way: the mark is an attribute
  of the exception, never written in a body.

AUDIT_READS=0 turns recording off (bench/rest_load.py's side-by-side run)."""

from __future__ import annotations

import uuid as uuid_module
from datetime import UTC
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections, transaction

from catalog import access, access_log
from infra.metrics import ACCESS_EVENTS_DROPPED

#: The attribute `hidden` sets on an exception.
HIDDEN = "access_hidden"

_recorder: access_log.Recorder | None = None


#: The columns `_insert` writes, and each one's key in an event.
_COLUMNS = {
    "occurred_at": "at",
    "actor_id": "actor_id",
    "actor_name": "actor",
    "credential": "credential",
    "channel": "channel",
    "action": "action",
    "object_type": "object_type",
    "object_name": "object",
    "object_uuid": "object_uuid",
    "tables": "tables",
    "outcome": "outcome",
    "status": "status",
    "reason": "reason",
}


def _insert(events: list[access_log.Folded]) -> None:
    """The flusher's writer: one statement for the batch, an event repeated in it one row
    (`access_log.fold`), its values adapted as the fields would adapt them, without a model instance
    per row (which cost a load-table a tenth of its time on SQLite; bench/rest_load.py's
    load-unrecorded)."""
    from catalog.models import AccessEvent

    db = connections[DEFAULT_DB_ALIAS]
    meta = AccessEvent._meta
    tables_field = meta.get_field("tables")
    quote = db.ops.quote_name
    columns = [*_COLUMNS, "count", "first_occurred_at"]
    sql = (
        f"INSERT INTO {quote(meta.db_table)} ({', '.join(quote(c) for c in columns)}) "
        f"VALUES ({', '.join(['%s'] * len(columns))})"
    )
    sqlite = db.vendor == "sqlite"

    def moment(at: Any) -> Any:
        at = access_log.moment(at)
        # As Django stores it on SQLite: the UTC time's text.
        return at.astimezone(UTC).replace(tzinfo=None).isoformat(" ") if sqlite else at

    rows = []
    for folded in events:
        e, count, first = folded.event, folded.count, folded.first
        uuid, tables = e["object_uuid"], e["tables"]
        if uuid is not None:
            # On SQLite as Django stores it there: a uuid's 32 hex digits.
            uuid = str(uuid).replace("-", "") if sqlite else str(uuid)
        if tables is not None:
            tables = tables_field.get_db_prep_value(tables, db)
        rows.append(
            (
                moment(e["at"]), e["actor_id"], e["actor"][:150], e["credential"][:100],
                e["channel"], e["action"][:32], e["object_type"][:20], e["object"], uuid,
                tables, e["outcome"], e["status"], e["reason"],
                count, moment(first) if count > 1 else None,
            )
        )  # fmt: skip
    with transaction.atomic(using=DEFAULT_DB_ALIAS), db.cursor() as cursor:
        cursor.executemany(sql, rows)


def recorder() -> access_log.Recorder:
    """The process's recorder, made on first use from the settings."""
    global _recorder
    if _recorder is None:
        _recorder = access_log.Recorder(
            _insert,
            interval=float(settings.AUDIT_READS_FLUSH_SECONDS),
            batch=500,
            capacity=int(settings.AUDIT_READS_QUEUE),
            on_drop=ACCESS_EVENTS_DROPPED.inc,
            on_thread_exit=connections.close_all,
        )
    return _recorder


def record(
    *,
    user: Any,
    credential: str,
    channel: str,
    action: str,
    object_type: str = "",
    name: str = "",
    object_uuid: Any = None,
    tables: list[str] | None = None,
    refused: bool = False,
    status: int = 200,
    reason: str = "",
) -> None:
    """One access event (see catalog.access_log), unless AUDIT_READS is off."""
    if not settings.AUDIT_READS:
        return
    if object_uuid is not None and not isinstance(object_uuid, uuid_module.UUID):
        object_uuid = str(object_uuid)
    outcome = "refused" if refused else "allowed"
    recorder().record(
        _event(user, credential, channel, action, object_type, name, object_uuid, tables,
               outcome, status, reason)
    )  # fmt: skip


def _event(
    user: Any,
    credential: str,
    channel: str,
    action: str,
    object_type: str,
    name: str,
    object_uuid: Any,
    tables: list[str] | None,
    outcome: str,
    status: int,
    reason: str,
) -> dict[str, Any]:
    """An event as catalog.access_log takes it (its FIELDS), made now."""
    return {
        "at": access_log.now(),
        "actor": getattr(user, "username", "") or "",
        "actor_id": getattr(user, "pk", None),
        "credential": credential,
        "channel": channel,
        "action": action,
        "object_type": object_type,
        "object": name,
        "object_uuid": object_uuid,
        "tables": tables,
        "outcome": outcome,
        "status": status,
        "reason": reason,
    }


# -- who asked -------------------------------------------------------------------------------


def asker(request: Any) -> tuple[Any, str]:
    """Who asked (their user, None when no one signed in) and with which credential: an
    engine's client id, "token" for the API with a token, else "session"."""
    bound = access.bound_principal(request)
    if bound is not None:
        user = bound.user
    else:
        user = getattr(request, "user", None)
        user = user if getattr(user, "is_authenticated", False) else None
    client = getattr(bound, "client", None)
    if client is not None:
        return user, client.client_id
    return user, "token" if getattr(request, "auth", None) is not None else "session"


# -- the hooks -------------------------------------------------------------------------------


def loaded(request: Any, kind: str, namespace: str, name: str, *, uuid: Any, status: int) -> None:
    """A table's or view's load through the REST catalog (200, or 304)."""
    if not settings.AUDIT_READS:
        return
    user, credential = asker(request)
    # The hottest hook (every load an engine plans): the event made at once, positionally.
    action = "load-table" if kind == "table" else f"load-{kind}"
    event = _event(user, credential, "rest", action, kind, f"{namespace}.{name}", uuid, None,
                   "allowed", status, "")  # fmt: skip
    recorder().record(event)


def read(request: Any, action: str, channel: str, obj: Any = None, **extra: Any) -> None:
    """A preview (of `obj`, a table or a view) or a download, allowed."""
    if obj is not None:
        extra.setdefault("object_type", obj.kind.lower() if hasattr(obj, "kind") else "")
        extra.setdefault("name", f"{obj.namespace.name}.{obj.name}")
        extra.setdefault("object_uuid", getattr(obj, "uuid", None))
    user, credential = asker(request)
    record(user=user, credential=credential, channel=channel, action=action, **extra)


def query_ran(actor: Any, reads: list, query: Any) -> None:
    """A console query, as it runs on the worker: the tables and views its plan read."""
    _console_query(actor, reads, name=str(query.pk))


def query_refused(actor: Any, reads: list, reason: str, status: int) -> None:
    """A console query its plan's reads refused on the worker (a 403, or a table it may not
    see, which the query's error tells as a missing one: `status` 404, "hidden: ...")."""
    _console_query(actor, reads, refused=True, status=status, reason=reason[:1000])


def _console_query(actor: Any, reads: list, **extra: Any) -> None:
    tables = [".".join(read) for read in reads]
    record(
        user=actor,
        credential="console",
        channel="worker",
        action="query",
        object_type="query",
        tables=tables,
        **extra,
    )


def hidden(error: BaseException) -> BaseException:
    """`error` (a missing object's), marked as hiding one that exists: `raise hidden(...)`."""
    setattr(error, HIDDEN, True)
    return error


def refused(request: Any, error: BaseException, status: int, channel: str) -> None:
    """A refused request: every 403, and a 404 `hidden` made. Anything else is not one."""
    if status != 403 and not (status == 404 and getattr(error, HIDDEN, False)):
        return
    user, credential = asker(request)
    if user is None:
        return
    message = getattr(error, "message", None) or str(getattr(error, "detail", "") or error)
    record(
        user=user,
        credential=credential,
        channel=channel,
        action="refused",
        object_type="",
        name=_named(request),
        refused=True,
        status=status,
        reason=("hidden: " if status == 404 else "") + message[:1000],
    )


def _named(request: Any) -> str:
    """The object the request's path names ("sales.orders"), else the path."""
    match = getattr(request, "resolver_match", None)
    kwargs = dict(match.kwargs) if match is not None else {}
    namespace = str(kwargs.get("namespace") or "").replace("\x1f", ".")
    name = kwargs.get("table") or kwargs.get("view") or kwargs.get("name") or ""
    if namespace:
        return f"{namespace}.{name}" if name else namespace
    return getattr(request, "path", "")[:1000]


class RefusalsMiddleware:
    """The pages' refusals: a PermissionDenied (403) or a `hidden` Http404 a view raised."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: Any) -> Any:
        return self.get_response(request)

    def process_exception(self, request: Any, exception: Exception) -> None:
        from django.core.exceptions import PermissionDenied
        from django.http import Http404

        if isinstance(exception, PermissionDenied):
            refused(request, exception, 403, "page")
        elif isinstance(exception, Http404):
            refused(request, exception, 404, "page")

"""Server-side scan planning: planTableScan, fetchPlanningResult, cancelPlanning and
fetchScanTasks. The planning is `catalog.core.scan_planning`'s, over the process's metadata
cache (`catalog.previews.metadata_cache`); these handlers check grants, sign and read the
tokens, and shape the answers.

Nothing is kept between requests. A plan id and a plan task are tokens signed with the
app's secret (Django's `signing`, its own salt) that carry the table's UUID, the snapshot
and schema the plan read, the request as it came, and, for a task, the range of data
manifests it covers: any web process can answer for them, after a restart too, and one who
changes a token gets a 404 (NoSuchPlanIdException, NoSuchPlanTaskException), never another
table's files or a 500. Every call checks read_data on the table again, so a token outlives
no grant; a token of another table, or of a snapshot expired since, is a 404 as well.
Every plan is "completed" at once (pyiceberg 0.12 cannot poll a "submitted" one): a small
plan with its file scan tasks, a larger one with plan tasks."""

from __future__ import annotations

import dataclasses
from typing import Any

from django.core import signing
from django.http import HttpRequest, HttpResponse, JsonResponse

from catalog import checks, previews
from catalog.core import scan_planning
from catalog.core.access import READ_DATA
from catalog.core.errors import NotFound
from catalog.core.metadata_cache import CachedTable
from catalog.iceberg_rest import bodies
from catalog.iceberg_rest.table_endpoints import refuse_protected
from catalog.models import Table
from catalog.services import attached
from catalog.services.kernel import TABLE

#: Django signing's salt for plan tokens (a token signed for anything else never reads).
SALT = "lakeview.iceberg.scan-plan"
#: How long a plan id or a plan task stays good (seconds): long enough for any scan.
TOKEN_MAX_AGE = 24 * 60 * 60


class NoSuchPlanId(NotFound):
    iceberg_type = "NoSuchPlanIdException"


class NoSuchPlanTask(NotFound):
    iceberg_type = "NoSuchPlanTaskException"


def _readable_table(request: HttpRequest, user: Any, namespace: str, table: str) -> Table:
    """The table, if the principal may read its data: one it may not see is missing (404),
    one it sees without read_data is a 403, as load-table answers. An attached table is
    followed to its writer's newest metadata first, as a load does."""
    found = checks.obj(request, TABLE, bodies.namespace_name(namespace), table, READ_DATA)
    # A plan's tasks name the table's data files: refused where a load would be.
    refuse_protected(request, found)
    return attached.follow(found, actor=user)


def _token(kind: str, state: CachedTable, scope: scan_planning.Scope, **more: Any) -> str:
    snapshot = scope.snapshot.snapshot_id if scope.snapshot is not None else None
    payload = {
        "k": kind,
        "t": str(state.metadata.table_uuid),
        "s": snapshot,
        "h": scope.schema.schema_id,
        "q": scope.request.payload(),
        **more,
    }
    return signing.dumps(payload, salt=SALT, compress=True)


def _scope_of_token(
    token: Any, kind: str, state: CachedTable, missing: type[NotFound]
) -> tuple[scan_planning.Scope, dict[str, Any]]:
    """The scope a token of `kind` was made for, against the table's metadata now:
    `missing` (404) for a token that is not one of ours, is of another kind or another
    table, has expired, or names a snapshot the table no longer has."""
    what = "plan" if kind == "plan" else "plan task"
    if not isinstance(token, str) or not token:
        raise missing(f"No such {what}")
    try:
        payload = signing.loads(token, salt=SALT, max_age=TOKEN_MAX_AGE)
    except signing.BadSignature:  # SignatureExpired included
        raise missing(f"No such {what}: the token is unknown or has expired") from None
    if (
        not isinstance(payload, dict)
        or payload.get("k") != kind
        or payload.get("t") != str(state.metadata.table_uuid)
    ):
        raise missing(f"No such {what} for this table")
    request = scan_planning.parse_request(payload.get("q") or {})
    snapshot_id = payload.get("s")
    if snapshot_id is not None and request.end_snapshot_id is None:
        # The plan read the snapshot that was current when it was made, whatever is now.
        request = dataclasses.replace(request, snapshot_id=snapshot_id)
    if snapshot_id is not None and state.metadata.snapshot_by_id(snapshot_id) is None:
        raise missing(f"No such {what}: its snapshot {snapshot_id} is no longer in the table")
    try:
        scope = scan_planning.resolve(state.metadata, request, schema_id=payload.get("h"))
    except scan_planning.InvalidInput as error:
        raise missing(f"No such {what}: {error.message}") from None
    return scope, payload


def _planned(state: CachedTable, scope: scan_planning.Scope) -> dict[str, Any]:
    """A completed result: the file scan tasks of a small plan, else its plan tasks."""
    outline = scan_planning.outline(state.metadata, state.io, scope)
    if outline.inline:
        tasks = scan_planning.plan_range(state.metadata, state.io, scope, 0, outline.data_manifests)
        return {"status": "completed", **scan_planning.scan_tasks(tasks, state.metadata, scope)}
    plan_tasks = [_token("task", state, scope, r=list(bounds)) for bounds in outline.ranges]
    return {"status": "completed", "plan-tasks": plan_tasks}


def plan_table_scan(request: HttpRequest, user: Any, namespace: str, table: str) -> HttpResponse:
    found = _readable_table(request, user, namespace, table)
    scan = scan_planning.parse_request(bodies.body(request))
    state = previews.load(found)
    scope = scan_planning.resolve(state.metadata, scan)
    return JsonResponse({**_planned(state, scope), "plan-id": _token("plan", state, scope)})


def fetch_planning_result(
    request: HttpRequest, user: Any, namespace: str, table: str, plan_id: str
) -> HttpResponse:
    state = previews.load(_readable_table(request, user, namespace, table))
    scope, _ = _scope_of_token(plan_id, "plan", state, NoSuchPlanId)
    return JsonResponse(_planned(state, scope))


def cancel_planning(
    request: HttpRequest, user: Any, namespace: str, table: str, plan_id: str
) -> HttpResponse:
    """Nothing is held for a plan, so there is nothing to release; a plan id that is not
    this table's is still a 404, as the spec lists."""
    state = previews.load(_readable_table(request, user, namespace, table))
    _scope_of_token(plan_id, "plan", state, NoSuchPlanId)
    return HttpResponse(status=204)


def fetch_scan_tasks(request: HttpRequest, user: Any, namespace: str, table: str) -> HttpResponse:
    found = _readable_table(request, user, namespace, table)
    token = bodies.string(bodies.body(request), "plan-task", is_required=True)
    state = previews.load(found)
    scope, payload = _scope_of_token(token, "task", state, NoSuchPlanTask)
    bounds = payload.get("r")
    if (
        not isinstance(bounds, list)
        or len(bounds) != 2
        or not all(isinstance(b, int) and not isinstance(b, bool) for b in bounds)
    ):
        raise NoSuchPlanTask("No such plan task")
    try:
        tasks = scan_planning.plan_range(state.metadata, state.io, scope, *bounds)
    except NotFound:
        raise NoSuchPlanTask("No such plan task: its manifests are not in the snapshot") from None
    return JsonResponse(scan_planning.scan_tasks(tasks, state.metadata, scope))

"""Tables: list, create (also staged), load, exists, commit, drop (with purge), register,
metrics, rename, and multi-table transactions.

Each handler asks `checks` first: a table the principal may not see answers as a missing
one; loads need read_data, data-only commits write_data, other commits, drops and renames
manage, creates and registrations create in the namespace.

Load, create, register and commit answers carry an ETag (`etags`); a load whose
If-None-Match names the current one is a 304 decided from the pointer row
(`table_loads`), or, for a table whose answer depends on who asks (`redaction`), once the
principal's form of the body is known again."""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse

from catalog import access, access_events, checks, policies, redaction, selectors, services
from catalog.core.access import (
    CREATE,
    MANAGE,
    READ_DATA,
    READ_METADATA,
    commit_privilege,
)
from catalog.core.errors import NotFound
from catalog.core.tables import table_metadata_json
from catalog.iceberg_rest import bodies, etags, objects, table_loads
from catalog.iceberg_rest.errors import Forbidden
from catalog.iceberg_rest.resource import bearer_digest, refuse_if_holding_nothing
from catalog.models import Table
from catalog.services import attached
from catalog.services.kernel import TABLE


def _loaded(request: HttpRequest, loaded: services.LoadedTable, **extra: Any) -> JsonResponse:
    """A create's, register's or commit's answer: the table as it is now, without the
    properties the principal may not see (the commit stored them all)."""
    if loaded.metadata_location is None:  # a staged create: nothing is written yet, no tag
        return JsonResponse(
            {
                "metadata-location": None,
                "metadata": json.loads(table_metadata_json(loaded.metadata)),
                **extra,
            }
        )
    document = objects.load_result(loaded.metadata_location, **extra)
    answer = redaction.Redacted(None, False)
    if loaded.obj is not None and redaction.HIDDEN:
        answer = redaction.load_result(checks.principal(request), loaded.obj.pk, document)
    response = JsonResponse(document)
    # The tag a load of this state in the default mode (all snapshots) will have, by this
    # principal, so that a client caching the answer of its own commit can load with
    # If-None-Match at once.
    state = etags.TableState(
        loaded.metadata_location,
        str(loaded.metadata.table_uuid),
        int(loaded.metadata.last_updated_ms),
    )
    response["ETag"] = redaction.tag(etags.table_tag(state), answer)
    return response


def list_tables(request: HttpRequest, user: Any, namespace: str) -> HttpResponse:
    return objects.list_identifiers(request, namespace, Table)


def create_table(request: HttpRequest, user: Any, namespace: str) -> HttpResponse:
    name = bodies.namespace_name(namespace)
    checks.namespace(request, name, CREATE)
    document = bodies.body(request)
    loaded = services.create_table(
        namespace=name,
        name=bodies.string(document, "name", is_required=True),
        schema=bodies.obj(document, "schema", is_required=True),
        location=bodies.string(document, "location"),
        partition_spec=bodies.obj(document, "partition-spec") or None,
        write_order=bodies.obj(document, "write-order") or None,
        properties=bodies.string_map(document, "properties"),
        stage_create=bool(document.get("stage-create")),
        actor=user,
    )
    return _loaded(request, loaded, config={})


def load_table(request: HttpRequest, user: Any, namespace: str, table: str) -> HttpResponse:
    name = bodies.namespace_name(namespace)
    snapshots = etags.snapshots_mode(request)
    who = checks.principal(request)
    client = who.client
    try:
        found = table_loads.pointer(
            name,
            table,
            token_digest=bearer_digest(request),
            user_id=user.pk,
            client_id=client.pk if client is not None else 0,
        )
    except NotFound:
        refuse_if_holding_nothing(who)
        raise
    if not found.read_ok:
        refuse_if_holding_nothing(who)
        # What the pointer query's usual case leaves to the grants (a superuser, a narrowed
        # credential, or no grant to read): they decide, with one query.
        held = who.privileges(access.object_ref(found.object_id, name, found.owner_id))
        if READ_METADATA not in held:
            raise access_events.hidden(selectors.no_such_table(name, table))
        if READ_DATA not in held:
            raise Forbidden(
                f"Forbidden: {user.username} lacks the {READ_DATA} privilege on {name}.{table}"
            )
    if found.protected:
        _refuse_if_policy_applies(who, found.object_id, name, table, found.owner_id)
    state = found.state
    if found.attached:
        # An attached table follows its writer before its tag is known: a newer metadata
        # file is picked up here (a listing and a read of the newest file, even for a 304).
        state = table_loads.state_of(attached.follow(selectors.get_table(name, table), actor=user))
    tag = etags.table_tag(state, snapshots)
    # The plain tag is only ever given for a body that is the same for every principal: a
    # client holding it gets its 304 from the pointer row alone.
    matches = request.META.get("HTTP_IF_NONE_MATCH")
    if etags.none_match_fails(matches, tag):
        access_events.loaded(request, "table", name, table, uuid=state.uuid, status=304)
        return etags.not_modified(tag)
    body = table_loads.body(state)
    # Properties the principal may not see (a materialized table's query, to one who may
    # not read its sources) are left out of the body. Such a body's tag says which form the
    # principal gets now (redaction.tag): a grant or a revoke since the client's copy
    # changes it, so the client gets the new form, not a 304.
    answer = redaction.Redacted(None, False)
    if redaction.HIDDEN:
        answer = redaction.load_body(who, found.object_id, body)
    if answer.hideable:
        tag = redaction.tag(tag, answer)
        if etags.none_match_fails(matches, tag):
            access_events.loaded(request, "table", name, table, uuid=state.uuid, status=304)
            return etags.not_modified(tag)
    # Both modes answer every snapshot (`refs` is a subset the spec lets a server widen);
    # the tags still differ, as the spec asks, so that a client never mixes them up.
    response = HttpResponse(answer.body or body, content_type="application/json")
    response["ETag"] = tag
    access_events.loaded(request, "table", name, table, uuid=state.uuid, status=200)
    return response


def _refuse_if_policy_applies(
    who: access.Principal, object_id: int, namespace: str, name: str, owner_id: int | None
) -> None:
    """An engine reads a table's files itself, around any row filter or mask: a table with
    one that applies to the principal is loaded only by its managers (catalog.policies)."""
    refusal = policies.engine_refusal(
        who, object_id=object_id, namespace=namespace, name=name, owner_id=owner_id
    )
    if refusal is not None:
        raise Forbidden(refusal)


def refuse_protected(request: HttpRequest, table: Table) -> None:
    """`_refuse_if_policy_applies` for a table already read (commits, scan planning)."""
    refusal = policies.engine_refusal(checks.principal(request), table)
    if refusal is not None:
        raise Forbidden(refusal)


# The resource's check of a principal holding nothing is made here, on the paths that need
# the grants anyway: a load the pointer query allowed costs no query for it.
load_table.gates_itself = True  # type: ignore[attr-defined]


def table_exists(request: HttpRequest, user: Any, namespace: str, table: str) -> HttpResponse:
    checks.obj(request, TABLE, bodies.namespace_name(namespace), table, READ_METADATA)
    return HttpResponse(status=204)


def _may_commit(request: HttpRequest, namespace: str, name: str, requirements, updates) -> None:
    """A commit to a table needs write_data for data alone, else manage; a staged create's
    commit (asserting the table does not exist) needs create in the namespace."""
    found = Table.objects.select_related("namespace").filter(namespace__name=namespace, name=name)
    existing = found.first()
    if existing is not None:
        checks.check(request, existing, commit_privilege(updates), kind=TABLE)
        # A commit's answer is the table's metadata, the way to its files, as a load's is.
        refuse_protected(request, existing)
    elif any(isinstance(r, dict) and r.get("type") == "assert-create" for r in requirements):
        checks.namespace(request, namespace, CREATE)
    else:
        raise TABLE.missing(namespace, name)


def commit_table(request: HttpRequest, user: Any, namespace: str, table: str) -> HttpResponse:
    name = bodies.namespace_name(namespace)
    document = bodies.body(request)
    requirements = bodies.objects(document, "requirements")
    updates = bodies.objects(document, "updates")
    _may_commit(request, name, table, requirements, updates)
    loaded = services.commit_table(
        namespace=name, name=table, requirements=requirements, updates=updates, actor=user
    )
    return _loaded(request, loaded)


def drop_table(request: HttpRequest, user: Any, namespace: str, table: str) -> HttpResponse:
    purge = request.GET.get("purgeRequested", "false").lower() == "true"
    name = bodies.namespace_name(namespace)
    checks.obj(request, TABLE, name, table, MANAGE)
    services.drop_table(namespace=name, name=table, purge=purge, actor=user)
    return HttpResponse(status=204)


def register_table(request: HttpRequest, user: Any, namespace: str) -> HttpResponse:
    name = bodies.namespace_name(namespace)
    checks.namespace(request, name, CREATE)
    document = bodies.body(request)
    table = bodies.string(document, "name", is_required=True)
    overwrite = bool(document.get("overwrite"))
    if overwrite:
        existing = Table.objects.select_related("namespace").filter(
            namespace__name=name, name=(table or "").strip()
        )
        if (found := existing.first()) is not None:
            checks.check(request, found, MANAGE, kind=TABLE)
    loaded = services.register_table(
        namespace=name,
        name=table,
        metadata_location=bodies.string(document, "metadata-location", is_required=True),
        overwrite=overwrite,
        actor=user,
    )
    return _loaded(request, loaded, config={})


def report_metrics(request: HttpRequest, user: Any, namespace: str, table: str) -> HttpResponse:
    """A report for a table the principal may not see is dropped, as one for a table that
    does not exist is (the service keeps nothing for it)."""
    name = bodies.namespace_name(namespace)
    report = bodies.body(request)
    found = Table.objects.select_related("namespace").filter(namespace__name=name, name=table)
    existing = found.first()
    if existing is not None:
        if not checks.visible(request, existing):
            return HttpResponse(status=204)
        checks.check(request, existing, READ_DATA, kind=TABLE)
    services.record_metrics(namespace=name, name=table, report=report)
    return HttpResponse(status=204)


def rename_table(request: HttpRequest, user: Any) -> HttpResponse:
    return objects.rename(request, user, services.rename_table, TABLE)


def commit_transaction(request: HttpRequest, user: Any) -> HttpResponse:
    changes = []
    for change in bodies.objects(bodies.body(request), "table-changes", is_required=True):
        namespace, name = bodies.parse_identifier(change.get("identifier"), "identifier")
        requirements = bodies.objects(change, "requirements")
        updates = bodies.objects(change, "updates")
        _may_commit(request, namespace, name, requirements, updates)
        changes.append(services.TableChange(namespace, name, requirements, updates))
    services.commit_tables(changes=changes, actor=user)
    return HttpResponse(status=204)

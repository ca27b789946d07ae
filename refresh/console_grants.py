"""GRANT, REVOKE and SHOW GRANTS in the console (the page, POST /api/statements/ and
apply_sql alike): the names a statement gives resolved, then `catalog.services.grants`
called, which checks, writes and records as for /api/grants/. Nothing here decides who may
do what; a statement naming several privileges is one transaction."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from django.conf import settings
from django.db import transaction

from catalog import access, permissions
from catalog.core.access import MANAGE
from catalog.core.errors import InvalidInput, NotFound
from catalog.core.inputs import check_name, check_namespace_name
from catalog.services import grants
from refresh.core import grant_statements as gs
from refresh.models import MaterializedTable

#: SHOW GRANTS' columns (catalog.permissions reads its rows, as the pages' panel does).
COLUMNS = permissions.COLUMNS
#: The most rows one SHOW GRANTS answers.
MAX_ROWS = 1000
#: What a principal's kind is called in statements and in SHOW GRANTS' rows.
_SHOWN_KIND = {"user": "user", "group": "group", "client": "credential"}


def run(
    statement: gs.GrantStatement,
    *,
    namespace: str | None,
    actor: Any,
    result: Any,
    planning: bool = False,
) -> Any:
    """Run one statement; `result` (a console StatementResult) gets its message and rows.
    `planning`: the message says what it would do (the caller rolls it back)."""
    if isinstance(statement, gs.ShowGrants):
        return _show(statement, namespace=namespace, actor=actor, result=result)
    where = _where(statement.securable, namespace)
    _check_kind(statement.securable, where, actor)
    whom = {"principal_type": statement.principal.kind, "principal": statement.principal.name}
    granting = isinstance(statement, gs.GrantPrivileges)
    changed, unchanged = [], []
    with transaction.atomic():
        for privilege in statement.privileges:
            if granting:
                _, created = grants.grant(privilege=privilege, actor=actor, **whom, **where)
                (changed if created else unchanged).append(privilege)
            else:
                grants.revoke(privilege=privilege, actor=actor, **whom, **where)
                changed.append(privilege)
    principal = f"{_SHOWN_KIND[statement.principal.kind]} {statement.principal.name}"
    on = _label(statement.securable.kind, where)
    if granting:
        verb = "Would grant" if planning else "Granted"
        parts = [f"{verb} {', '.join(changed)} on {on} to {principal}"] if changed else []
        if unchanged:
            parts.append(f"{', '.join(unchanged)} held already, unchanged")
        result.message = "; ".join(parts)
    else:
        verb = "Would revoke" if planning else "Revoked"
        result.message = f"{verb} {', '.join(changed)} on {on} from {principal}"
    return result


def plan(statement: gs.GrantStatement, *, namespace: str | None, actor: Any) -> list[str]:
    """What the statement would do, with every check it would meet, nothing kept: it runs
    in a transaction that is rolled back. Refusals are CatalogErrors."""
    if isinstance(statement, gs.ShowGrants):
        return ["reads only"]
    return [rolled_back(run, statement, namespace=namespace, actor=actor)]


def rolled_back(
    runner: Callable[..., Any], statement: Any, *, namespace: str | None, actor: Any
) -> str:
    """The message of `runner(statement, ..., planning=True)`, run in a transaction that is
    rolled back: every check met, nothing kept (the console's dry runs of grants and of
    policies)."""
    with transaction.atomic():
        done = runner(
            statement,
            namespace=namespace,
            actor=actor,
            result=SimpleNamespace(message="", table=None),
            planning=True,
        )
        transaction.set_rollback(True)
    return done.message


# -- names -------------------------------------------------------------------------------


def _where(securable: gs.Securable, namespace: str | None) -> dict[str, Any]:
    """The service's securable arguments for what the statement names."""
    parts = list(securable.name)
    if securable.kind == "catalog":
        if parts and parts != [settings.CATALOG_NAME]:
            raise NotFound(
                f"No catalog {parts[0][:100]!r}: this one is {settings.CATALOG_NAME!r}",
                field="securable",
            )
        return {"securable_type": "catalog"}
    if len(parts) > 1 and parts[0] == settings.CATALOG_NAME:
        parts = parts[1:]
    # Names as the catalog accepts them (no '.' inside a level, bounded), before any lookup.
    if securable.kind == "namespace":
        return {
            "securable_type": "namespace",
            "namespace": check_namespace_name(parts, field="securable"),
        }
    name = check_name(parts[-1], field="securable")
    if len(parts) == 1:
        if not namespace:
            raise InvalidInput(
                f"No namespace for {name[:100]!r}: qualify the name (namespace.name) or "
                "choose a namespace",
                field="namespace",
            )
        return {"securable_type": "object", "namespace": namespace, "name": name}
    ns = check_namespace_name(parts[:-1], field="securable")
    return {"securable_type": "object", "namespace": ns, "name": name}


def _label(kind: str, where: dict[str, Any]) -> str:
    if kind == "catalog":
        return "the catalog"
    if kind == "namespace":
        return f"namespace {where['namespace']}"
    return f"{kind} {where['namespace']}.{where['name']}"


def _check_kind(securable: gs.Securable, where: dict[str, Any], actor: Any) -> Any:
    """The service's target, when it is of the kind the statement says: TABLE names a
    table (a materialized or attached one too), VIEW a view, MATERIALIZED TABLE a
    materialized table. One the actor may not see is missing (the service's error)."""
    target = grants.find_securable(
        securable_type=where["securable_type"],
        namespace=where.get("namespace"),
        name=where.get("name"),
        who=access.Principal(actor),
    )
    obj = target.obj
    if obj is None:
        return target
    materialized = MaterializedTable.objects.filter(table_id=obj.pk).exists()
    actual = "view" if obj.kind == "view" else "materialized table" if materialized else "table"
    fits = securable.kind == actual or (securable.kind == "table" and actual != "view")
    if not fits:
        word = actual.upper()
        raise InvalidInput(
            f"{target.label} is a {actual}, not a {securable.kind}: write {word} {target.label}",
            field="securable",
        )
    return target


# -- SHOW GRANTS -------------------------------------------------------------------------


def _show(statement: gs.ShowGrants, *, namespace: str | None, actor: Any, result: Any) -> Any:
    """Every grant that applies to the securable (its own, and those on the namespaces
    above it and on the catalog, with where each is inherited from) and its owners, to
    whoever may manage it; to others, only the grants they may list (their own). With a
    principal, that principal's grants."""
    who = access.Principal(actor)
    rows = permissions.grants()
    target = None
    if statement.securable is not None:
        where = _where(statement.securable, namespace)
        target = _check_kind(statement.securable, where, actor)
        rows = rows.filter(permissions.applying_to(target))
    if statement.principal is not None:
        rows = rows.filter(**_principal_rows(statement.principal, who))
    managing = target is not None and access.may(who, MANAGE, target.securable)
    if not managing:
        rows = access.visible_grants(who, rows)
    found = list(rows.order_by("id")[: MAX_ROWS + 1])
    shown = [permissions.row(grant, target) for grant in found[:MAX_ROWS]]
    if managing and statement.principal is None:
        shown = permissions.owners(target) + shown
    shown.sort(key=permissions.order)
    result.columns = list(COLUMNS)
    result.rows = shown
    count = f"{len(shown)} row{'' if len(shown) == 1 else 's'}"
    on = f" on {_label(statement.securable.kind, where)}" if target is not None else ""
    result.message = count + on
    if len(found) > MAX_ROWS:
        result.message += f"; the first {MAX_ROWS} only: name a securable or a principal"
    return result


def _principal_rows(principal: gs.Principal, who: access.Principal) -> dict[str, Any]:
    whom = grants.find_principal(principal_type=principal.kind, principal=principal.name)
    client = whom.get("client")
    if client is not None and not who.superuser and client.user_id != getattr(who.user, "pk", 0):
        # Another user's credential is not theirs to look into: answered as a missing one.
        raise InvalidInput(f"No engine credential {principal.name[:100]!r}", field="principal")
    return whom

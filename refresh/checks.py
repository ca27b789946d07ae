"""What the console's statements, the pipelines and the materialized tables' API ask
`catalog.access` before they act, for an actor (a user; the console runs on a worker too,
where there is no request): the materialized-table side of `catalog.checks`.

What the actor may not see answers exactly as what does not exist (the same exception, so
the same status and body); what it may see but not change is a 403 naming the privilege it
lacks. The actor's grants are read once (`access.for_user` keeps them on the user object for
the request or the job)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from catalog import access, policies
from catalog import checks as catalog_checks
from catalog.core.access import READ_METADATA, WRITE_DATA
from catalog.core.errors import Forbidden, InvalidInput
from catalog.models import CatalogObject
from refresh import selectors
from refresh.models import MaterializedTable, RefreshRun


def principal(actor: Any) -> access.Principal:
    return access.for_user(actor)


def holds_anything(actor: Any) -> None:
    """Forbidden unless the actor holds a privilege somewhere (a script's first gate)."""
    if not principal(actor).holds_anything():
        raise Forbidden("You hold no privilege in this catalog: ask its administrators for a grant")


def namespace(actor: Any, name: str, privilege: str | None = None) -> None:
    """The namespace must be one the actor sees (else the missing namespace's error) and,
    given `privilege`, one it holds there (else 403)."""
    catalog_checks.namespace_of(principal(actor), name, privilege)


def table(actor: Any, mt: MaterializedTable, privilege: str) -> None:
    """The actor must see `mt` (else the missing table's error) and hold `privilege` on it
    (else 403)."""
    who = principal(actor)
    ns, name = mt.table.namespace.name, mt.table.name
    held = who.privileges(access.of_object(mt.table))
    if READ_METADATA not in held:
        raise selectors.NoSuchMaterializedTable(
            f"Materialized table does not exist: {ns}.{name}", field="name"
        )
    if privilege not in held:
        raise catalog_checks.refused(who, privilege, f"materialized table {ns}.{name}")


def materialized_table(actor: Any, ns: str, name: str, privilege: str) -> MaterializedTable:
    mt = selectors.get_materialized_table(ns, name)
    table(actor, mt, privilege)
    return mt


def data_change_target(actor: Any, ns: str, name: str) -> MaterializedTable:
    """The target of a console UPDATE, DELETE or MERGE: a materialized table the actor
    holds write_data on. Whatever the object is, one the actor may see but not write is a
    403 naming write_data (docs/security.md), one it may not see answers as a missing
    materialized table, and one it may write that is not a materialized table is a 400:
    the console changes the rows of materialized tables only."""
    try:
        mt = selectors.get_materialized_table(ns, name)
    except selectors.NoSuchMaterializedTable:
        found = (
            CatalogObject.objects.select_related("namespace")
            .filter(namespace__name=ns, name=name)
            .first()
        )
        if found is None:
            raise
        who = principal(actor)
        held = who.privileges(access.of_object(found))
        if READ_METADATA not in held:
            raise
        kind = found.kind
        if WRITE_DATA not in held:
            raise catalog_checks.refused(who, WRITE_DATA, f"{kind} {ns}.{name}") from None
        raise InvalidInput(
            f"UPDATE, DELETE and MERGE in the console change materialized tables only; "
            f"{ns}.{name} is a {kind}: change its rows with an engine through the catalog",
            field="name",
        ) from None
    table(actor, mt, WRITE_DATA)
    return mt


def run(actor: Any, run_id: int | str) -> RefreshRun:
    """A refresh run the actor may see: one it asked for, one of a table it sees, or (its
    table dropped) one of any table to a reader of the whole catalog."""
    found = selectors.get_run(run_id)
    mt = found.materialized_table
    if found.requested_by_id is not None and found.requested_by_id == getattr(actor, "pk", None):
        return found
    securable = access.CATALOG if mt is None else access.of_object(mt.table)
    if not access.may(principal(actor), READ_METADATA, securable):
        raise selectors.NoSuchJob(f"Job does not exist: {run_id}", field="job_id")
    return found


def visible(actor: Any, queryset: QuerySet, *, prefix: str = "table__") -> QuerySet:
    """The rows of `queryset` (materialized tables, or rows reaching a catalog object
    through `prefix`) whose object the actor may see, filtered in the query."""
    condition = access.objects_condition(principal(actor), prefix=prefix)
    return queryset if condition is None else queryset.filter(condition)


def sample_withheld(actor: Any, mt: MaterializedTable) -> str | None:
    """Why a verification's sample rows (and their values) are not shown to `actor`: a row
    filter or column mask of the materialized table applies to them (None: they are shown).
    The rows were recomputed under the owner's policies, not the reader's: they could show
    rows the reader's filter hides and values their masks hide."""
    if actor is None:
        return "No reader is known: a verification's sample rows are shown only to a reader."
    return policies.read_refusal(principal(actor), mt.table, "verification's sample rows")

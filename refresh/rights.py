"""Materialized tables run with their owner's rights: a refresh, a rebuild, a micro-batch or
a verification reads the table's sources only while the owner of its table (the catalog
object's `owner`) may read each of them (read_data, decided by catalog.access as for any
query). Every path that reads sources asks `check_owner_reads` first, before Spark reads
anything; a refusal is the run's failure and counts toward the automatic suspension.

A superuser owner holds everything (no query for grants); a table without an owner (made
before owners were kept, or its owner deleted) reads what its query names, as before
grants; an inactive owner holds nothing. Its sources are those its definition names (a
view as itself, as the console judges a query: the view's SQL is read with the view's
rights, not the reader's).

Its definition (the query text, SHOW CREATE) is shown only to those who may read every
source: `hidden_definitions`, asked by the API, the pages and the console; one who may read
the table but not a source sees its rows, not the query that says how they were made."""

from __future__ import annotations

from collections.abc import Iterable

from django.contrib.auth import get_user_model

from catalog import access
from catalog.core.access import READ_DATA, READ_METADATA
from catalog.core.errors import CatalogError, SqlError
from catalog.core.policies import TablePolicy
from catalog.models import CatalogObject
from catalog.roles import refused_reads
from refresh.models import MaterializedTable


class OwnerLacksPrivilege(CatalogError):
    """The table's owner may not read one of its sources: the table cannot be refreshed or
    verified until a grant gives it back or the table gets another owner. HTTP 409: the
    table's state, not the request, is what is wrong."""

    status = 409


def check_owner_reads(mt: MaterializedTable, *, sources: Iterable[str] | None = None) -> None:
    """OwnerLacksPrivilege naming the sources, the privilege and the owner unless the owner
    of `mt`'s table may read every one of `sources` ("ns.name"; the table's current ones by
    default). The owner is read from the database each time (a transfer or a revoke counts
    at the next call): at most three small queries, one of them the owner's grants."""
    names = list(mt.sources if sources is None else sources)
    owner_id = CatalogObject.objects.filter(pk=mt.table_id).values_list("owner_id", flat=True)
    owner = get_user_model().objects.filter(pk__in=owner_id).first()
    if owner is None or not names:
        return
    principal = access.Principal(owner)
    refused = refused_reads(principal, [tuple(name.rsplit(".", 1)) for name in names])
    if not refused:
        return
    what = (
        f"{refused[0]}, a source"
        if len(refused) == 1
        else f"{', '.join(refused[:-1])} and {refused[-1]}, sources"
    )
    inactive = "" if principal.active else " (an inactive user holds no privilege)"
    raise OwnerLacksPrivilege(
        f"The owner {owner.get_username()}{inactive} lacks {READ_DATA} on {what} of "
        f"{mt.table.namespace.name}.{mt.table.name}: grant it {READ_DATA} again, or give the "
        "table an owner who may read its sources"
    )


def owner_policies(mt: MaterializedTable) -> list[TablePolicy]:
    """The row filters and masks that apply to the owner of `mt`'s table, bound to the
    owner (catalog.policies): its refreshes read its sources through them, so the table
    holds what its owner may see. None for a table without an owner (as its reads)."""
    from catalog import policies

    owner_id = CatalogObject.objects.filter(pk=mt.table_id).values_list("owner_id", flat=True)
    owner = get_user_model().objects.filter(pk__in=owner_id).first()
    if owner is None:
        return []
    return policies.for_principal(access.Principal(owner))


def read_through_policies(sources: Iterable[str], found: Iterable[TablePolicy]) -> str:
    """The first of `sources` ("ns.name") that one of the policies `found` covers, or ''."""
    covered = {policy.label for policy in found}
    return next((source for source in sorted(sources) if source in covered), "")


def check_owner_streams(mt: MaterializedTable) -> None:
    """OwnerLacksPrivilege unless a stream may read the sources of `mt`: a source whose row
    filter or masks apply to the table's owner can only be read through them by a batch
    refresh (Spark applies them to a query's plan, not to a stream's micro-batches)."""
    blocked = read_through_policies(mt.sources, owner_policies(mt))
    if blocked:
        raise OwnerLacksPrivilege(
            f"The owner of {mt.table.namespace.name}.{mt.table.name} reads source {blocked} "
            "through its row filter or masks, which a stream cannot apply: refresh the "
            "table on a schedule (REFRESH_MODE = FULL) or ask for an exemption"
        )


def check_version_reads(mt: MaterializedTable, version_id: int) -> None:
    """`check_owner_reads` for the sources of definition `version_id` (a rebuild's, a
    verified snapshot's)."""
    sources = mt.versions.filter(version_id=version_id).values_list("sources", flat=True)
    check_owner_reads(mt, sources=sources.first() or [])


class SourceNotReadable(SqlError):
    """Whoever defines a materialized table may see one of its sources but not read its
    rows: HTTP 403, at the source's line and column in the query."""

    status = 403
    iceberg_type = "ForbiddenException"


def check_source(
    principal: access.Principal,
    found: CatalogObject,
    qualified: str,
    *,
    line: int | None = None,
    column: int | None = None,
) -> CatalogObject | None:
    """A source of a definition being written (CREATE, ALTER ... AS, a rollback) by
    `principal`: the object when it may read it (read_data); None when it may not even see
    it, so that the caller answers as for a source that does not exist; SourceNotReadable
    naming the source and the privilege otherwise. One who defines a table must read what
    it reads: the table then runs with its owner's rights, and its rows show the sources'."""
    namespace = qualified.rpartition(".")[0]
    held = principal.privileges(access.object_ref(found.pk, namespace, found.owner_id))
    if READ_METADATA not in held:
        return None
    if READ_DATA not in held:
        name = getattr(principal.user, "username", "?")
        raise SourceNotReadable(
            f"{name} lacks the {READ_DATA} privilege on {qualified}, a source of the query: "
            "one who defines a materialized table must be able to read its sources",
            line=line,
            column=column,
            field="query",
        )
    return found


#: What stands in for a definition one may not see.
DEFINITION_HIDDEN = (
    "Hidden: the query reads sources you may not read (read_data on every source is needed "
    "to see it)."
)


def hidden_definitions(
    principal: access.Principal, definitions: Iterable[Iterable[str]]
) -> list[bool]:
    """For each definition's sources ("ns.name" ...), whether its text is hidden from the
    principal (it lacks read_data on one of them): one query for the objects' rows and the
    principal's grants (cached per request by `access.principal_of`)."""
    definitions = [list(sources) for sources in definitions]
    names = dict.fromkeys(name for sources in definitions for name in sources)
    refused = set(refused_reads(principal, [tuple(name.rsplit(".", 1)) for name in names]))
    return [any(name in refused for name in sources) for sources in definitions]


def definition_hidden(principal: access.Principal, sources: Iterable[str]) -> bool:
    """Whether one definition's text is hidden from the principal."""
    return hidden_definitions(principal, [sources])[0]


def table_query_hidden(principal: access.Principal, object_id: int) -> bool:
    """Whether the query text in the table properties of the materialized table whose
    table is `object_id` is hidden from the principal (catalog.redaction asks, for the
    Iceberg REST catalog's answers and the table's page and API): no query for a reader of
    the whole catalog; else one for the table's sources and one for theirs and the grants."""
    if access.may(principal, READ_DATA, access.CATALOG):
        return False
    sources = MaterializedTable.objects.filter(table_id=object_id).values_list("sources", flat=True)
    found = sources.first()
    return found is not None and definition_hidden(principal, found)

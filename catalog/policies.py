"""Which row filters and column masks apply to whom: the reads of catalog.policy_models.

Semantics (docs/security.md): a table's row filter and each of its column masks apply to
every reader — its owner, its managers and superusers included, as Databricks applies them
— except the members of the groups the policy names as exempt. What applies reaches Spark
bound to the reader (`catalog.core.policies.TablePolicy`). Engines are another matter:
they read the files themselves, so a table with a policy that applies to a principal is
loaded through the REST catalog only by one holding `manage` on it (who could drop the
policy anyway); everyone else gets a 403 naming the policy (`engine_refusal`), and the
app's previews and file lists refuse alike (`read_refusal`).

Cheap: a table's policies are read in one query (its filter's and its masks' rows, their
exempt groups joined in), the principal's groups in one more, memoized on the principal,
which lives for one request. Nothing is cached across requests."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Value

from catalog import access
from catalog.core import policies as core
from catalog.core.access import MANAGE
from catalog.core.errors import Forbidden
from catalog.core.policies import TablePolicy
from catalog.models import CatalogObject, ColumnMask, RowFilter

_GROUPS = "_policy_groups"


def groups_of(principal: access.Principal) -> frozenset[str]:
    """The names of the groups the principal's user belongs to (read once per principal)."""
    found = getattr(principal, _GROUPS, None)
    if found is None:
        user = principal.user
        found = frozenset()
        if principal.active and getattr(user, "pk", None) is not None:
            found = frozenset(user.groups.values_list("name", flat=True))
        setattr(principal, _GROUPS, found)
    return found


@dataclass(frozen=True)
class Rule:
    """One policy as kept: its kind, column (masks), SQL and exempt groups."""

    kind: str
    column: str | None
    expression: str
    exempt: frozenset[str]


def _rules(table_ids: Iterable[int] | None) -> dict[int, list[Rule]]:
    """Every policy of these tables (of every table for None), by table id, in one query:
    the row filters' and the masks' rows, each with one of its exempt groups."""
    found: dict[int, dict[tuple[str, str | None], tuple[str, set[str]]]] = defaultdict(dict)
    filters = RowFilter.objects.order_by()
    masks = ColumnMask.objects.order_by()
    if table_ids is not None:
        wanted = list(table_ids)
        filters, masks = filters.filter(table_id__in=wanted), masks.filter(table_id__in=wanted)
    rows = filters.values_list("table_id", "expression", "exempt_groups__name", Value("")).union(
        masks.values_list("table_id", "expression", "exempt_groups__name", "column"), all=True
    )
    for table_id, expression, group, column in rows:
        key = (core.MASK, column) if column else (core.ROW_FILTER, None)
        _, groups = found[table_id].setdefault(key, (expression, set()))
        if group is not None:
            groups.add(group)
    return {
        table_id: [
            Rule(kind, column, expression, frozenset(groups))
            for (kind, column), (expression, groups) in sorted(
                rules.items(), key=lambda item: (item[0][0] != core.ROW_FILTER, item[0][1] or "")
            )
        ]
        for table_id, rules in found.items()
    }


def _bound(
    principal: access.Principal, table: tuple[str, ...], rules: list[Rule]
) -> TablePolicy | None:
    """The rules that apply to the principal, bound to it; None when none does."""
    groups = groups_of(principal)
    user = getattr(principal.user, "username", "") or ""
    row_filter, masks = None, []
    for rule in rules:
        if rule.exempt & groups:
            continue
        bound = core.bind(rule.expression, user=user, groups=groups)
        if rule.kind == core.ROW_FILTER:
            row_filter = bound
        else:
            masks.append((rule.column, bound))
    if row_filter is None and not masks:
        return None
    return TablePolicy(table=table, row_filter=row_filter, masks=tuple(masks))


def _identifier(obj: CatalogObject) -> tuple[str, ...]:
    return (*obj.namespace.name.split("."), obj.name)


def applies(principal: access.Principal, obj: CatalogObject) -> TablePolicy | None:
    """The table's policies that apply to the principal, bound; None when none does."""
    rules = _rules([obj.pk]).get(obj.pk)
    return _bound(principal, _identifier(obj), rules) if rules else None


def for_principal(principal: access.Principal) -> list[TablePolicy]:
    """Every table's policies that apply to the principal, bound (for the console's Spark,
    which puts them under whatever the reader's query reads)."""
    rules = _rules(None)
    if not rules:
        return []
    tables = CatalogObject.objects.filter(pk__in=list(rules)).values_list(
        "pk", "namespace__name", "name"
    )
    found = []
    for table_id, namespace, name in sorted(tables, key=lambda row: (row[1], row[2])):
        bound = _bound(principal, (*namespace.split("."), name), rules[table_id])
        if bound is not None:
            found.append(bound)
    return found


def protected(obj: CatalogObject) -> bool:
    """Whether the table has a row filter or a column mask."""
    return (
        RowFilter.objects.filter(table_id=obj.pk).exists()
        or ColumnMask.objects.filter(table_id=obj.pk).exists()
    )


def engine_refusal(
    principal: access.Principal, obj: CatalogObject | None = None, **known: Any
) -> str | None:
    """Why an engine may not load the table through the REST catalog (None: it may). It
    may when no policy of the table applies to the principal, or when the principal holds
    manage on it. `known` gives what a caller has read already instead of `obj`:
    object_id, namespace, name, owner_id."""
    if obj is not None:
        known = {
            "object_id": obj.pk,
            "namespace": obj.namespace.name,
            "name": obj.name,
            "owner_id": obj.owner_id,
        }
    policy = _applying(principal, known)
    if policy is None:
        return None
    user = getattr(principal.user, "username", "?")
    return (
        f"Forbidden: {policy.describe()} applies to {user}, and engines read a table's files "
        "themselves, around it. Read the table in Lakeview's console (which applies it), or "
        "through a view its managers define; or ask them to exempt one of your groups."
    )


def read_refusal(principal: access.Principal, obj: CatalogObject, what: str) -> str | None:
    """Why the app shows the principal no `what` ("preview", "file list") of the table:
    a policy of it applies to them (None: it shows it). Holders of manage are not spared:
    a preview is read by pyiceberg, which does not apply policies; the console does."""
    rules = _rules([obj.pk]).get(obj.pk)
    policy = _bound(principal, _identifier(obj), rules) if rules else None
    if policy is None:
        return None
    return (
        f"{policy.describe()[0].upper()}{policy.describe()[1:]} applies to you: the "
        f"{what} would show what it hides. Query the table in the console, which applies it."
    )


def _applying(principal: access.Principal, known: dict[str, Any]) -> TablePolicy | None:
    rules = _rules([known["object_id"]]).get(known["object_id"])
    if not rules:
        return None
    securable = access.object_ref(known["object_id"], known["namespace"], known["owner_id"])
    if access.may(principal, MANAGE, securable):
        return None
    return _bound(principal, (*known["namespace"].split("."), known["name"]), rules)


# -- what the table's page and the API show ---------------------------------------------------


@dataclass(frozen=True)
class Shown:
    """One policy as the table's page and GET .../policies show it."""

    kind: str
    column: str | None
    expression: str
    exempt_groups: list[str]
    created_at: datetime
    created_by: str
    updated_at: datetime
    updated_by: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "expression": self.expression,
            "exempt_groups": self.exempt_groups,
            "created_at": self.created_at,
            "created_by": self.created_by,
            "updated_at": self.updated_at,
            "updated_by": self.updated_by,
            **({"column": self.column} if self.kind == core.MASK else {}),
        }


def described(policy: RowFilter | ColumnMask) -> Shown:
    """One policy as shown (its exempt groups read, or prefetched)."""
    kind = core.MASK if isinstance(policy, ColumnMask) else core.ROW_FILTER

    def name(user: Any) -> str:
        return user.get_username() if user is not None else ""

    return Shown(
        kind=kind,
        column=getattr(policy, "column", None),
        expression=policy.expression,
        exempt_groups=sorted(group.name for group in policy.exempt_groups.all()),
        created_at=policy.created_at,
        created_by=name(policy.created_by),
        updated_at=policy.updated_at,
        updated_by=name(policy.updated_by),
    )


def shown(obj: CatalogObject) -> dict[str, Any]:
    """The table's row filter (None) and masks, for its page and the API."""
    related = ("created_by", "updated_by")
    row_filter = (
        RowFilter.objects.filter(table_id=obj.pk)
        .select_related(*related)
        .prefetch_related("exempt_groups")
        .first()
    )
    masks = (
        ColumnMask.objects.filter(table_id=obj.pk)
        .select_related(*related)
        .prefetch_related("exempt_groups")
        .order_by("column")
    )
    return {
        "row_filter": described(row_filter) if row_filter is not None else None,
        "masks": [described(mask) for mask in masks],
    }


def changed_since(
    principal: access.Principal, reads: Iterable[tuple[str, ...]], since: datetime | None
) -> str:
    """The first table of `reads` (namespace levels..., name) whose row filter or a mask
    was set or changed after `since` and applies to the principal ('' when none): a result
    kept from before was not read through it. Two small queries (none when no table of the
    catalog has a policy newer than `since`)."""
    newer_filters = RowFilter.objects.all()
    newer_masks = ColumnMask.objects.all()
    if since is not None:
        newer_filters = newer_filters.filter(updated_at__gt=since)
        newer_masks = newer_masks.filter(updated_at__gt=since)
    changed = set(newer_filters.values_list("table_id", flat=True)) | set(
        newer_masks.values_list("table_id", flat=True)
    )
    if not changed:
        return ""
    wanted = {(".".join(read[:-1]), read[-1]) for read in reads if len(read) > 1}
    tables = CatalogObject.objects.filter(pk__in=changed).select_related("namespace")
    for obj in sorted(tables, key=lambda o: (o.namespace.name, o.name)):
        if (obj.namespace.name, obj.name) in wanted and applies(principal, obj) is not None:
            return f"{obj.namespace.name}.{obj.name}"
    return ""


def check_unchanged(
    principal: access.Principal, reads: Iterable[Iterable[str]], since: datetime | None, what: str
) -> None:
    """Forbidden when a table of `reads` had a row filter or mask set or changed after
    `since` that applies to the principal: `what` (a query's kept result) was not read
    through it, and is read again instead."""
    changed = changed_since(principal, [tuple(read) for read in reads], since)
    if changed:
        raise Forbidden(
            f"The row filter or a mask of {changed} changed after {what} ran; run it again "
            "to read its rows as the policies now say"
        )

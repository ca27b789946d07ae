"""Grants, revokes and changes of owner: one transaction each, each recorded as a
GrantChange row (who, when, what).

Who may: a grant to a user or a group on a securable, or its revoke, needs MANAGE there
(owners hold it); a grant to an engine credential narrows that credential, and is its
user's to make (or a superuser's); an owner is changed by a superuser. A namespace or
object the actor may not see is answered as a missing one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict, Unpack

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction

from catalog import access, selectors
from catalog.core.access import CREATE, GRANTABLE, GRANTABLE_ON_OBJECTS, MANAGE, OWN
from catalog.core.errors import Forbidden, InvalidInput, NotFound
from catalog.models import CatalogClient, CatalogObject, Grant, GrantChange, Namespace

PRINCIPAL_TYPES = ("user", "group", "client")
SECURABLE_TYPES = ("catalog", "namespace", "object")


@dataclass(frozen=True)
class Target:
    """A securable as found: its kind, its row (None for the catalog) and its name."""

    type: str
    namespace: Namespace | None
    obj: CatalogObject | None

    @property
    def label(self) -> str:
        if self.obj is not None:
            return f"{self.obj.namespace.name}.{self.obj.name}"
        return self.namespace.name if self.namespace is not None else "catalog"

    @property
    def securable(self) -> access.Securable:
        if self.obj is not None:
            return access.of_object(self.obj)
        if self.namespace is not None:
            return access.namespace(self.namespace.name)
        return access.CATALOG

    def rows(self) -> dict[str, Any]:
        return {"namespace": self.namespace if self.obj is None else None, "object": self.obj}


def find_securable(
    *, securable_type: str, namespace: str | None, name: str | None, who: access.Principal
) -> Target:
    """The securable named, if the principal may see it (else the missing one's error)."""
    if securable_type == "catalog":
        return Target("catalog", None, None)
    if securable_type not in SECURABLE_TYPES:
        raise InvalidInput(
            f"securable_type must be one of {', '.join(SECURABLE_TYPES)}", field="securable_type"
        )
    if not namespace:
        raise InvalidInput(f"A {securable_type} grant names its namespace", field="namespace")
    if securable_type == "namespace":
        if not who.sees_namespace(namespace):
            raise selectors.no_such_namespace(namespace)
        return Target("namespace", selectors.get_namespace(namespace), None)
    if not name:
        raise InvalidInput("An object grant names the object", field="name")
    obj = (
        CatalogObject.objects.select_related("namespace")
        .filter(namespace__name=namespace, name=name)
        .first()
    )
    if obj is None or not access.may(who, "read_metadata", access.of_object(obj)):
        raise NotFound(f"No table or view {namespace}.{name}", field="name")
    return Target("object", obj.namespace, obj)


def find_principal(*, principal_type: str, principal: str) -> dict[str, Any]:
    """{"user": ...}, {"group": ...} or {"client": ...}: the Grant columns for it."""
    if principal_type == "user":
        user = get_user_model().objects.filter(username=principal).first()
        if user is None:
            raise InvalidInput(f"No user named {principal!r}", field="principal")
        return {"user": user}
    if principal_type == "group":
        group = Group.objects.filter(name=principal).first()
        if group is None:
            raise InvalidInput(f"No group named {principal!r}", field="principal")
        return {"group": group}
    if principal_type == "client":
        client = CatalogClient.objects.select_related("user").filter(client_id=principal).first()
        if client is None:
            raise InvalidInput(f"No engine credential {principal!r}", field="principal")
        return {"client": client}
    raise InvalidInput(
        f"principal_type must be one of {', '.join(PRINCIPAL_TYPES)}", field="principal_type"
    )


def _check_privilege(privilege: str, target: Target) -> None:
    if privilege == OWN:
        raise InvalidInput(
            "Ownership is transferred, not granted (POST /api/grants/owner)", field="privilege"
        )
    allowed = GRANTABLE_ON_OBJECTS if target.obj is not None else GRANTABLE
    if privilege not in allowed:
        if privilege == CREATE:
            raise InvalidInput(
                "create is granted on the catalog or a namespace, not on one object",
                field="privilege",
            )
        raise InvalidInput(
            f"privilege must be one of {', '.join(allowed)}, not {privilege!r}", field="privilege"
        )


def _check_may_grant(who: access.Principal, whom: dict[str, Any], target: Target) -> None:
    actor = who.user
    client = whom.get("client")
    if client is not None:
        # Narrowing only ever takes away from the credential's user, so it is theirs to do.
        if not (who.superuser or client.user_id == getattr(actor, "pk", None)):
            raise InvalidInput(f"No engine credential {client.client_id!r}", field="principal")
        return
    if not access.may(who, MANAGE, target.securable):
        name = getattr(actor, "username", "?")
        raise Forbidden(
            f"Forbidden: {name} lacks the manage privilege on {target.type} {target.label}"
        )


def _principal_label(whom: dict[str, Any]) -> tuple[str, str]:
    kind, row = next(iter(whom.items()))
    label = {
        "user": lambda: row.get_username(),
        "group": lambda: row.name,
        "client": lambda: row.client_id,
    }[kind]()
    return kind, label


def _record(
    *, actor: Any, action: str, privilege: str, whom: dict[str, Any], target: Target, **extra
) -> GrantChange:
    kind, label = _principal_label(whom)
    return GrantChange.objects.create(
        actor=actor if getattr(actor, "pk", None) else None,
        actor_name=getattr(actor, "username", "") or "",
        action=action,
        privilege=privilege,
        principal_type=kind,
        principal_name=label,
        securable_type=target.type,
        securable_name=target.label,
        object_uuid=target.obj.uuid if target.obj is not None else None,
        **extra,
    )


class Grantee(TypedDict):
    """To whom and on what a grant or a revoke is: the keywords both take."""

    principal_type: str
    principal: str
    securable_type: str
    namespace: NotRequired[str | None]
    name: NotRequired[str | None]


def _resolved(
    actor: Any, to: Grantee, privilege: str | None = None
) -> tuple[dict[str, Any], Target]:
    """The principal's Grant columns and the securable, once the actor may grant there
    (and, given a privilege, once it may be granted there)."""
    who = access.Principal(actor)
    target = find_securable(
        securable_type=to["securable_type"],
        namespace=to.get("namespace"),
        name=to.get("name"),
        who=who,
    )
    if privilege is not None:
        _check_privilege(privilege, target)
    whom = find_principal(principal_type=to["principal_type"], principal=to["principal"])
    _check_may_grant(who, whom, target)
    return whom, target


def grant(*, privilege: str, actor: Any, **to: Unpack[Grantee]) -> tuple[Grant, bool]:
    """Grant `privilege`; returns the grant and whether it is new (granting what is held
    already changes nothing)."""
    whom, target = _resolved(actor, to, privilege)
    with transaction.atomic():
        existing = Grant.objects.filter(privilege=privilege, **whom, **_exact(target)).first()
        if existing is not None:
            return existing, False
        created = Grant.objects.create(
            privilege=privilege,
            granted_by=actor if getattr(actor, "pk", None) else None,
            **whom,
            **target.rows(),
        )
        client = whom.get("client")
        if client is not None and not client.narrowed:
            CatalogClient.objects.filter(pk=client.pk).update(narrowed=True)
        _record(actor=actor, action="grant", privilege=privilege, whom=whom, target=target)
    return created, True


def _exact(target: Target) -> dict[str, Any]:
    """The securable columns of exactly this grant, not one above or below it."""
    if target.obj is not None:
        return {"object": target.obj, "namespace__isnull": True}
    if target.namespace is not None:
        return {"namespace": target.namespace, "object__isnull": True}
    return {"namespace__isnull": True, "object__isnull": True}


def revoke(*, privilege: str, actor: Any, **to: Unpack[Grantee]) -> None:
    """Revoke a grant made on exactly this securable (one inherited from above is revoked
    where it was granted). It takes effect at the principal's next request."""
    whom, target = _resolved(actor, to)
    with transaction.atomic():
        deleted, _ = Grant.objects.filter(privilege=privilege, **whom, **_exact(target)).delete()
        if not deleted:
            kind, label = _principal_label(whom)
            raise NotFound(
                f"No grant of {privilege} to {kind} {label} on {target.type} {target.label}",
                field="privilege",
            )
        _record(actor=actor, action="revoke", privilege=privilege, whom=whom, target=target)


def transfer_owner(
    *,
    securable_type: str,
    namespace: str | None = None,
    name: str | None = None,
    owner: str,
    actor: Any,
) -> Target:
    """Make `owner` (a username) the owner of a namespace or an object: a superuser's to
    do."""
    who = access.Principal(actor)
    if not who.superuser:
        raise Forbidden("Forbidden: only an administrator (a superuser) transfers ownership")
    if securable_type == "catalog":
        raise InvalidInput(
            "The catalog has no owner: administrators hold it", field="securable_type"
        )
    target = find_securable(securable_type=securable_type, namespace=namespace, name=name, who=who)
    new_owner = find_principal(principal_type="user", principal=owner)["user"]
    row = target.obj if target.obj is not None else target.namespace
    model = CatalogObject if target.obj is not None else Namespace
    with transaction.atomic():
        locked = model.objects.select_for_update(of=("self",)).select_related("owner")
        locked = locked.get(pk=row.pk)
        previous = locked.owner.get_username() if locked.owner is not None else ""
        model.objects.filter(pk=row.pk).update(owner=new_owner)
        _record(
            actor=actor,
            action="transfer_owner",
            privilege=OWN,
            whom={"user": new_owner},
            target=target,
            previous_owner=previous,
        )
    row.owner = new_owner
    return target

"""The database side of grants: a privilege held by a principal on a securable (`Grant`,
what catalog.access decides with) and the record of every grant, revoke and change of
owner (`GrantChange`). Importable from catalog.models, as every model of the app is."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models.functions import Coalesce
from django.utils import timezone

from catalog.core import access as core_access
from catalog.credential_models import CatalogClient


class Grant(models.Model):
    """A privilege held by one principal on one securable (catalog.access decides with it).

    The principal is a user, a Django group (every member holds it), or an engine
    credential that is narrowed (it then holds what both its own grants and its user's
    allow). The securable is the catalog (no namespace, no object), a namespace (and
    everything under it) or one object. Written by catalog.services.grants alone."""

    class Privilege(models.TextChoices):
        READ_METADATA = core_access.READ_METADATA
        READ_DATA = core_access.READ_DATA
        WRITE_DATA = core_access.WRITE_DATA
        CREATE = core_access.CREATE
        MANAGE = core_access.MANAGE

    privilege = models.CharField(max_length=16, choices=Privilege.choices)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    group = models.ForeignKey(
        "auth.Group", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    client = models.ForeignKey(
        CatalogClient, null=True, blank=True, on_delete=models.CASCADE, related_name="grants"
    )
    namespace = models.ForeignKey(
        "catalog.Namespace",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="grants",
    )
    object = models.ForeignKey(
        "catalog.CatalogObject",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="grants",
    )
    granted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    granted_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["granted_at", "id"]
        constraints = [
            models.CheckConstraint(
                condition=(
                    models.Q(user__isnull=False, group__isnull=True, client__isnull=True)
                    | models.Q(user__isnull=True, group__isnull=False, client__isnull=True)
                    | models.Q(user__isnull=True, group__isnull=True, client__isnull=False)
                ),
                name="grant_one_principal",
            ),
            models.CheckConstraint(
                condition=models.Q(namespace__isnull=True) | models.Q(object__isnull=True),
                name="grant_one_securable",
            ),
            # One row per privilege, principal and securable. NULLs are distinct in a plain
            # unique constraint, so the nullable columns are compared as 0 when absent.
            models.UniqueConstraint(
                "privilege",
                Coalesce("user", 0),
                Coalesce("group", 0),
                Coalesce("client", 0),
                Coalesce("namespace", 0),
                Coalesce("object", 0),
                name="one_grant_per_privilege",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.privilege} to {self.principal_label} on {self.securable_label}"

    @property
    def principal_type(self) -> str:
        return "user" if self.user_id else "group" if self.group_id else "client"

    @property
    def principal_label(self) -> str:
        if self.user_id:
            return self.user.get_username()
        if self.group_id:
            return self.group.name
        return self.client.client_id

    @property
    def securable_type(self) -> str:
        return "object" if self.object_id else "namespace" if self.namespace_id else "catalog"

    @property
    def securable_label(self) -> str:
        if self.object_id:
            return str(self.object)
        if self.namespace_id:
            return self.namespace.name
        return "catalog"


class GrantChange(models.Model):
    """One grant, revoke or change of owner: who did it, when, and what, in words that
    outlive the rows (a dropped object, a deleted group)."""

    class Action(models.TextChoices):
        GRANT = "grant"
        REVOKE = "revoke"
        TRANSFER = "transfer_owner"

    occurred_at = models.DateTimeField(default=timezone.now, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    #: The actor's name at the time (the account may be deleted later).
    actor_name = models.CharField(max_length=150, blank=True, default="")
    action = models.CharField(max_length=16, choices=Action.choices)
    #: The privilege granted or revoked ("own" for a change of owner).
    privilege = models.CharField(max_length=16)
    #: "user", "group" or "client", and its name (the new owner for a transfer).
    principal_type = models.CharField(max_length=8)
    principal_name = models.CharField(max_length=255)
    #: "catalog", "namespace" or "object", and its name ("sales.eu", "sales.eu.orders").
    securable_type = models.CharField(max_length=16)
    securable_name = models.TextField()
    #: An object's identity (its metadata UUID), as history keeps it.
    object_uuid = models.UUIDField(null=True, blank=True)
    #: A transfer's previous owner ("" when there was none).
    previous_owner = models.CharField(max_length=150, blank=True, default="")

    class Meta:
        ordering = ["-occurred_at", "-id"]
        # The audit by actor (catalog.audit); by name, migration 0018's own index.
        indexes = [
            models.Index(
                fields=["actor_name", "-occurred_at", "-id"], name="catalog_grant_change_actor"
            )
        ]

    def __str__(self) -> str:
        return (
            f"{self.actor_name or '?'} {self.action} {self.privilege} "
            f"{self.principal_type} {self.principal_name} on {self.securable_name}"
        )

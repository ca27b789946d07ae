"""The database side of engine credentials (the Iceberg REST protocol's client-credentials
flow): a client and its secret's hash (`CatalogClient`), the bearer tokens it was issued
(`AccessToken`), and the answers kept for its `Idempotency-Key`s (`IdempotencyKey`).
Importable from catalog.models, as every model of the app is."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class CatalogClient(models.Model):
    """Credentials for the Iceberg REST protocol's client-credentials flow.

    Engines are configured with `credential=<client_id>:<secret>`; they exchange it at
    /iceberg/v1/oauth/tokens for a bearer token. The secret is stored hashed."""

    name = models.CharField(max_length=255)
    client_id = models.CharField(max_length=64, unique=True)
    secret_hash = models.CharField(max_length=255)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    #: A narrowed client holds only what its own grants allow of its user's privileges; an
    #: unnarrowed one acts with all of them (catalog.access).
    narrowed = models.BooleanField(default=False)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.client_id})"


class AccessToken(models.Model):
    """A bearer token issued to a client; only its SHA-256 digest is stored."""

    client = models.ForeignKey(CatalogClient, on_delete=models.CASCADE, related_name="tokens")
    digest = models.CharField(max_length=64, unique=True)
    expires_at = models.DateTimeField(db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"token for {self.client}"


class IdempotencyKey(models.Model):
    """One `Idempotency-Key` of the Iceberg REST protocol, per principal (a user through one
    client): the request it was first sent with (a digest) and, once that request finished,
    its answer, which a retry with the key gets instead of doing the work again
    (catalog/iceberg_rest/idempotency.py). A row without a status is a request still in
    progress; `claim` says which one, so that only its holder may finish it. The answer is
    written in the transaction of the work it answers: a change committed always has it."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    client = models.ForeignKey(CatalogClient, on_delete=models.CASCADE, related_name="+")
    key = models.UUIDField()
    #: SHA-256 of the method, path, query and canonical body the key was first sent with.
    fingerprint = models.CharField(max_length=64)
    claim = models.UUIDField()
    claimed_at = models.DateTimeField()
    #: The end of the key's lifetime (from its first use); the hourly sweep deletes it then.
    expires_at = models.DateTimeField(db_index=True)
    status = models.PositiveSmallIntegerField(null=True, blank=True)
    #: The answer's headers that matter to a client (Content-Type, ETag).
    headers = models.JSONField(default=dict)
    body = models.BinaryField(default=b"")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["user", "client", "key"], name="catalog_idempotency_key_per_principal"
            )
        ]

    def __str__(self) -> str:
        return f"Idempotency-Key {self.key}"

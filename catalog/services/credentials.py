"""Credentials for engines: OAuth2 client credentials exchanged for bearer tokens.

Iceberg's clients (Spark, pyiceberg, Trino...) are configured with
`credential=<client_id>:<secret>` and call POST /v1/oauth/tokens; they then send
`Authorization: Bearer <token>` on every request, and refresh the token before it expires
with a token exchange. Tokens are stored as SHA-256 digests; secrets as salted SHA-256
(`hash_secret`), not as password hashes: every secret is made here with 256 random bits,
which no stolen hash can be searched back from, and a password hash's deliberate slowness
(Django's PBKDF2, about 0.3 s of the web process's CPU) was paid by every Spark session an
engine, a refresh or a stream start opens. A client whose secret was stored as a password
hash before is checked with it once and moved to the new form."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.hashers import check_password
from django.db import transaction
from django.db.models import Exists, QuerySet
from django.utils import timezone

from catalog import history
from catalog.core.errors import InvalidInput
from catalog.iceberg_rest.errors import NotAuthorized
from catalog.models import AccessToken, CatalogClient

TOKEN_LIFETIME = timedelta(hours=1)
# A verified token is trusted for this long without asking the database again: engines send
# one on every request, and the lookup was a third of a request's cost. Revoking a token or
# a client takes effect within this time.
VERIFIED_TOKEN_TTL = 30.0
# digest -> (trusted until, time.monotonic(); the token's expiry, time.time(); the token)
_verified: dict[str, tuple[float, float, AccessToken]] = {}
_verified_lock = threading.Lock()


class InvalidCredentials(NotAuthorized):
    """Unknown or revoked credentials, or a missing, unknown or expired token."""


@dataclass(frozen=True)
class IssuedToken:
    access_token: str
    expires_in: int


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


#: How `hash_secret` marks its hashes (anything else is a Django password hash).
SECRET_HASH_PREFIX = "lakeview-sha256$"


def hash_secret(secret: str, *, salt: str | None = None) -> str:
    """A client secret as it is stored: salted SHA-256 (the module's docstring says why not
    a password hash)."""
    salt = salt if salt is not None else secrets.token_hex(16)
    digest = hashlib.sha256(f"{salt}${secret}".encode()).hexdigest()
    return f"{SECRET_HASH_PREFIX}{salt}${digest}"


def secret_matches(secret: str, stored: str) -> bool:
    """Whether `secret` is the one `stored` (hash_secret's form, or an older password
    hash) was made from, in constant time."""
    if not stored.startswith(SECRET_HASH_PREFIX):
        return check_password(secret, stored)
    salt = stored[len(SECRET_HASH_PREFIX) :].partition("$")[0]
    # As bytes: compare_digest refuses str with non-ASCII characters (a TypeError, a 500),
    # which a hash edited by hand in the database may hold.
    expected = hash_secret(secret, salt=salt).encode("utf-8", "surrogateescape")
    return hmac.compare_digest(expected, stored.encode("utf-8", "surrogateescape"))


def digest_of(token: str) -> str:
    """How a token is stored and looked up: its SHA-256 hex digest."""
    return _digest(token)


@transaction.atomic
def create_client(*, name: str, user: Any, actor: Any = None) -> tuple[CatalogClient, str]:
    """A new client for `user`; returns it and its secret, which is shown only this once."""
    if not name or not name.strip():
        raise InvalidInput("A client needs a name", field="name")
    secret = secrets.token_urlsafe(32)
    client = CatalogClient.objects.create(
        name=name.strip(),
        client_id=secrets.token_hex(8),
        secret_hash=hash_secret(secret),
        user=user,
    )
    history.record(
        actor=actor,
        action="create_client",
        object_type="client",
        object_name=client.name,
        message=described(client),
    )
    return client, secret


def described(client: CatalogClient) -> str:
    """How the history names a client: its id and whose it is."""
    return f"client_id {client.client_id}, acting for {client.user.get_username()}"


@transaction.atomic
def revoke_client(*, client: CatalogClient, actor: Any = None) -> bool:
    """Deactivate a client and delete its tokens (no process can renew one; a fresh lookup
    finds none), recorded in the same transaction. False when it was revoked already."""
    revoked = CatalogClient.objects.filter(pk=client.pk, active=True).update(active=False)
    if not revoked:
        return False
    client.active = False
    AccessToken.objects.filter(client=client).delete()
    history.record(
        actor=actor,
        action="revoke_client",
        object_type="client",
        object_name=client.name,
        message=described(client),
    )
    return True


def _issue(client: CatalogClient) -> IssuedToken:
    token = secrets.token_urlsafe(32)
    AccessToken.objects.create(
        client=client, digest=_digest(token), expires_at=timezone.now() + TOKEN_LIFETIME
    )
    return IssuedToken(token, int(TOKEN_LIFETIME.total_seconds()))


def issue_token(*, client_id: str, client_secret: str) -> IssuedToken:
    client = CatalogClient.objects.filter(client_id=client_id, active=True).first()
    # Hash even for an unknown client, so that timing does not tell which ids exist.
    valid = secret_matches(client_secret, client.secret_hash if client else _UNKNOWN_CLIENT)
    if client is None or not valid or not client.user.is_active:
        raise InvalidCredentials("Credentials for the client are invalid")
    if not client.secret_hash.startswith(SECRET_HASH_PREFIX):
        CatalogClient.objects.filter(pk=client.pk, secret_hash=client.secret_hash).update(
            secret_hash=hash_secret(client_secret)
        )
    return _issue(client)


#: What an unknown client id's secret is checked against (it matches no secret).
_UNKNOWN_CLIENT = hash_secret(secrets.token_urlsafe(32))


def exchange_token(*, subject_token: str) -> IssuedToken:
    """A fresh token for a still-valid one (the clients' refresh). Checked against the
    database, not the verified-token cache: a revoked client gets no new token."""
    return _issue(_lookup(subject_token).client)


def authenticate(token: str, *, digest: str | None = None) -> AccessToken:
    """The token's AccessToken, trusted for VERIFIED_TOKEN_TTL once looked up. `digest`:
    the token's digest, when the caller has it already."""
    digest = digest or _digest(token)
    now = time.monotonic()
    cached = _verified.get(digest)  # one dict read: atomic under the GIL, no lock needed
    # The expiry as a POSIX timestamp: the same instant as expires_at, compared without
    # building an aware datetime on every request.
    if cached is not None and cached[0] > now and cached[1] > time.time():
        return cached[2]
    access = _lookup(token)
    with _verified_lock:
        if len(_verified) > 10_000:
            _verified.clear()
        _verified[digest] = (now + VERIFIED_TOKEN_TTL, access.expires_at.timestamp(), access)
    return access


def _valid_tokens(digest: str, now: datetime | None = None) -> QuerySet[AccessToken]:
    """The token of this digest while it may still be used: unexpired, of an active client
    acting for an active user. `_lookup` and `still_valid` ask the same question."""
    return AccessToken.objects.filter(
        digest=digest,
        expires_at__gt=now or timezone.now(),
        client__active=True,
        client__user__is_active=True,
    )


def still_valid(digest: str, *, now: datetime | None = None) -> Exists:
    """The token check as a condition another query can carry (load-table folds it into its
    pointer query), so that a revoked client is refused at once there, without waiting
    VERIFIED_TOKEN_TTL and without a round trip of its own."""
    return Exists(_valid_tokens(digest, now))


def is_still_valid(digest: str) -> bool:
    return _valid_tokens(digest).exists()


def forget(digest: str) -> None:
    """Stop trusting a verified token now (it was found revoked or expired)."""
    with _verified_lock:
        _verified.pop(digest, None)


def _lookup(token: str) -> AccessToken:
    access = (
        AccessToken.objects.select_related("client__user")
        .filter(digest=_digest(token), expires_at__gt=timezone.now(), client__active=True)
        .first()
    )
    if access is None or not access.client.user.is_active:
        raise InvalidCredentials("Not authorized: the bearer token is missing, unknown or expired")
    return access


def delete_expired_tokens() -> int:
    """Forget tokens past their expiry (celery-beat runs this hourly: catalog.tasks)."""
    deleted, _ = AccessToken.objects.filter(expires_at__lte=timezone.now()).delete()
    return deleted

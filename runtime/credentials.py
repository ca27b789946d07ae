"""The app's own credential for its refresh workers.

Refresh jobs write through the app's Iceberg REST catalog like any engine, so that there is
one commit path for every writer. Their client belongs to a service user (an editor who
cannot log in) and its secret is derived from SECRET_KEY, so every worker process can
compute it without a secret being stored anywhere in clear; only its hash is in the
database, like every client's. Commits made by refresh jobs are recorded as this user's."""

from __future__ import annotations

import hashlib
import hmac

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction

from catalog import history
from catalog.models import CatalogClient
from catalog.roles import EDITOR
from catalog.services.credentials import SECRET_HASH_PREFIX, described, hash_secret, secret_matches

SERVICE_USERNAME = "lakeview-refresh"
CLIENT_ID = "lakeview-refresh"


def _secret() -> str:
    return hmac.new(
        settings.SECRET_KEY.encode(), b"lakeview refresh worker client", hashlib.sha256
    ).hexdigest()


def service_user():
    """The user refresh jobs act as (made on first use; it has no usable password)."""
    User = get_user_model()
    user, created = User.objects.get_or_create(username=SERVICE_USERNAME)
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
        user.groups.add(Group.objects.get_or_create(name=EDITOR)[0])
    return user


@transaction.atomic
def service_credential() -> str:
    """`client_id:secret` for Spark's `credential` setting. The client is made on first use;
    a changed SECRET_KEY re-keys it. A client an operator revoked stays revoked: refreshes
    then fail with the catalog's 401, which says why."""
    secret = _secret()
    client = CatalogClient.objects.select_for_update().filter(client_id=CLIENT_ID).first()
    if client is None:
        user = service_user()
        client = CatalogClient.objects.create(
            name="Refresh workers (materialized tables)",
            client_id=CLIENT_ID,
            secret_hash=hash_secret(secret),
            user=user,
        )
        history.record(
            actor=None,
            action="create_client",
            object_type="client",
            object_name=client.name,
            message=described(client),
        )
    elif not client.secret_hash.startswith(SECRET_HASH_PREFIX) or not secret_matches(
        secret, client.secret_hash
    ):
        # Re-keyed (a new SECRET_KEY), or stored as a password hash before.
        client.secret_hash = hash_secret(secret)
        client.save(update_fields=["secret_hash"])
    return f"{CLIENT_ID}:{secret}"

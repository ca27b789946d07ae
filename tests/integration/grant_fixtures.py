"""Users and grants the grants' tests share (issue 39): a superuser who grants, two users who
hold only what they are granted, and giving and taking a privilege through the one service
(catalog.services.grants) on the catalog, a namespace or one object, to a user, a group or
an engine credential. A test module imports the fixtures it uses by name:

    from tests.integration.grant_fixtures import admin, alice, give  # noqa: F401
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group
from rest_framework.test import APIClient

from catalog.services import grants
from tests.integration.test_iceberg_rest import Iceberg, token_for


@pytest.fixture
def admin(django_user_model):
    """root, a superuser: holds everything, and grants."""
    return django_user_model.objects.create_superuser("root", password="root-password")


@pytest.fixture
def alice(django_user_model):
    """A user with no role: she holds what she is granted."""
    return django_user_model.objects.create_user("alice", password="alice-password")


@pytest.fixture
def bob(django_user_model):
    """Another user with no role."""
    return django_user_model.objects.create_user("bob", password="bob-password")


def _target(to: Any, namespace: str | None, name: str | None) -> dict[str, Any]:
    """The service's keywords naming a principal (a user, a group or a credential) and a
    securable (one object given a name, else a namespace given one, else the catalog)."""
    if hasattr(to, "username"):
        kind, label = "user", to.username
    elif isinstance(to, Group):
        kind, label = "group", to.name
    else:
        kind, label = "client", to.client_id
    return {
        "principal_type": kind,
        "principal": label,
        "securable_type": "object" if name else "namespace" if namespace else "catalog",
        "namespace": namespace,
        "name": name,
    }


def give(admin, privilege: str, to, *, namespace: str | None = None, name: str | None = None):
    """Grant `privilege` to `to` on the catalog, `namespace`, or `namespace.name`."""
    grant, _ = grants.grant(privilege=privilege, actor=admin, **_target(to, namespace, name))
    return grant


def take(admin, privilege: str, to, *, namespace: str | None = None, name: str | None = None):
    """Revoke what `give` with the same arguments granted."""
    grants.revoke(privilege=privilege, actor=admin, **_target(to, namespace, name))


def engine(user) -> Iceberg:
    """The Iceberg REST catalog as an engine holding a credential of `user` speaks it."""
    return Iceberg(token_for(user))


def api_as(user) -> APIClient:
    """The API as `user`, signed in."""
    client = APIClient()
    client.force_authenticate(user)
    return client

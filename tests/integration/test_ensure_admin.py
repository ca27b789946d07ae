"""`manage.py ensure_admin`: a deployment's first administrator, made from the environment
on every start without failing once it exists (docker-compose.yml's migrate service)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

pytestmark = pytest.mark.django_db


def ensure_admin() -> str:
    out = StringIO()
    call_command("ensure_admin", stdout=out)
    return out.getvalue()


@pytest.fixture
def admin_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.setenv("DJANGO_SUPERUSER_USERNAME", "root")
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", "first-password-1")
    monkeypatch.setenv("DJANGO_SUPERUSER_EMAIL", "root@example.com")
    return monkeypatch


def test_the_first_administrator_is_made_from_the_environment(admin_env) -> None:
    assert "created" in ensure_admin()
    user = get_user_model().objects.get(username="root")
    assert user.is_superuser and user.is_staff and user.is_active
    assert user.email == "root@example.com"
    assert user.check_password("first-password-1")


def test_a_second_start_leaves_the_existing_administrator_as_it_is(admin_env) -> None:
    ensure_admin()
    user = get_user_model().objects.get(username="root")
    user.set_password("changed-in-the-app-2")
    user.save()
    admin_env.setenv("DJANGO_SUPERUSER_PASSWORD", "first-password-1")
    assert "left as it is" in ensure_admin()
    assert get_user_model().objects.filter(username="root").count() == 1
    assert get_user_model().objects.get(username="root").check_password("changed-in-the-app-2")
    # The password may leave the environment once the user exists.
    admin_env.delenv("DJANGO_SUPERUSER_PASSWORD")
    assert "left as it is" in ensure_admin()


def test_without_a_username_nothing_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DJANGO_SUPERUSER_USERNAME", raising=False)
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", "some-password-3")
    assert "not set" in ensure_admin()
    assert not get_user_model().objects.exists()


def test_a_new_administrator_without_a_password_is_refused(admin_env) -> None:
    admin_env.delenv("DJANGO_SUPERUSER_PASSWORD")
    with pytest.raises(CommandError, match="DJANGO_SUPERUSER_PASSWORD is not set"):
        ensure_admin()
    assert not get_user_model().objects.exists()

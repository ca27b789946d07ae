"""Fixtures shared by every layer of tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def warehouse(tmp_path: Path, settings) -> Path:
    """Each test writes metadata into a warehouse folder of its own."""
    folder = tmp_path / "warehouse"
    folder.mkdir()
    settings.WAREHOUSE = str(folder)
    return folder


@pytest.fixture
def editor(django_user_model):
    from django.contrib.auth.models import Group

    from catalog.roles import EDITOR

    user = django_user_model.objects.create_user(username="erin", password="erin-password")
    user.groups.add(Group.objects.get_or_create(name=EDITOR)[0])
    return user


@pytest.fixture
def viewer(django_user_model):
    from django.contrib.auth.models import Group

    from catalog.roles import VIEWER

    user = django_user_model.objects.create_user(username="vic", password="vic-password")
    user.groups.add(Group.objects.get_or_create(name=VIEWER)[0])
    return user


@pytest.fixture(autouse=True)
def no_workers(settings) -> None:
    """Each test starts with no worker alive: workers' heartbeats go to a Redis key of its
    own (catalog.workers); a test that needs one says it is alive (`workers.beat`)."""
    import uuid

    settings.WORKERS_KEY = f"lakeview-test:{uuid.uuid4().hex}"

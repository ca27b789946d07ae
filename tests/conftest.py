"""Fixtures shared by every layer of tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def warehouse(tmp_path: Path, settings) -> Path:
    """Each test writes metadata into a warehouse folder of its own."""
    folder = tmp_path / "warehouse"
    folder.mkdir()
    settings.WAREHOUSE = str(folder)
    return folder


@pytest.fixture(autouse=True)
def query_results(tmp_path: Path, settings) -> Path:
    """Each test keeps query results in a folder of its own."""
    folder = tmp_path / "query-results"
    settings.QUERY_RESULTS_DIR = str(folder)
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


@pytest.fixture(autouse=True)
def no_spark_left_in_process(request) -> Iterator[None]:
    """A test outside tests/spark leaves no Spark JVM in the pytest process.

    Such a JVM (an executor run in-process, say) outlives the test, and every Spark test
    after it in the same run then fails to build its own session ("both type and
    catalog-impl are set"): the fault shows far from its cause, and only when the whole
    suite runs in one process. Here it fails the test that started it."""
    import sys

    def active() -> object | None:
        context = sys.modules.get("pyspark.context")
        return context and context.SparkContext._active_spark_context

    if request.node.get_closest_marker("spark") is not None:
        yield
        return
    before = active()
    yield
    if before is None and active() is not None:
        pytest.fail(
            "This test left a Spark JVM in the pytest process; run its Spark work in a "
            "subprocess (a live server, a worker) or stub the executor",
            pytrace=False,
        )

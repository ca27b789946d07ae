"""scripts/fuzz_rest.py's seeding: the routes that name a materialized table are fuzzed
against an existing one, `ns.m`, which the script makes in the app it starts (no worker,
so no Spark) with the code tested here, run as that app's `manage.py shell -c` is."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

import pytest
from rest_framework.test import APIClient

from catalog import services
from refresh import selectors
from refresh.models import MaterializedTable, RefreshRun
from tests.live_server import REPO_ROOT

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def fuzz_rest() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fuzz_rest", REPO_ROOT / "scripts/fuzz_rest.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("fuzz_rest", module)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def ns_with_t(editor) -> None:
    services.create_namespace(name="ns", actor=editor)
    services.create_table(
        namespace="ns",
        name="t",
        schema={"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long"}]},
        actor=editor,
    )


def test_materialized_table_routes_are_pinned_to_m_and_table_routes_still_to_t(fuzz_rest):
    names = {"namespace", "name"}
    mt_route = "/api/namespaces/{namespace}/materialized-tables/{name}/refresh"
    assert fuzz_rest.existing_for(mt_route, names) == {"namespace": "ns", "name": "m"}
    table_route = "/api/namespaces/{namespace}/tables/{name}/files"
    assert fuzz_rest.existing_for(table_route, names) == {"namespace": "ns", "name": "t"}
    view_route = "/api/namespaces/{namespace}/views/{name}/"
    assert fuzz_rest.existing_for(view_route, names) == {"namespace": "ns", "name": "v"}


def test_the_seeding_code_makes_m_without_a_worker_and_running_it_again_changes_nothing(
    fuzz_rest, editor, ns_with_t
):
    code = fuzz_rest.make_mt_code(editor.username)
    exec(code, {})  # noqa: S102 - the script's own code, as `manage.py shell -c` runs it

    mt = selectors.get_materialized_table("ns", "m")
    assert mt.state == MaterializedTable.State.ACTIVATED
    assert mt.sources == ["ns.t"] and mt.partitioned_by == ["ds"]
    assert [f.name for f in mt.table.schema_fields()] == ["id", "ds"]
    # Its first run waits for a worker that the fuzzed app does not have.
    assert list(RefreshRun.objects.values_list("trigger", "state")) == [("CREATE", "QUEUED")]

    exec(code, {})  # noqa: S102 - before each fuzzing run: `m` is there, so nothing is made
    assert MaterializedTable.objects.count() == 1 and RefreshRun.objects.count() == 1

    api = APIClient()
    api.force_authenticate(editor)
    detail = api.get("/api/namespaces/ns/materialized-tables/m/")
    assert detail.status_code == 200 and detail.json()["name"] == "m"


def test_the_seeding_code_makes_m_again_after_a_drop(fuzz_rest, editor, ns_with_t):
    code = fuzz_rest.make_mt_code(editor.username)
    exec(code, {})  # noqa: S102 - the script's own code, as `manage.py shell -c` runs it
    api = APIClient()
    api.force_authenticate(editor)
    assert api.delete("/api/namespaces/ns/materialized-tables/m/").status_code == 204

    exec(code, {})  # noqa: S102 - as the script does before the run after the drop
    assert selectors.get_materialized_table("ns", "m").state == MaterializedTable.State.ACTIVATED

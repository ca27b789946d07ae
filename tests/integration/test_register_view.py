"""Register view over the Iceberg REST protocol (issue 49):
`POST /iceberg/v1/namespaces/{namespace}/register-view` with a RegisterViewRequest
({name, metadata-location}) answers a LoadViewResult. The checks are register table's: the
file inside the warehouse once normalized (no `..`, no symbolic link leading out), readable,
view metadata whose own location is inside the warehouse, create in the namespace, a taken
name or location a 409; every refusal a 4xx in the protocol's error format."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from django.test import Client

from catalog.iceberg_rest.routes import ENDPOINTS
from catalog.models import CatalogEvent, View, ViewVersion
from tests.integration.grant_fixtures import admin, alice, give  # noqa: F401
from tests.integration.test_iceberg_rest import (
    Iceberg,
    assert_error,
    create_table,
    create_view,
    token_for,
)

pytestmark = pytest.mark.django_db

REGISTER = "/namespaces/ns/register-view"


@pytest.fixture
def dropped(api, ns) -> dict:
    """A view made over the protocol and dropped again: its metadata file stays, and no
    live object owns its location any more."""
    created = create_view(api, "v")
    assert api.delete("/namespaces/ns/views/v").status_code == 204
    return created


@pytest.fixture
def outside(tmp_path: Path, dropped) -> Path:
    """A folder outside the warehouse holding a copy of a valid view metadata file."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "00001-copy.metadata.json").write_bytes(
        Path(dropped["metadata-location"]).read_bytes()
    )
    return folder


def register(api: Iceberg, location: str, name: str = "again"):
    return api.post(REGISTER, {"name": name, "metadata-location": location})


def assert_refused(response, status: int, error_type: str) -> dict:
    """A refusal in the protocol's error format, JSON, and no view made."""
    assert response["Content-Type"].startswith("application/json")
    error = assert_error(response, status, error_type)
    assert error["message"]
    assert not View.objects.filter(name="again").exists()
    return error


# -- success -------------------------------------------------------------------------------


def test_config_advertises_register_view():
    assert "POST /v1/{prefix}/namespaces/{namespace}/register-view" in ENDPOINTS


def test_a_dropped_views_metadata_file_registers_and_loads_as_the_file_says(api, dropped):
    location = dropped["metadata-location"]
    on_disk = Path(location).read_bytes()
    files_before = sorted(Path(location).parent.iterdir())

    response = register(api, location)

    assert response.status_code == 200, response.content
    result = response.json()
    assert result["metadata-location"] == location
    assert result["metadata"] == json.loads(on_disk)
    assert result["metadata"]["view-uuid"] == dropped["metadata"]["view-uuid"]
    loaded = api.get("/namespaces/ns/views/again")
    assert loaded.status_code == 200
    assert loaded.json()["metadata-location"] == location
    assert loaded.json()["metadata"] == dropped["metadata"]
    # Adopted, never rewritten: the same bytes, no new file beside it.
    assert Path(location).read_bytes() == on_disk
    assert sorted(Path(location).parent.iterdir()) == files_before


def test_a_registered_view_is_listed_mirrored_and_recorded_as_a_create_is(api, dropped, editor):
    assert register(api, dropped["metadata-location"]).status_code == 200

    listed = api.get("/namespaces/ns/views").json()["identifiers"]
    assert {"namespace": ["ns"], "name": "again"} in listed
    view = View.objects.get(namespace__name="ns", name="again")
    assert str(view.uuid) == dropped["metadata"]["view-uuid"]
    assert view.owner == editor
    versions = ViewVersion.objects.filter(view=view)
    assert [v.version_id for v in versions] == [1]
    assert versions[0].representations.get().sql == "SELECT id FROM ns.t"
    assert [f.name for f in view.fields.all()] == ["id"]
    event = CatalogEvent.objects.filter(object_uuid=view.uuid).first()
    assert (event.action, event.result, event.actor) == ("register_view", "ok", editor)
    assert event.metadata_location == dropped["metadata-location"]


def test_a_registered_view_shows_on_its_page_and_in_the_api(api, dropped, editor):
    assert register(api, dropped["metadata-location"]).status_code == 200
    browser = Client()
    browser.force_login(editor)

    page = browser.get("/namespaces/ns/views/again/")
    detail = browser.get("/api/namespaces/ns/views/again/")
    listed = browser.get("/api/namespaces/ns/views/")

    assert page.status_code == 200
    assert "SELECT id FROM ns.t" in page.content.decode()
    assert detail.status_code == 200, detail.content
    assert detail.json()["name"] == "again"
    assert detail.json()["metadata_location"] == dropped["metadata-location"]
    assert "again" in listed.content.decode()


def test_a_user_granted_create_in_the_namespace_may_register(admin, alice, dropped):  # noqa: F811
    give(admin, "create", alice, namespace="ns")

    response = register(Iceberg(token_for(alice)), dropped["metadata-location"])

    assert response.status_code == 200, response.content
    assert View.objects.get(name="again").owner == alice


# -- locations -----------------------------------------------------------------------------


def test_a_file_outside_the_warehouse_is_a_bad_request(api, outside):
    response = register(api, str(outside / "00001-copy.metadata.json"))

    assert_refused(response, 400, "BadRequestException")


@pytest.mark.parametrize(
    "spelling",
    [
        "{warehouse}/ns/../../outside/00001-copy.metadata.json",
        "file://{warehouse}/../outside/00001-copy.metadata.json",
        "{warehouse}/ns/%2e%2e/%2e%2e/outside/00001-copy.metadata.json",
        "{warehouse}/./ns/../../outside/00001-copy.metadata.json",
    ],
)
def test_a_climb_out_of_the_warehouse_is_refused_before_any_file_is_read(
    api, warehouse, outside, spelling
):
    error = assert_refused(
        register(api, spelling.format(warehouse=warehouse)), 400, "BadRequestException"
    )
    assert "'..'" in error["message"] or "outside the warehouse" in error["message"]


def test_a_symbolic_link_to_a_folder_outside_the_warehouse_is_refused(api, warehouse, outside):
    (warehouse / "ns" / "link").symlink_to(outside, target_is_directory=True)

    response = register(api, str(warehouse / "ns" / "link" / "00001-copy.metadata.json"))

    error = assert_refused(response, 400, "BadRequestException")
    assert "symbolic link" in error["message"]


def test_a_symbolic_link_to_a_file_outside_the_warehouse_is_refused(api, warehouse, outside):
    link = warehouse / "ns" / "linked.metadata.json"
    link.symlink_to(outside / "00001-copy.metadata.json")

    response = register(api, str(link))

    assert_refused(response, 400, "BadRequestException")


def test_a_link_inside_the_warehouse_registers_the_file_it_leads_to(api, warehouse, dropped):
    real = Path(dropped["metadata-location"])
    (warehouse / "alias").symlink_to(real.parent, target_is_directory=True)

    response = register(api, str(warehouse / "alias" / real.name))

    assert response.status_code == 200, response.content
    assert response.json()["metadata-location"] == str(real)


def test_the_warehouse_itself_is_not_a_metadata_file(api, ns, warehouse):
    assert_refused(register(api, str(warehouse)), 400, "BadRequestException")


def test_a_view_whose_own_location_is_outside_the_warehouse_is_refused(
    api, warehouse, dropped, tmp_path
):
    document = json.loads(Path(dropped["metadata-location"]).read_text())
    document["location"] = str(tmp_path / "elsewhere")
    file = warehouse / "ns" / "moved" / "metadata" / "00001-moved.metadata.json"
    file.parent.mkdir(parents=True)
    file.write_text(json.dumps(document))

    error = assert_refused(register(api, str(file)), 400, "BadRequestException")
    assert "location is not usable" in error["message"]


# -- files ---------------------------------------------------------------------------------


def test_a_missing_file_is_a_bad_request(api, ns, warehouse):
    missing = warehouse / "ns" / "v" / "metadata" / "00001-missing.metadata.json"

    error = assert_refused(register(api, str(missing)), 400, "BadRequestException")
    assert "does not exist" in error["message"]


def test_a_folder_is_not_a_metadata_file(api, ns, warehouse):
    (warehouse / "ns" / "folder.metadata.json").mkdir(parents=True)

    response = register(api, str(warehouse / "ns" / "folder.metadata.json"))

    assert_refused(response, 400, "BadRequestException")


def test_a_tables_metadata_file_is_not_view_metadata(api, ns):
    table = create_table(api, "t")
    assert api.delete("/namespaces/ns/tables/t").status_code == 204

    response = register(api, table["metadata-location"])

    assert_refused(response, 400, "BadRequestException")


@pytest.mark.parametrize(
    "content",
    [b"{not json", b"", b"[1, 2]", b"\xff\xfe\x00garbage", b'{"format-version": 1}', b"null"],
)
def test_garbage_is_a_bad_request(api, ns, warehouse, content):
    file = warehouse / "ns" / "g" / "metadata" / "00001-garbage.metadata.json"
    file.parent.mkdir(parents=True)
    file.write_bytes(content)

    assert_refused(register(api, str(file)), 400, "BadRequestException")


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.update({"current-version-id": 99}),
        lambda d: d.update({"versions": "nope"}),
        lambda d: d.update({"schemas": []}),
        lambda d: d.update({"location": 7}),
        lambda d: d.update({"location": "relative/folder"}),
        lambda d: d.update({"view-uuid": "not-a-uuid"}),
        lambda d: d.update({"format-version": 2}),
        lambda d: d["versions"][0].update({"schema-id": 42}),
        lambda d: d["versions"][0].update({"representations": "x"}),
        lambda d: d.update({"version-log": [{"version-id": "x"}]}),
        lambda d: d.pop("versions"),
    ],
)
def test_a_view_document_that_breaks_the_spec_is_a_bad_request(api, warehouse, dropped, mutate):
    document = json.loads(Path(dropped["metadata-location"]).read_text())
    mutate(document)
    file = warehouse / "ns" / "odd" / "metadata" / "00001-odd.metadata.json"
    file.parent.mkdir(parents=True)
    file.write_text(json.dumps(document))

    assert_refused(register(api, str(file)), 400, "BadRequestException")


def test_an_unreadable_file_is_a_bad_request(api, ns, warehouse, dropped):
    if os.geteuid() == 0:
        pytest.skip("root reads any file")
    file = warehouse / "ns" / "locked.metadata.json"
    file.write_bytes(Path(dropped["metadata-location"]).read_bytes())
    file.chmod(0)

    assert_refused(register(api, str(file)), 400, "BadRequestException")


@pytest.mark.parametrize(
    "body",
    [
        {"name": "again"},
        {"metadata-location": "/x.metadata.json"},
        {"name": "again", "metadata-location": 7},
        {"name": ["again"], "metadata-location": "/x"},
        {"name": "", "metadata-location": "/x"},
        {"name": "again", "metadata-location": ""},
    ],
)
def test_a_request_without_a_usable_name_or_location_is_a_bad_request(api, ns, body):
    assert_refused(api.post(REGISTER, body), 400, "BadRequestException")


def test_a_body_that_is_not_json_is_a_bad_request(api, ns):
    assert_refused(api.post(REGISTER, raw="{nope"), 400, "BadRequestException")


# -- conflicts, namespaces and grants ------------------------------------------------------


def test_an_existing_views_name_is_a_conflict(api, dropped):
    create_view(api, "taken")

    response = register(api, dropped["metadata-location"], name="taken")

    error = assert_error(response, 409, "AlreadyExistsException")
    assert error["message"] == "View already exists: ns.taken"


def test_an_existing_tables_name_is_a_conflict(api, dropped):
    create_table(api, "t")

    response = register(api, dropped["metadata-location"], name="t")

    error = assert_error(response, 409, "AlreadyExistsException")
    assert "Table with same name already exists" in error["message"]
    assert not View.objects.filter(name="t").exists()


def test_a_live_views_file_under_a_second_name_is_a_conflict(api, ns):
    live = create_view(api, "v")

    response = register(api, live["metadata-location"])

    error = assert_refused(response, 409, "AlreadyExistsException")
    assert "overlaps the location of view ns.v" in error["message"]


def test_registering_twice_is_a_conflict_the_second_time(api, dropped):
    assert register(api, dropped["metadata-location"]).status_code == 200

    response = register(api, dropped["metadata-location"])

    assert_error(response, 409, "AlreadyExistsException")
    assert View.objects.filter(name="again").count() == 1


def test_a_missing_namespace_is_no_such_namespace(api, dropped):
    response = api.post(
        "/namespaces/nope/register-view",
        {"name": "again", "metadata-location": dropped["metadata-location"]},
    )

    assert_refused(response, 404, "NoSuchNamespaceException")


def test_a_viewer_may_not_register(viewer, dropped):
    response = register(Iceberg(token_for(viewer)), dropped["metadata-location"])

    assert_refused(response, 403, "ForbiddenException")
    failed = CatalogEvent.objects.filter(action="register_view")
    assert not failed.filter(result="ok").exists()


def test_a_user_with_read_grants_only_may_not_register(admin, alice, dropped):  # noqa: F811
    give(admin, "read_metadata", alice, namespace="ns")

    response = register(Iceberg(token_for(alice)), dropped["metadata-location"])

    assert_refused(response, 403, "ForbiddenException")


def test_a_failed_registration_is_recorded_in_the_history(api, ns, warehouse):
    missing = warehouse / "ns" / "v" / "metadata" / "00001-missing.metadata.json"
    register(api, str(missing))

    event = CatalogEvent.objects.get(action="register_view")
    assert (event.result, event.object_name) == ("failed", "ns.again")


def test_no_token_is_not_authorized(dropped):
    response = Client().post(
        "/iceberg/v1" + REGISTER,
        {"name": "again", "metadata-location": dropped["metadata-location"]},
        content_type="application/json",
    )

    assert_refused(response, 401, "NotAuthorizedException")

"""A purge must never lose another object's data: no two live objects own overlapping
locations, and a purge deletes only the files the table's own metadata names. Each escape an
outside test found is tried here, and the warehouse outside the purged table is compared
byte for byte before and after."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from catalog import services
from catalog.models import CatalogObject
from tests.integration.test_iceberg_rest import SCHEMA, Iceberg, assert_error, token_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(editor) -> Iceberg:
    return Iceberg(token_for(editor))


@pytest.fixture
def ns(api) -> str:
    assert api.post("/namespaces", {"namespace": ["ns"]}).status_code == 200
    return "ns"


def snapshot_of(folder: Path) -> dict[str, str]:
    """Every file under `folder` (and every folder, as an empty marker) with its SHA-256."""
    state = {}
    for path in sorted(folder.rglob("*")):
        relative = str(path.relative_to(folder))
        state[relative] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""
    return state


def create(api: Iceberg, name: str, location: str | None = None):
    body = {"name": name, "schema": SCHEMA}
    if location is not None:
        body["location"] = location
    return api.post("/namespaces/ns/tables", body)


@pytest.mark.parametrize(
    "location",
    [
        "{wh}/ns",  # the namespace folder, an ancestor of every object in it
        "{wh}/ns/orders",  # another table's folder
        "{wh}/ns/orders/data",  # inside another table's folder
        "{wh}/ns/orders/.",
        "{wh}/ns/./orders",
        "file://{wh}/ns/orders",
    ],
)
def test_a_location_overlapping_a_live_objects_location_is_refused(api, ns, warehouse, location):
    assert create(api, "orders").status_code == 200
    before = snapshot_of(warehouse)

    response = create(api, "thief", location.format(wh=warehouse))

    assert_error(response, 409, "AlreadyExistsException")
    assert "overlaps the location of table ns.orders" in response.json()["error"]["message"]
    assert not CatalogObject.objects.filter(name="thief").exists()
    assert snapshot_of(warehouse) == before, "nothing was written"


def test_an_object_cannot_be_created_inside_a_table_that_owns_the_namespace_folder(
    api, ns, warehouse
):
    assert create(api, "greedy", f"{warehouse}/ns").status_code == 200

    assert_error(create(api, "orders"), 409, "AlreadyExistsException")
    with pytest.raises(Exception, match="overlaps"):
        services.create_view(namespace="ns", name="v", sql="SELECT 1 AS id")


def test_a_location_ending_like_a_neighbours_is_not_an_overlap(api, ns, warehouse):
    assert create(api, "ab", f"{warehouse}/ns/ab").status_code == 200
    assert create(api, "a", f"{warehouse}/ns/a").status_code == 200

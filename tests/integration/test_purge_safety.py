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
from tests.integration.test_iceberg_rest import SCHEMA, Iceberg, assert_error

pytestmark = pytest.mark.django_db


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


@pytest.mark.parametrize(
    "location",
    [
        "{wh}/ns/%2e%2e/%2e%2e/outside",
        "{wh}/ns/%2E%2e/outside",
        "{wh}/ns/.%2e/outside",
        "{wh}/ns/%252e%252e/outside",
        "file://{wh}/ns/%2e%2e/outside",
        "{wh}/ns/../../outside",
        "{wh}/%2e",
        "{wh}/.",
        "{wh}",
        "file://{wh}",
        "{wh}/ns/a%00b",
        "{wh}/ns/a\\..\\..\\outside",
    ],
)
def test_a_location_that_could_escape_the_warehouse_is_refused(
    api, ns, warehouse, tmp_path, location
):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep me")
    before = snapshot_of(tmp_path)

    response = create(api, "escape", location.format(wh=warehouse))

    assert_error(response, 400, "BadRequestException")
    assert not CatalogObject.objects.exists()
    assert snapshot_of(tmp_path) == before


def test_a_location_through_a_symbolic_link_out_of_the_warehouse_is_refused(
    api, ns, warehouse, tmp_path
):
    outside = tmp_path / "outside"
    outside.mkdir()
    (warehouse / "ns").mkdir(exist_ok=True)
    (warehouse / "ns" / "link").symlink_to(outside)

    response = create(api, "escape", f"{warehouse}/ns/link/t")

    assert_error(response, 400, "BadRequestException")
    assert list(outside.iterdir()) == []


@pytest.mark.django_db(transaction=True)
def test_a_purge_deletes_only_the_files_the_tables_metadata_names(
    live_server, editor, warehouse, tmp_path
):
    """A real table written by pyiceberg, beside another table, a view and stray files:
    after the purge, everything but the purged table's own files is unchanged, byte for
    byte, and a stray file inside its folder keeps that folder."""
    import pyarrow as pa
    from pyiceberg.catalog.rest import RestCatalog

    from catalog.services.credentials import create_client

    client, secret = create_client(name="py", user=editor)
    # Closed at the end of the block: a kept-alive connection would hold a live server
    # thread, and that thread its database connection, past the test (see conftest).
    with RestCatalog(
        "lv", uri=f"{live_server.url}/iceberg", credential=f"{client.client_id}:{secret}"
    ) as catalog:
        catalog.create_namespace("ns")
        rows = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": pa.array(["a", "b", "c"])})
        for name in ("doomed", "neighbour"):
            table = catalog.create_table(f"ns.{name}", schema=rows.schema)
            table.append(rows)
            table.append(rows)
        services.create_view(namespace="ns", name="reader", sql="SELECT id FROM ns.neighbour")
        doomed = warehouse / "ns" / "doomed"
        (doomed / "notes.txt").write_text("not the table's")
        (warehouse / "ns" / "doomed_sibling.txt").write_text("beside the table")
        outside = tmp_path / "outside.txt"
        outside.write_text("outside the warehouse")
        before = snapshot_of(tmp_path)
        data_files = list(doomed.rglob("*.parquet"))
        assert data_files

        catalog.purge_table("ns.doomed")

        after = snapshot_of(tmp_path)
        doomed_prefix = str(doomed.relative_to(tmp_path)) + "/"
        unchanged = {k: v for k, v in before.items() if not k.startswith(doomed_prefix)}
        assert {k: v for k, v in after.items() if not k.startswith(doomed_prefix)} == unchanged
        assert not any(path.exists() for path in data_files)
        assert sorted(p.name for p in doomed.rglob("*") if p.is_file()) == ["notes.txt"]
        assert catalog.load_table("ns.neighbour").scan().to_arrow().num_rows == 6


@pytest.mark.parametrize(
    "location",
    [
        "{wh}%2fns/moved",  # decoded: inside; as pyiceberg and Java read it: beside the warehouse
        "{wh}/ns/moved%2f..%2f..%2f..%2foutside",
        "{wh}/ns/a%2fb",
        "file://localhost{wh}/ns/moved",  # pyiceberg: the relative path "localhost/..."
        " {wh}/ns/moved",  # pyiceberg: relative to the working folder
    ],
)
def test_a_commit_cannot_move_a_table_to_a_location_read_two_ways(
    api, ns, warehouse, tmp_path, location
):
    """A commit keeps the location it is given as it is: so a location is refused, not
    rewritten, when a layer below would read it as another place than the one checked."""
    assert create(api, "t").status_code == 200
    before = snapshot_of(tmp_path)
    update = {"action": "set-location", "location": location.format(wh=warehouse)}

    response = api.post("/namespaces/ns/tables/t", {"requirements": [], "updates": [update]})

    assert_error(response, 400, "BadRequestException")
    assert snapshot_of(tmp_path) == before
    assert CatalogObject.objects.get(name="t").location == f"{warehouse}/ns/t"

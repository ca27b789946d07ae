"""More hostile input, found by an attacker's review: each test is a way an editor could
make the app touch what another object owns, tried against the real endpoints."""

from __future__ import annotations

import pytest

from catalog.models import CatalogObject
from tests.integration.test_iceberg_rest import assert_error
from tests.integration.test_purge_safety import create, snapshot_of

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "location",
    [
        "{orders}.checkpoints",
        "{orders}.checkpoints/mine",
        "{orders}.checkpoints/v1-1/sources",
        "file://{orders}.checkpoints/mine",
    ],
)
def test_no_object_may_live_in_the_folder_kept_beside_a_table_for_its_stream_checkpoints(
    api, ns, warehouse, location
):
    """A continuous table's streams keep their checkpoints in `<location>.checkpoints`, and
    the table's drop removes that folder whole (refresh.streams): an object living there
    would lose every file with it, though no two objects' locations overlapped."""
    assert create(api, "orders").status_code == 200
    orders = CatalogObject.objects.get(name="orders").location
    (warehouse / "ns" / "orders.checkpoints" / "v1-1").mkdir(parents=True)
    before = snapshot_of(warehouse)

    response = create(api, "squatter", location.format(orders=orders))

    error = assert_error(response, 409, "AlreadyExistsException")
    assert f"{orders}.checkpoints" in error["message"]
    assert "table ns.orders" in error["message"]
    assert not CatalogObject.objects.filter(name="squatter").exists()
    assert snapshot_of(warehouse) == before, "nothing was written"


def test_a_table_whose_checkpoint_folder_another_object_lives_in_is_refused(api, ns, warehouse):
    """The other way round: the new table's `<location>.checkpoints` would hold an object
    made before it."""
    early = f"{warehouse}/ns/later.checkpoints/early"
    assert create(api, "early", early).status_code == 200

    response = create(api, "later")

    error = assert_error(response, 409, "AlreadyExistsException")
    assert "table ns.early" in error["message"]
    assert not CatalogObject.objects.filter(name="later").exists()
    # A neighbour whose name only starts the same is no one's checkpoint folder.
    assert create(api, "late", f"{warehouse}/ns/later.checkpointsx").status_code == 200

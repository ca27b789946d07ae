"""An attached table in an object store: S3 (moto's server, a real HTTP endpoint speaking
the S3 protocol) reached with the operator's FILE_IO_PROPERTIES, read the way a local
folder is: the metadata file chosen by listing, engines' loads, previews, and following a
writer's commit."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pytest
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.schema import Schema
from pyiceberg.serializers import ToOutputFile
from pyiceberg.table import Table as IcebergTable
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.types import LongType, NestedField, StringType
from rest_framework.test import APIClient

from catalog import services
from catalog.core import metadata_io
from tests.unit.test_preview_tables import CATALOG

pytestmark = pytest.mark.django_db

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "region", StringType(), required=False),
)


@pytest.fixture
def s3(settings) -> Iterator[dict[str, str]]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    properties = {
        "s3.endpoint": f"http://{host}:{port}",
        "s3.access-key-id": "testing",
        "s3.secret-access-key": "testing",
        "s3.region": "us-east-1",
    }
    import boto3

    boto3.client(
        "s3",
        endpoint_url=properties["s3.endpoint"],
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    ).create_bucket(Bucket="lake")
    metadata_io.configure(properties)
    settings.ATTACH_LOCATIONS = ["s3://lake/tables"]
    try:
        yield properties
    finally:
        metadata_io.configure({})
        server.stop()


def s3_table(properties: dict[str, str]) -> IcebergTable:
    """A table another system keeps in S3: v1.metadata.json, then one append per write."""
    io = PyArrowFileIO(properties)
    location = "s3://lake/tables/sales"
    metadata = new_table_metadata(
        SCHEMA, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, location, {"format-version": "2"}
    )
    metadata_location = f"{location}/metadata/v1.metadata.json"
    ToOutputFile.table_metadata(metadata, io.new_output(metadata_location))
    return IcebergTable(("s3", "sales"), metadata, metadata_location, io, CATALOG)


def rows(*pairs: tuple[int, str]) -> pa.Table:
    return pa.table(
        {"id": [p[0] for p in pairs], "region": [p[1] for p in pairs]},
        schema=pa.schema([("id", pa.int64()), ("region", pa.string())]),
    )


def test_a_table_in_s3_is_attached_previewed_and_followed(s3, editor):
    table = s3_table(s3)
    table.append(rows((1, "eu"), (2, "us")))
    services.create_namespace(name="ext", actor=editor)
    client = APIClient()
    client.force_authenticate(editor)

    attached = client.post(
        "/api/namespaces/ext/tables/attach",
        {"name": "sales", "location": "s3://lake/tables/sales"},
        format="json",
    )
    assert attached.status_code == 201, attached.content
    assert (
        attached.json()["metadata_location"] == "s3://lake/tables/sales/metadata/v2.metadata.json"
    )
    first = client.get("/api/namespaces/ext/tables/sales/preview").json()
    assert sorted(map(tuple, first["rows"])) == [(1, "eu"), (2, "us")]

    table.append(rows((3, "eu")))
    second = client.get("/api/namespaces/ext/tables/sales/preview", {"filter": "region = 'eu'"})

    assert sorted(map(tuple, second.json()["rows"])) == [(1, "eu"), (3, "eu")]
    assert second.json()["pruning"]["data_files"] == 2
    assert second.json()["metadata_location"].endswith("/v3.metadata.json")


def test_s3_locations_outside_the_configured_prefixes_are_refused(s3, editor):
    services.create_namespace(name="ext", actor=editor)
    client = APIClient()
    client.force_authenticate(editor)

    for location in ("s3://lake/other/sales", "s3://elsewhere/tables/sales", "s3://lake/tables"):
        response = client.post(
            "/api/namespaces/ext/tables/attach",
            {"name": "sales", "location": location},
            format="json",
        )
        assert response.status_code == 400, (location, response.content)
        assert response.json()["field"] == "location"

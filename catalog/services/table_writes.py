"""pyiceberg writing into this catalog's tables, committed through the kernel.

`writer(actor=...)` is a pyiceberg `Catalog` (catalog.core.table_writes.CommitCatalog)
whose loads read the table's current metadata, whose creates are staged like a REST
client's staged create (the catalog's default location, fresh ids, default properties),
and whose commits are `services.tables.commit_table`: every rule, guard, mirror row and
history event of any other commit applies."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.sorting import SortOrder

from catalog import selectors
from catalog.core import metadata_io
from catalog.core import tables as tables_core
from catalog.core.table_writes import CommitCatalog, Loaded, as_json
from catalog.services import kernel
from catalog.services.tables import commit_table, create_table


def writer(*, actor: Any, action: str = "commit_table") -> CommitCatalog:
    """A pyiceberg catalog for one write by `actor` (its files are tracked, see
    catalog.core.table_writes.all_or_nothing); `action` names its commits in the history."""

    def load(namespace: str, name: str) -> Loaded:
        table = selectors.get_table(namespace, name)
        # Refused before any data file is written into another system's folder.
        kernel.refuse_if_attached(table, "write to")
        metadata = tables_core.read_table_metadata(table.metadata_location)
        return Loaded(metadata, table.metadata_location)

    def stage(
        namespace: str,
        name: str,
        schema: Schema,
        spec: PartitionSpec,
        order: SortOrder,
        properties: Mapping[str, str],
    ) -> TableMetadata:
        staged = create_table(
            namespace=namespace,
            name=name,
            schema=as_json(schema),
            partition_spec=as_json(spec),
            write_order=as_json(order),
            properties=dict(properties),
            stage_create=True,
            actor=actor,
        )
        return staged.metadata

    def commit(namespace: str, name: str, requirements: list[dict], updates: list[dict]) -> Loaded:
        committed = commit_table(
            namespace=namespace,
            name=name,
            requirements=requirements,
            updates=updates,
            actor=actor,
            action=action,
        )
        return Loaded(committed.metadata, committed.metadata_location)

    return CommitCatalog(
        settings.CATALOG_NAME,
        load=load,
        stage=stage,
        commit=commit,
        io=metadata_io.file_io(settings.WAREHOUSE),
    )

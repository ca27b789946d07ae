"""A file becomes a table: an uploaded CSV, Parquet or JSON lines file written with pyiceberg
into a new table, or appended to an existing one, through the catalog's commit path.

The file is checked (what it claims to be, its columns, an append's columns against the
table's) before anything is written; its rows are then read and written batch by batch. A
new table and its rows are one commit (a staged create carrying its first snapshot); an
append is one snapshot. Whatever goes wrong before that commit deletes the files written
so far (catalog.core.table_writes.all_or_nothing): the table is not made, or not changed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from catalog import history, selectors
from catalog.core import tables as tables_core
from catalog.core import uploads
from catalog.core.errors import InvalidInput
from catalog.core.inputs import check_name, check_namespace_name
from catalog.core.table_writes import all_or_nothing, append_batches
from catalog.models import Table
from catalog.services import kernel
from catalog.services.kernel import TABLE
from catalog.services.table_writes import writer

MODES = ("create", "append")
ACTION = "upload_table"


@dataclass(frozen=True)
class Uploaded:
    """A written upload: the table and what went into it."""

    table: Table
    mode: str
    format: str
    rows: int
    columns: list[tuple[str, str]]
    snapshot_id: int | None


def _target(namespace: str, name: str, mode: str) -> tuple[str, str, Table | None]:
    """The namespace (404 when missing), the checked name and, for an append, the table
    (404 when missing; 403 when attached: its files are another system's)."""
    namespace = selectors.get_namespace(check_namespace_name(namespace)).name
    name = check_name(name, field="table", what="table name")
    if mode not in MODES:
        raise InvalidInput(
            f"Unknown mode {str(mode)[:40]!r}: choose create or append", field="mode"
        )
    if mode == "create":
        kernel.check_name_free(selectors.get_namespace(namespace), name, creating=TABLE)
        return namespace, name, None
    table = selectors.get_table(namespace, name)
    kernel.refuse_if_attached(table, "append to")
    return namespace, name, table


@dataclass(frozen=True)
class UploadRequest:
    """A file to write as a table: where it lies (`path`), the user's `filename` (it only
    says the format, unless `format` does), the table, and create or append."""

    namespace: str
    name: str
    path: str
    filename: str | None = None
    format: str | None = None
    mode: str = "create"


def _rows(upload: UploadRequest, table: Table | None):
    found = uploads.inspect(upload.path, format=uploads.format_for(upload.filename, upload.format))
    if table is None:
        return uploads.rows_for_new_table(found)
    schema = tables_core.read_table_metadata(table.metadata_location).schema()
    return uploads.rows_for_table(found, schema)


def inspect_upload(*, upload: UploadRequest) -> uploads.Preview:
    """What an upload would write, from the file's first block: its format, the columns
    (the types inferred, or the table's for an append) and the first rows. Writes nothing."""
    _, _, table = _target(upload.namespace, upload.name, upload.mode)
    return uploads.preview(_rows(upload, table))


def upload_table(*, upload: UploadRequest, actor: Any = None) -> Uploaded:
    """Write the file into a new table (`mode` create) or append it to one (`mode` append)."""
    namespace, name, table = _target(upload.namespace, upload.name, upload.mode)
    mode = upload.mode
    try:
        rows = _rows(upload, table)
        catalog = writer(actor=actor, action=ACTION)
        summary = {"lakeview.upload.format": rows.upload.format}
        with all_or_nothing(catalog):
            if table is None:
                transaction = catalog.create_table_transaction((namespace, name), rows.schema)
            else:
                transaction = catalog.load_table((namespace, name)).transaction()
            append_batches(
                transaction, catalog.io, rows.schema, rows.batches(), snapshot_properties=summary
            )
            written = transaction.commit_transaction()
    except uploads.BadFile as error:
        # The kernel records refused commits itself; a file refused before one is recorded
        # here, on the table it was meant for.
        history.record_failure(
            error,
            actor=actor,
            action=ACTION,
            object_type=TABLE.name,
            object_name=f"{namespace}.{name}",
            object_uuid=table.uuid if table is not None else None,
        )
        raise
    snapshot = written.current_snapshot()
    return Uploaded(
        table=selectors.get_table(namespace, name),
        mode=mode,
        format=rows.upload.format,
        rows=rows.count,
        columns=[(f.name, str(f.field_type)) for f in written.schema().fields],
        snapshot_id=snapshot.snapshot_id if snapshot is not None else None,
    )

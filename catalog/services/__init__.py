"""Every write to the catalog goes through these functions.

Each takes keyword arguments, runs in one transaction, records its event (failures too) and
raises a `CatalogError` that names the problem. They are split by resource over one shared
kernel:

- `kernel`: the one commit path (read pointer, apply, write a new file, compare-and-swap,
  mirror, history), renames and drops, for every kind of object;
- `namespaces`, `sql_views` (Iceberg views) and `tables`: each resource's operations.

The public operations are re-exported here, so callers write `services.create_view(...)`."""

from catalog.services.attached import attach_table, detach_table
from catalog.services.attached import follow as follow_attached
from catalog.services.dropped import restore_dropped
from catalog.services.namespaces import (
    create_namespace,
    drop_namespace,
    update_namespace_properties,
)
from catalog.services.policies import (
    drop_column_mask,
    drop_row_filter,
    set_column_mask,
    set_row_filter,
)
from catalog.services.sql_views import (
    add_view_representation,
    commit_view,
    create_view,
    create_view_from_parts,
    drop_view,
    register_view,
    remove_view_properties,
    rename_view,
    replace_view,
    rollback_view,
    set_view_properties,
    update_view_properties,
)
from catalog.services.tables import (
    LoadedTable,
    TableChange,
    commit_table,
    commit_tables,
    create_table,
    drop_table,
    record_metrics,
    register_table,
    rename_table,
)
from catalog.services.uploads import UploadRequest, inspect_upload, upload_table

__all__ = [
    "LoadedTable",
    "restore_dropped",
    "attach_table",
    "detach_table",
    "follow_attached",
    "TableChange",
    "add_view_representation",
    "commit_table",
    "commit_tables",
    "commit_view",
    "create_namespace",
    "create_table",
    "create_view",
    "create_view_from_parts",
    "drop_column_mask",
    "drop_namespace",
    "drop_row_filter",
    "drop_table",
    "drop_view",
    "record_metrics",
    "register_table",
    "register_view",
    "remove_view_properties",
    "rename_table",
    "rename_view",
    "replace_view",
    "rollback_view",
    "set_column_mask",
    "set_row_filter",
    "set_view_properties",
    "update_namespace_properties",
    "update_view_properties",
    "UploadRequest",
    "inspect_upload",
    "upload_table",
]

"""Snapshots committed through the catalog's kernel without any data file, as an engine's
commit would add them: what the mirror-based decisions and checks read."""

from __future__ import annotations

import itertools
from collections.abc import Mapping

from catalog import services

_ids = itertools.count(1000)


def commit_snapshot(
    namespace: str,
    name: str,
    operation: str = "append",
    rows: int = 0,
    *,
    snapshot_id: int | None = None,
    summary: Mapping[str, str] | None = None,
) -> int:
    """A snapshot of `namespace.name` on top of its current one (a new id unless given),
    its summary with `operation`, `rows` added and `summary`; its id."""
    from catalog.models import Table

    table = Table.objects.get(namespace__name=namespace, name=name)
    snapshot_id = next(_ids) if snapshot_id is None else snapshot_id
    snapshot = {
        "snapshot-id": snapshot_id,
        "timestamp-ms": 1_700_000_000_000 + snapshot_id,
        "sequence-number": snapshot_id,  # increasing, as format 2 wants
        "manifest-list": f"/nowhere/snap-{snapshot_id}.avro",
        "summary": {"operation": operation, "added-records": str(rows), **(summary or {})},
        "schema-id": 0,
    }
    if table.current_snapshot_id is not None:
        snapshot["parent-snapshot-id"] = table.current_snapshot_id
    services.commit_table(
        namespace=namespace,
        name=name,
        requirements=[],
        updates=[
            {"action": "add-snapshot", "snapshot": snapshot},
            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch",
             "snapshot-id": snapshot_id},
        ],
    )  # fmt: skip
    return snapshot_id

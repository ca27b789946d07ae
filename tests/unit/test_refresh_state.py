"""A materialized table's snapshot records what it answers (refresh.core.refresh_state), in
the layout of the Iceberg materialized-view spec draft."""

from __future__ import annotations

import json

from refresh.core.refresh_state import (
    REFRESH_STATE,
    partition_entry,
    read,
    read_partition,
    refresh_state,
    user_change,
)


def test_a_refresh_state_names_the_version_and_every_source_with_its_uuid_and_snapshot():
    state = refresh_state(
        version=3,
        sources={"sales.orders": ("0c5e-uuid", 8812), "dim.stores": ("9a1f-uuid", None)},
        started_ms=1_700_000_000_000,
    )
    recorded = json.loads(state.summary()[REFRESH_STATE])
    assert recorded == {
        "view-version-id": 3,
        "source-states": [
            # An empty source (no snapshot yet) has no snapshot-id.
            {"type": "table", "namespace": ["dim"], "name": "stores", "uuid": "9a1f-uuid"},
            {
                "type": "table",
                "namespace": ["sales"],
                "name": "orders",
                "uuid": "0c5e-uuid",
                "snapshot-id": 8812,
            },
        ],
        "refresh-start-timestamp-ms": 1_700_000_000_000,
    }


def test_a_summary_reads_back_into_the_same_state_and_namespaces_keep_their_levels():
    state = refresh_state(version=1, sources={"a.b.facts": ("u-1", 5)}, started_ms=1)
    again = read({"added-records": "10", **state.summary()})
    assert again == state
    assert again.source_states[0].namespace == ("a", "b")
    assert again.snapshot_of("a.b.facts") == 5 and again.snapshot_of("a.b.other") is None


def test_a_summary_without_a_refresh_state_or_with_a_broken_one_reads_as_none():
    assert read({"added-records": "10"}) is None
    assert read(None) is None
    assert read({REFRESH_STATE: "{not json"}) is None
    assert read({REFRESH_STATE: json.dumps({"view-version-id": "x"})}) is None


def test_a_persons_change_is_marked_as_one_and_carries_no_refresh_state():
    marked = user_change("alice")
    assert marked == {"lakeview.change": "user", "lakeview.changed-by": "alice"}
    assert read(marked) is None


def test_a_partition_refresh_names_its_partition_and_a_whole_table_refresh_names_none():
    entry = partition_entry({"ds": "2026-11-26", "region": "eu"})
    assert read_partition(entry) == {"ds": "2026-11-26", "region": "eu"}
    assert partition_entry(None) == {} and partition_entry({}) == {}
    assert read_partition({}) is None
    assert read_partition({"lakeview.refresh-partition": "[1, 2]"}) is None
    assert read_partition({"lakeview.refresh-partition": "{broken"}) is None

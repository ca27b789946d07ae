"""A table's maintenance policy from its properties and its namespace's, and which actions
a sweep finds due."""

from __future__ import annotations

import pytest

from maintenance.core.policy import (
    ICEBERG_MAX_SNAPSHOT_AGE_MS,
    Action,
    Health,
    PolicyError,
    due,
    parse_value,
    policy,
)

MINUTE = 60 * 1000
NOW = 1_800_000_000_000


def test_materialized_tables_are_maintained_by_default_and_other_tables_are_not() -> None:
    assert policy(table_properties={}, materialized=True, freshness_seconds=10).enabled
    plain = policy(table_properties={})
    assert not plain.enabled and plain.enabled_by == "default"
    assert plain.max_snapshot_age_ms == ICEBERG_MAX_SNAPSHOT_AGE_MS


def test_a_table_property_wins_over_its_namespace_which_wins_over_the_default() -> None:
    on = {"lakeview.maintenance.enabled": "true"}
    off = {"lakeview.maintenance.enabled": "false"}
    assert policy(table_properties={}, namespace_properties=on).enabled_by == "namespace"
    assert policy(table_properties={}, namespace_properties=on).enabled
    assert not policy(table_properties=off, namespace_properties=on).enabled
    mt = policy(table_properties=off, materialized=True, freshness_seconds=60)
    assert not mt.enabled and mt.enabled_by == "table"


def test_a_materialized_table_keeps_about_ten_refreshes_of_history_within_bounds() -> None:
    def age(seconds: int) -> int:
        return policy(
            table_properties={}, materialized=True, freshness_seconds=seconds
        ).max_snapshot_age_ms

    assert age(10) == 10 * MINUTE  # at least ten minutes
    assert age(3600) == 10 * 60 * MINUTE
    assert age(7 * 86400) == 7 * 24 * 60 * MINUTE  # at most a week
    explicit = {"history.expire.max-snapshot-age-ms": "5000"}
    assert policy(table_properties=explicit, materialized=True).max_snapshot_age_ms == 5000


def test_an_unreadable_property_an_engine_wrote_falls_back_to_the_default_and_is_reported() -> None:
    p = policy(table_properties={"history.expire.min-snapshots-to-keep": "lots"}, materialized=True)
    assert p.min_snapshots_to_keep == 10
    assert "history.expire.min-snapshots-to-keep" in p.problems
    huge = policy(table_properties={"history.expire.max-snapshot-age-ms": "9" * 400})
    assert huge.max_snapshot_age_ms == 5 * 24 * 60 * MINUTE


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("lakeview.maintenance.enabled", "yes"),
        ("history.expire.max-snapshot-age-ms", "-1"),
        ("history.expire.min-snapshots-to-keep", "0"),
        ("lakeview.maintenance.orphan-age-ms", "1000"),  # below the safe age
        ("write.target-file-size-bytes", "big"),
        # Beyond what Java's Long.parseLong / Integer.parseInt read: engines could not.
        ("history.expire.max-snapshot-age-ms", "9" * 400),
        ("history.expire.min-snapshots-to-keep", str(2**31)),
    ],
)
def test_our_own_paths_refuse_a_value_that_is_not_one_naming_the_property(
    name: str, value: str
) -> None:
    with pytest.raises(PolicyError) as error:
        parse_value(name, value)
    assert error.value.field == name and name in str(error.value)


def mt_policy(**properties: str):
    return policy(table_properties=properties, materialized=True, freshness_seconds=10)


def test_nothing_is_due_when_the_policy_is_off() -> None:
    health = Health(data_files=500, snapshots=1000, oldest_snapshot_ms=0)
    assert due(policy(table_properties={}), health, now_ms=NOW, last_started_ms={}) == []


def test_small_files_delete_files_and_old_snapshots_make_their_actions_due_in_order() -> None:
    health = Health(
        data_files=40,
        data_bytes=40 * 1024,
        delete_files=6,
        position_delete_files=6,
        snapshots=200,
        oldest_snapshot_ms=NOW - 30 * MINUTE,
        manifests=25,
    )
    assert due(mt_policy(), health, now_ms=NOW, last_started_ms={}) == [
        Action.REWRITE_DATA_FILES,
        Action.REWRITE_POSITION_DELETE_FILES,
        Action.REWRITE_MANIFESTS,
        Action.EXPIRE_SNAPSHOTS,
        Action.REMOVE_ORPHAN_FILES,
    ]


def test_a_healthy_table_needs_only_its_daily_orphan_scan_and_runs_are_spaced() -> None:
    healthy = Health(
        data_files=3,
        data_bytes=3 * 512 * 1024 * 1024,
        snapshots=50,
        oldest_snapshot_ms=NOW - 5 * MINUTE,
    )
    assert due(mt_policy(), healthy, now_ms=NOW, last_started_ms={}) == [Action.REMOVE_ORPHAN_FILES]
    recently = {Action.REMOVE_ORPHAN_FILES: NOW - 3600 * 1000}
    assert due(mt_policy(), healthy, now_ms=NOW, last_started_ms=recently) == []
    small = Health(data_files=40, data_bytes=40, snapshots=1)
    compacted = {Action.REWRITE_DATA_FILES: NOW - MINUTE, **recently}
    assert due(mt_policy(), small, now_ms=NOW, last_started_ms=compacted) == []


def test_expiry_waits_for_a_tenth_of_the_retention_past_it_and_for_min_snapshots() -> None:
    recently = {Action.REMOVE_ORPHAN_FILES: NOW}
    just_past = Health(snapshots=200, oldest_snapshot_ms=NOW - 10 * MINUTE - 1)
    assert due(mt_policy(), just_past, now_ms=NOW, last_started_ms=recently) == []
    well_past = Health(snapshots=200, oldest_snapshot_ms=NOW - 12 * MINUTE)
    assert due(mt_policy(), well_past, now_ms=NOW, last_started_ms=recently) == [
        Action.EXPIRE_SNAPSHOTS
    ]
    few = Health(snapshots=10, oldest_snapshot_ms=NOW - 60 * MINUTE)
    assert due(mt_policy(), few, now_ms=NOW, last_started_ms=recently) == []

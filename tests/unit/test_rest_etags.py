"""ETags of table loads, without a database: what a tag depends on, how If-None-Match is read
(RFC 9110: lists, `*`, weak tags), and the per-process cache of load bodies (bounded in
bytes, least recently used first)."""

from __future__ import annotations

import re
import threading
import uuid

import pytest
from django.db import connections
from django.test import RequestFactory
from django.utils import timezone

from catalog.core.errors import InvalidInput
from catalog.iceberg_rest.etags import TableState, none_match_fails, snapshots_mode, table_tag
from catalog.iceberg_rest.table_loads import BodyCache, _canonical_uuid, _now_as_taken_by

STATE = TableState("file:///w/ns/t/metadata/00001-a.metadata.json", "0f0e-uuid", 1700000000000)


def test_a_tag_is_a_quoted_sha256_and_the_same_state_always_has_the_same_tag():
    tag = table_tag(STATE)

    assert re.fullmatch(r'"[0-9a-f]{64}"', tag)
    assert table_tag(TableState(*STATE)) == tag == table_tag(STATE, "all")


@pytest.mark.parametrize(
    "other",
    [
        STATE._replace(metadata_location=STATE.metadata_location.replace("00001", "00002")),
        STATE._replace(uuid="another-uuid"),
        STATE._replace(last_updated_ms=STATE.last_updated_ms + 1),
    ],
)
def test_any_change_of_the_pointer_changes_the_tag(other):
    assert table_tag(other) != table_tag(STATE)


def test_the_snapshots_modes_have_different_tags():
    assert table_tag(STATE, "refs") != table_tag(STATE, "all")


@pytest.mark.parametrize(
    ("query", "mode"), [("", "all"), ("?snapshots=", "all"), ("?snapshots=refs", "refs"),
                        ("?snapshots=ALL", "all")],
)  # fmt: skip
def test_the_snapshots_mode_defaults_to_all(query, mode):
    assert snapshots_mode(RequestFactory().get(f"/t{query}")) == mode


def test_an_unknown_snapshots_mode_is_refused_naming_the_parameter():
    with pytest.raises(InvalidInput) as refused:
        snapshots_mode(RequestFactory().get("/t?snapshots=latest"))

    assert refused.value.field == "snapshots"


TAG = table_tag(STATE)
BARE = TAG.strip('"')


@pytest.mark.parametrize(
    ("header", "matches"),
    [
        (None, False),
        ("", False),
        (TAG, True),
        (f"W/{TAG}", True),
        (f'"x", {TAG}', True),
        (f'"x,y" ,  W/{TAG},"z"', True),
        (f'"x",,{TAG}', True),
        ("*", True),
        (BARE, False),
        (f'"{BARE} "', False),
        (f"{TAG}x", False),
        ('"x", "y"', False),
        (f'W/"{BARE[:-1]}"', False),
        (f"*, {TAG[:-2]}", False),
    ],
)
def test_if_none_match_is_read_as_rfc_9110_writes_it(header, matches):
    assert none_match_fails(header, TAG) is matches


def test_the_cache_of_bodies_is_bounded_in_bytes_and_drops_the_least_recently_used():
    cache = BodyCache(max_bytes=30)
    states = [STATE._replace(last_updated_ms=n) for n in range(4)]
    for state in states[:3]:
        cache.put(state, b"x" * 10)
    assert cache.get(states[0]) == b"x" * 10  # now the most recently used

    cache.put(states[3], b"y" * 10)

    assert cache.size == 30
    assert cache.get(states[1]) is None
    assert [cache.get(s) is not None for s in states] == [True, False, True, True]


def test_a_body_larger_than_the_bound_is_not_kept_and_replacing_a_body_counts_once():
    cache = BodyCache(max_bytes=10)
    cache.put(STATE, b"x" * 11)
    assert cache.get(STATE) is None and cache.size == 0

    cache.put(STATE, b"x" * 4)
    cache.put(STATE, b"y" * 6)

    assert cache.get(STATE) == b"y" * 6
    assert cache.size == 6 and len(cache) == 1


def test_a_cache_of_no_bytes_keeps_nothing():
    cache = BodyCache(max_bytes=0)
    cache.put(STATE, b"{}")

    assert cache.get(STATE) is None


def test_threads_filling_the_cache_at_once_keep_its_bound():
    cache = BodyCache(max_bytes=1000)

    def fill(offset: int) -> None:
        for n in range(500):
            state = STATE._replace(last_updated_ms=offset * 1000 + n % 50)
            cache.put(state, b"z" * (n % 40 + 1))
            cache.get(state)

    threads = [threading.Thread(target=fill, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert cache.size <= 1000
    assert cache.size == sum(len(cache.get(s) or b"") for s in list(cache._entries))


@pytest.mark.parametrize(
    "value",
    [
        "6efa128ab252489eac4f801d0bf51641",
        "6EFA128AB252489EAC4F801D0BF51641",
        "6efa128a-b252-489e-ac4f-801d0bf51641",
        uuid.UUID("6efa128a-b252-489e-ac4f-801d0bf51641"),
    ],
)
def test_a_uuid_read_from_any_database_has_its_canonical_text(value):
    assert _canonical_uuid(value) == "6efa128a-b252-489e-ac4f-801d0bf51641"


def test_the_time_passed_to_sqlite_is_what_django_would_pass():
    db = connections["default"]
    if db.vendor != "sqlite":
        pytest.skip("SQLite's text form of a time")
    before = db.ops.adapt_datetimefield_value(timezone.now())
    ours = _now_as_taken_by(db)(db)
    after = db.ops.adapt_datetimefield_value(timezone.now())

    assert isinstance(ours, str)
    assert before <= ours <= after
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{6})?", ours)


def test_the_current_tag_alone_matches_without_parsing_a_list():
    assert none_match_fails(TAG, TAG)
    assert not none_match_fails(table_tag(STATE, "refs"), TAG)

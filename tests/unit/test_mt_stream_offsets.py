"""What a continuous table's micro-batch read, from the end offsets Spark logged for it
(refresh.spark.stream_offsets): the snapshot each streamed source is read through, or nothing
when that is not exactly known, so that a commit never records a wrong refresh state."""

from __future__ import annotations

import json
from typing import Any

import pytest

from refresh.core.streaming import StreamPlan
from refresh.spark import stream_offsets
from refresh.spark.stream_offsets import StreamOffset, parse_offset, read_through

EVENTS = ("live", "events")
CLICKS = ("live", "clicks")
DIM = ("live", "dim")


def offset(snapshot_id: int, position: int, scan_all_files: bool = False) -> str:
    return json.dumps(
        {
            "version": 1,
            "snapshot_id": snapshot_id,
            "position": position,
            "scan_all_files": scan_all_files,
        }
    )


def test_an_iceberg_offset_reads_from_the_json_spark_logs():
    assert parse_offset(offset(81, 2)) == StreamOffset(81, 2, False)
    assert parse_offset(offset(81, 0, True)) == StreamOffset(81, 0, True)
    start = parse_offset(offset(-1, -1))
    assert start is not None and start.read_nothing
    assert parse_offset(None) is None and parse_offset("-") is None


@pytest.mark.parametrize(
    "text",
    [
        '{"version": 2, "snapshot_id": 1, "position": 0, "scan_all_files": false}',
        '{"version": 1, "snapshot_id": "1", "position": 0, "scan_all_files": false}',
        '{"version": 1, "position": 0, "scan_all_files": false}',
        '{"version": 1, "snapshot_id": 1, "position": true, "scan_all_files": false}',
        '{"version": 1, "snapshot_id": 1, "position": 0, "scan_all_files": "no"}',
        '{"logOffset": 3}',
        "[1, 2]",
        "not json",
    ],
)
def test_an_offset_of_another_form_is_refused_rather_than_guessed(text: str):
    with pytest.raises(ValueError):
        parse_offset(text)


def holding(snapshots: dict[tuple[str, ...], dict[int, bool]]):
    """`holds` over fixed facts: source -> {snapshot id: the offset ends it}."""
    asked: list[tuple[tuple[str, ...], int]] = []

    def holds(source: tuple[str, ...], at: StreamOffset) -> bool | None:
        asked.append((source, at.snapshot_id))
        return snapshots.get(source, {}).get(at.snapshot_id)

    return holds, asked


def test_a_stream_is_read_through_the_snapshot_its_end_offset_ends():
    holds, _ = holding({EVENTS: {81: True}})
    assert read_through([StreamOffset(81, 2)], streams=[EVENTS], start_after={}, holds=holds) == {
        EVENTS: 81
    }


def test_an_end_offset_inside_a_snapshot_gives_no_state():
    # A read limit stopped the batch among the snapshot's files: the table holds more than
    # its parent and less than it.
    holds, _ = holding({EVENTS: {81: False}})
    assert (
        read_through([StreamOffset(81, 1)], streams=[EVENTS], start_after={}, holds=holds) is None
    )


def test_a_snapshot_no_source_has_gives_no_state():
    holds, _ = holding({EVENTS: {}})
    assert (
        read_through([StreamOffset(81, 2)], streams=[EVENTS], start_after={}, holds=holds) is None
    )


def test_a_source_that_read_nothing_since_the_load_stands_at_its_pin():
    holds, _ = holding({EVENTS: {81: True}})
    through = read_through(
        [StreamOffset(81, 2), StreamOffset(-1, -1)],
        streams=[EVENTS, CLICKS],
        start_after={"live.events": (70, 1), "live.clicks": (12, 1)},
        holds=holds,
    )
    assert through == {EVENTS: 81, CLICKS: 12}
    # Nor does one that never had a snapshot (no pin, no offset) get one.
    holds, _ = holding({EVENTS: {81: True}})
    through = read_through(
        [None, StreamOffset(81, 2)], streams=[EVENTS, CLICKS], start_after={}, holds=holds
    )
    assert through == {EVENTS: 81, CLICKS: None}


def test_offsets_in_sparks_order_find_their_sources_by_snapshot_id():
    holds, asked = holding({EVENTS: {81: True}, CLICKS: {5: True}})
    through = read_through(
        [StreamOffset(5, 1), StreamOffset(81, 2)],
        streams=[EVENTS, CLICKS],
        start_after={},
        holds=holds,
    )
    assert through == {EVENTS: 81, CLICKS: 5}
    assert (CLICKS, 81) not in asked, "a source already matched is not asked again"


def test_offsets_that_do_not_match_the_sources_give_no_state():
    holds, _ = holding({EVENTS: {81: True}})
    assert read_through([], streams=[EVENTS], start_after={}, holds=holds) is None
    both = {EVENTS: {81: True}, CLICKS: {81: True}}
    holds, _ = holding(both)
    assert (
        read_through(
            [StreamOffset(81, 2), StreamOffset(-1, -1)],
            streams=[EVENTS, CLICKS],
            start_after={},
            holds=holds,
        )
        is None
    ), "a snapshot id two sources claim names neither"


class FakeTables:
    def __init__(self, session: Any, catalog: str) -> None:
        pass

    def holds(self, source: tuple[str, ...], at: StreamOffset) -> bool | None:
        return {(EVENTS, 81): True, (EVENTS, 82): False}.get((source, at.snapshot_id))


MERGE = StreamPlan("merge", (EVENTS,), (DIM,), ("k",))


def reads(
    monkeypatch: pytest.MonkeyPatch, logged: Any, start_after: dict | None = None
) -> dict | None:
    def offsets(session: Any, *, checkpoint: str, batch_id: int) -> list[str | None]:
        if isinstance(logged, Exception):
            raise logged
        return logged

    monkeypatch.setattr(stream_offsets, "logged_offsets", offsets)
    monkeypatch.setattr(stream_offsets, "_Tables", FakeTables)
    return stream_offsets.batch_reads(
        object(),
        plan=MERGE,
        catalog="lv",
        checkpoint="/c",
        batch_id=3,
        start_after=start_after or {},
    )


def test_a_merge_batch_reads_the_stream_through_its_offset_and_the_others_at_the_load_s_pins(
    monkeypatch: pytest.MonkeyPatch,
):
    # The stream's own pin is where it started; the static side stays at the load's.
    pinned = {"live.events": (70, 1), "live.dim": (7, 1)}
    assert reads(monkeypatch, [offset(81, 2)], pinned) == {EVENTS: 81, DIM: 7}


def test_a_static_source_empty_at_the_load_is_read_empty_until_the_table_is_recomputed(
    monkeypatch: pytest.MonkeyPatch,
):
    assert reads(monkeypatch, [offset(81, 2)], {"live.events": (70, 1)}) == {EVENTS: 81, DIM: None}


def test_a_batch_whose_reads_are_unknown_records_none_and_still_runs(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
):
    assert reads(monkeypatch, [offset(82, 1)]) is None
    assert reads(monkeypatch, LookupError("no offsets logged")) is None
    assert reads(monkeypatch, ["{broken"]) is None
    assert "no refresh state" in caplog.text

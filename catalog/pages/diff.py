"""A side-by-side diff of two SQL texts, built with difflib.

The result is plain data (rows of text segments), so the template escapes every piece of SQL
itself; no HTML is built here."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

_TOKEN = re.compile(r"\s+|\w+|[^\w\s]")


@dataclass(frozen=True)
class Segment:
    text: str
    changed: bool = False


@dataclass
class DiffRow:
    #: "equal", "replace", "delete" (left only) or "insert" (right only).
    tag: str
    left_number: int | None = None
    right_number: int | None = None
    left: list[Segment] = field(default_factory=list)
    right: list[Segment] = field(default_factory=list)


def _inline(left: str, right: str) -> tuple[list[Segment], list[Segment]]:
    """The two lines cut into segments, the words that differ marked as changed."""
    a, b = _TOKEN.findall(left), _TOKEN.findall(right)
    left_segments: list[Segment] = []
    right_segments: list[Segment] = []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        changed = tag != "equal"
        if i2 > i1:
            left_segments.append(Segment("".join(a[i1:i2]), changed))
        if j2 > j1:
            right_segments.append(Segment("".join(b[j1:j2]), changed))
    return left_segments, right_segments


def side_by_side(left: str, right: str) -> list[DiffRow]:
    left_lines, right_lines = left.splitlines(), right.splitlines()
    rows: list[DiffRow] = []
    matcher = difflib.SequenceMatcher(None, left_lines, right_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            for offset in range(i2 - i1):
                text = [Segment(left_lines[i1 + offset])]
                rows.append(DiffRow("equal", i1 + offset + 1, j1 + offset + 1, text, text))
            continue
        for offset in range(max(i2 - i1, j2 - j1)):
            i, j = i1 + offset, j1 + offset
            has_left, has_right = i < i2, j < j2
            if has_left and has_right:
                left_segments, right_segments = _inline(left_lines[i], right_lines[j])
                rows.append(DiffRow("replace", i + 1, j + 1, left_segments, right_segments))
            elif has_left:
                rows.append(DiffRow("delete", left_number=i + 1, left=[Segment(left_lines[i])]))
            else:
                rows.append(DiffRow("insert", right_number=j + 1, right=[Segment(right_lines[j])]))
    return rows

"""Counting what sqlglot parses: a refresh run parses its query once (refresh.core.plan),
and tests/integration/test_run_steps.py and tests/spark/parse_counts.py hold it to that."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def parses() -> Iterator[Counter]:
    """Every SQL text sqlglot's parser reads inside the block (any entry: sqlglot.parse,
    parse_one, a dialect's parse), counted by text."""
    from sqlglot.parser import Parser

    seen: Counter = Counter()
    original = Parser.parse

    def counted(self, raw_tokens, sql=None):  # type: ignore[no-untyped-def]
        if sql:
            seen[sql] += 1
        return original(self, raw_tokens, sql)

    Parser.parse = counted  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        Parser.parse = original  # type: ignore[method-assign]

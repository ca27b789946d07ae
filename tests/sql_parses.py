"""Counting what sqlglot parses: a refresh run parses its query once (refresh.core.plan),
and tests/integration/test_run_steps.py and tests/spark/parse_counts.py hold it to that."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def parses() -> Iterator[Counter]:
    """Every SQL text sqlglot's parser reads inside the block, counted by text.

    sqlglot's parser has two entries: `Parser.parse` (sqlglot.parse, parse_one, a dialect's
    parse) and `Parser.parse_into` (parse_one(..., into=...), exp.DataType.build and the other
    builders that name the expression they want). Both are counted; a text read through either
    counts once per call."""
    from sqlglot.parser import Parser

    seen: Counter = Counter()
    parse, parse_into = Parser.parse, Parser.parse_into

    def counted(self, raw_tokens, sql=None):  # type: ignore[no-untyped-def]
        if sql:
            seen[sql] += 1
        return parse(self, raw_tokens, sql)

    def counted_into(self, expression_types, raw_tokens, sql=None):  # type: ignore[no-untyped-def]
        if sql:
            seen[sql] += 1
        return parse_into(self, expression_types, raw_tokens, sql)

    Parser.parse = counted  # type: ignore[method-assign]
    Parser.parse_into = counted_into  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        Parser.parse = parse  # type: ignore[method-assign]
        Parser.parse_into = parse_into  # type: ignore[method-assign]

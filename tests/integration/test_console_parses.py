"""A console request reads its SQL once (refresh.console.Script): the script is tokenized
once and each statement parsed once, however many times the request asks about it (which
statement needs Spark, the admission, running it). Counted at every entry of sqlglot's
tokenizer and parser (`Parser.parse`, and `Parser.parse_into`, which `parse_one(...,
into=...)` takes) and of our statement parser (refresh.core.statements)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from rest_framework.test import APIClient
from sqlglot.parser import Parser
from sqlglot.tokens import Tokenizer

from catalog import workers
from refresh.core import statements as st

pytestmark = pytest.mark.django_db


@contextmanager
def reads_of_sql(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter]:
    """How many times, inside the block, SQL was tokenized (`tokenize`), parsed by sqlglot
    (`sqlglot`) and parsed by our statement parser (`statement`; every entry of it, text or
    tokens, ends in `statements._parse`)."""
    seen: Counter = Counter()

    def counting(owner: object, name: str, what: str) -> None:
        original = getattr(owner, name)

        def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
            seen[what] += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(owner, name, counted)

    counting(Tokenizer, "tokenize", "tokenize")
    counting(Parser, "parse", "sqlglot")
    counting(Parser, "parse_into", "sqlglot")
    counting(st, "_parse", "statement")
    yield seen
    monkeypatch.undo()


def posted(user, sql: str, monkeypatch: pytest.MonkeyPatch) -> tuple[int, Counter]:
    client = APIClient()
    client.force_authenticate(user)
    with reads_of_sql(monkeypatch) as seen:
        response = client.post(
            "/api/statements/", {"sql": sql, "namespace": "sales"}, format="json"
        )
    return response.status_code, seen


def test_a_console_select_is_tokenized_once_and_parsed_once_in_its_web_request(viewer, monkeypatch):
    workers.beat("host:1")
    status, seen = posted(viewer, "SELECT id, label FROM orders WHERE id > 3;", monkeypatch)
    assert status == 202  # a job: nothing of it ran in the request
    assert seen == Counter(tokenize=1, statement=1)  # a query needs no sqlglot parse here


def test_a_script_is_tokenized_once_and_each_statement_parsed_once(viewer, monkeypatch):
    workers.beat("host:1")
    script = "SHOW MATERIALIZED TABLES;\n-- then\nSELECT 1;\nSELECT * FROM orders"
    status, seen = posted(viewer, script, monkeypatch)
    # The first statement runs here; the second becomes the job, with the third.
    assert status == 202
    assert seen == Counter(tokenize=1, statement=2)


def test_the_counter_sees_a_parse_one_into_a_type(monkeypatch):
    import sqlglot
    from sqlglot import exp

    with reads_of_sql(monkeypatch) as seen:
        sqlglot.parse_one("a = 1", into=exp.Condition, read="spark")
    assert seen == Counter(tokenize=1, sqlglot=1)

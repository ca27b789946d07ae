"""Searching views' SQL goes through a trigram index (migration 0006: FTS5 on SQLite, pg_trgm's
GIN index on PostgreSQL) when the text is rare, and walks the list when it is common; either
way it finds what reading every SQL with `icontains` finds: the same views, user text taken
literally, kept in step as views are created, replaced and dropped."""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from catalog import selectors, services
from catalog.models import CatalogObject, ViewRepresentation

pytestmark = pytest.mark.django_db

ODD_SQL = {
    "pct": "SELECT '100%' AS share",
    "under": "SELECT 1 AS a_b",
    "quotes": "SELECT 'it''s' AS `q\"uote`",
    "backslash": "SELECT 'a\\b' AS path",
    "unicode": "SELECT 'Größe café ☃' AS label",
    "plain": "SELECT 100 AS share, 1 AS ab, 'ab' AS path, 'caf' AS label",
}


@pytest.fixture
def odd():
    services.create_namespace(name="odd")
    for name, sql in ODD_SQL.items():
        services.create_view(namespace="odd", name=name, sql=sql)


def plain_scan(text: str) -> list[int]:
    """What the search gave before the index: every view's SQL read with `icontains`."""
    in_sql = ViewRepresentation.objects.filter(sql__icontains=text).values("version__view_id")
    ids = CatalogObject.objects.filter(pk__in=in_sql).order_by("namespace__name", "name")
    return list(ids.values_list("pk", flat=True))


def found(text: str) -> list[int]:
    return selectors.all_ids(selectors.search_ids(text, names=False, sql=True))


def names(ids: list[int]) -> set[str]:
    return set(CatalogObject.objects.filter(pk__in=ids).values_list("name", flat=True))


@pytest.fixture(params=["rare", "common"])
def frequency(request, monkeypatch):
    """Both ways of `selectors._in_sql`: through the index's candidates, and (when every
    text counts as common) the walk that looks at each object's SQL."""
    if request.param == "common":
        monkeypatch.setattr(selectors, "SQL_CANDIDATES", 0)
    return request.param


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("100%", {"pct"}),  # % is a character, not "anything"
        ("a_b", {"under"}),  # _ too
        ("'it'", {"quotes"}),
        ('q"uote', {"quotes"}),
        ("a\\b", {"backslash"}),
        ("größe", {"unicode"}),
        ("café ☃", {"unicode"}),
        ("☃", {"unicode"}),  # shorter than a trigram: every SQL is read
        ("%", {"pct"}),
        ("ab", {"plain", "unicode"}),  # "label" too
        ("AS SHARE", {"pct", "plain"}),  # case does not matter
        ("no such text", set()),
    ],
)
def test_user_text_is_matched_literally_as_reading_every_sql_would(odd, frequency, text, expected):
    assert names(found(text)) == expected
    assert found(text) == plain_scan(text)


def test_a_rare_text_is_looked_up_in_the_trigram_index(odd):
    with CaptureQueriesContext(connection) as queries:
        assert names(found("café")) == {"unicode"}
    sql = " ".join(q["sql"] for q in queries.captured_queries)
    assert "EXISTS" not in sql.upper()
    if connection.vendor == "sqlite":
        assert f"{selectors.SQL_FTS_TABLE} MATCH" in sql
        return
    assert connection.vendor == "postgresql"
    candidates = ViewRepresentation.objects.filter(sql__icontains="café").values("pk")
    query, params = candidates.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # a few rows: the planner would scan
        cursor.execute(f"EXPLAIN {query}", params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "catalog_viewrep_sql_trgm" in plan


def test_a_common_text_walks_the_list_and_stops_at_the_page(odd, monkeypatch):
    """More candidates than SQL_CANDIDATES: the views are not listed first; the query tests
    each object's SQL in list order, so a LIMIT ends it early."""
    monkeypatch.setattr(selectors, "SQL_CANDIDATES", 2)
    ids = selectors.search_ids("AS", names=False, sql=True)
    assert "EXISTS" in str(ids.query).upper()
    assert selectors.all_ids(ids) == plain_scan("AS") and len(plain_scan("AS")) == 6
    assert selectors.all_ids(ids[:2]) == plain_scan("AS")[:2]


def test_the_index_follows_views_replaced_and_dropped(odd):
    assert names(found("1 AS a_b")) == {"under"}
    services.replace_view(namespace="odd", name="under", sql="SELECT 2 AS renamed_col")
    assert names(found("renamed_col")) == {"under"}
    # The replaced version is retained, its SQL with it: as before the index, it still matches.
    assert found("1 AS a_b") == plain_scan("1 AS a_b")
    services.drop_view(namespace="odd", name="under")
    assert found("renamed_col") == [] and found("a_b") == [] == plain_scan("a_b")
    services.drop_view(namespace="odd", name="unicode")
    assert found("café") == [] and found("☃") == []
    ViewRepresentation.objects.filter(sql__contains="'100%'").update(sql="SELECT 'updated'")
    assert names(found("updated")) == {"pct"} and found("100%") == []


def test_the_search_page_finds_special_text_in_view_sql(client, viewer, odd):
    client.force_login(viewer)
    html = client.get(reverse("catalog:search"), {"q": "100%", "sql": "1"}).content.decode()
    results = re.search(r'id="results">(.*?)</table>', html, re.S).group(1)
    assert "odd.pct<" in results and "odd.plain<" not in results and "(1)" in html
    html = client.get(reverse("catalog:search"), {"q": "café ☃"}).content.decode()
    assert "No name contains" in html and "odd.unicode<" in html


@pytest.mark.django_db(transaction=True)
def test_the_migration_unapplies_and_applies_cleanly(odd):
    call_command("migrate", "catalog", "0005", verbosity=0)
    tables = connection.introspection.table_names()
    assert selectors.SQL_FTS_TABLE not in tables
    # Every app forward again: going back unapplied the migrations of apps that depend on
    # later catalog migrations (maintenance's tables) as well.
    call_command("migrate", verbosity=0)
    if connection.vendor == "sqlite":
        assert selectors.SQL_FTS_TABLE in connection.introspection.table_names()
    # Filled from the rows already there.
    assert names(found("café")) == {"unicode"} and names(found("a_b")) == {"under"}


def test_a_text_is_looked_up_by_its_end_first_and_whole_when_its_end_is_common(monkeypatch):
    """With two candidates at most (a view has two SQLs, Spark's and Trino's):
    "common_prefix_3" ends rarely (its end is asked first), "c2_shared" ends like every
    SQL but is in one view's (the whole text is asked), "shared_end" is in four views'
    (the list is walked); each finds what the plain scan finds."""
    monkeypatch.setattr(selectors, "SQL_CANDIDATES", 2)
    services.create_namespace(name="tails")
    for i in range(4):
        services.create_view(namespace="tails", name=f"v{i}", sql=f"SELECT 1 AS c{i}_shared_end")
        services.create_view(namespace="tails", name=f"p{i}", sql=f"SELECT 2 AS common_prefix_{i}")
    for text, expected in (
        ("common_prefix_3", {"p3"}),
        ("c2_shared", {"v2"}),
        ("shared_end", {"v0", "v1", "v2", "v3"}),
    ):
        assert names(found(text)) == expected
        assert found(text) == plain_scan(text)

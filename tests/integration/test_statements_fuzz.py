"""Hostile bodies for `POST /api/statements/` with `dry_run` (the plan of a pipeline): any
JSON a client sends is answered with JSON, a 200 plan or a 4xx naming the problem, never a
500, and a plan writes nothing (no object, no version, no run, no job, no event)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from catalog.models import CatalogEvent, SparkJob
from refresh.models import MaterializedTable, MaterializedTableVersion, RefreshRun
from tests.integration.test_mt_pipelines import api, dispatched, sales  # noqa: F401

pytestmark = pytest.mark.django_db

#: Pieces of the statement language, hostile text and odd characters, glued at random.
PIECES = [
    "CREATE OR ALTER MATERIALIZED TABLE",
    "CREATE MATERIALIZED TABLE",
    "SHOW CREATE MATERIALIZED TABLE",
    "ALTER MATERIALIZED TABLE",
    "t",
    "`t`",
    '"t"',
    "orders",
    "sales.orders",
    "(id BIGINT NOT NULL COMMENT 'x')",
    "(PRIMARY KEY (id) NOT ENFORCED)",
    "DISTRIBUTED BY HASH (id) INTO 4 BUCKETS",
    "DISTRIBUTED BY (id) INTO -1 BUCKETS",
    "DISTRIBUTED BY (id) INTO 99999999999999999999 BUCKETS",
    "FRESHNESS = INTERVAL '1' HOUR",
    "FRESHNESS = INTERVAL '-5' SECOND",
    "REFRESH_MODE = CONTINUOUS",
    "WITH ('a' = 'b')",
    "AS SELECT id, ds FROM orders",
    "AS SELECT * FROM text.`/etc/passwd`",
    "AS",
    "SELECT",
    ";",
    "--",
    "/*",
    "*/",
    "'",
    "`",
    ")",
    "(",
    "\u202e",
    "\x00",
    "\n",
    "é",
    "🙂",
]
statement = st.lists(st.sampled_from(PIECES), min_size=0, max_size=12).map(" ".join)
value = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)
body = st.fixed_dictionaries(
    {"sql": st.one_of(statement, value), "dry_run": st.one_of(st.just(True), value)},
    optional={"namespace": st.one_of(st.just("sales"), value)},
)


def counts() -> tuple[int, ...]:
    return (
        MaterializedTable.objects.count(),
        MaterializedTableVersion.objects.count(),
        RefreshRun.objects.count(),
        SparkJob.objects.count(),
        CatalogEvent.objects.count(),
    )


@settings(
    max_examples=150,
    derandomize=True,  # the same bodies every run: CI fails on a bug, not on a draw
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(sent=body)
def test_any_body_of_a_plan_is_answered_in_json_without_a_500_and_writes_nothing(
    api: APIClient,  # noqa: F811
    sales: str,  # noqa: F811
    dispatched: list[int],  # noqa: F811
    sent: dict,
):
    before = counts()
    response = api.post("/api/statements/", sent, format="json")
    assert response.status_code < 500, (sent, response.content[:500])
    assert response["Content-Type"].startswith("application/json"), sent
    if sent["dry_run"] is True or response.status_code >= 400:
        assert counts() == before, sent
    assert dispatched == [] or sent["dry_run"] is not True

"""Pipelines as code through /api/statements/: CREATE OR ALTER creates when absent and changes
only what differs when present (each change through its own statement's service; what may
not change refused in Flink's words), SHOW CREATE MATERIALIZED TABLE's text applied back is
"nothing to do" (no version, no run, no event), a schema part checked against Spark's schema,
DISTRIBUTED BY as bucket partition fields, and `"dry_run": true` planning a script without
changing anything or starting a job. Spark's analyzer is a fake that derives a schema from
the query's select list; runs sent to a worker are recorded."""

from __future__ import annotations

import pytest
import sqlglot
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType
from rest_framework.test import APIClient
from sqlglot import exp

from catalog import services, workers
from catalog.core.metadata_io import read_json
from catalog.models import CatalogEvent, SparkJob, Table
from refresh.models import MaterializedTable, MaterializedTableVersion, RefreshRun

pytestmark = pytest.mark.django_db

ORDERS = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "id", "type": "long", "required": True},
        {"id": 2, "name": "ds", "type": "string", "required": False},
        {"id": 3, "name": "amount", "type": "double", "required": False},
    ],
}
SPARK_TYPES = {"id": (LongType(), False), "ds": (StringType(), True)}


def fake_schema(query: str, *, namespace: str, **_: object) -> str:
    """What Spark would derive, near enough: `id` a non-null long, `ds` a string, COUNT a
    non-null long, anything else a nullable double."""
    fields = []
    for select in sqlglot.parse_one(query, read="spark").selects:
        name = select.alias_or_name
        if isinstance(select.unalias(), exp.Count):
            spark_type, nullable = LongType(), False
        else:
            spark_type, nullable = SPARK_TYPES.get(name, (DoubleType(), True))
        fields.append(StructField(name, spark_type, nullable))
    return StructType(fields).json()


@pytest.fixture
def dispatched(monkeypatch) -> list[int]:
    sent: list[int] = []
    monkeypatch.setattr("refresh.runs.dispatch", lambda run, **kw: sent.append(run.pk))
    return sent


@pytest.fixture
def sales(editor, dispatched, monkeypatch) -> str:
    monkeypatch.setattr("refresh.analysis.query_schema", fake_schema)
    workers.beat("fake-spark")
    services.create_namespace(name="sales", actor=editor)
    services.create_table(namespace="sales", name="orders", schema=ORDERS, actor=editor)
    return "sales"


@pytest.fixture
def api(editor) -> APIClient:
    client = APIClient()
    client.force_authenticate(editor)
    return client


def run_sql(client: APIClient, sql: str, *, dry_run: bool = False):
    body = {"sql": sql, "namespace": "sales", "dry_run": dry_run}
    return client.post("/api/statements/", body, format="json")


def ok(client: APIClient, sql: str) -> dict:
    response = run_sql(client, sql)
    assert response.status_code == 200, response.content
    return response.json()["results"][-1]


def refused(client: APIClient, sql: str) -> dict:
    response = run_sql(client, sql)
    assert response.status_code >= 400, response.content
    return response.json()["error"]


def counts() -> tuple[int, int, int, int]:
    """What any change leaves behind: events, definition versions, runs, Spark jobs."""
    return (
        CatalogEvent.objects.count(),
        MaterializedTableVersion.objects.count(),
        RefreshRun.objects.count(),
        SparkJob.objects.count(),
    )


DAILY = """CREATE OR ALTER MATERIALIZED TABLE daily (
  id BIGINT NOT NULL COMMENT 'the order',
  ds STRING,
  total DOUBLE,
  CONSTRAINT pk PRIMARY KEY (id) NOT ENFORCED
)
COMMENT 'Orders per day'
DISTRIBUTED BY HASH (id) INTO 4 BUCKETS
PARTITIONED BY (ds)
WITH ('partition.fields.ds.date-formatter' = 'yyyy-MM-dd')
FRESHNESS = INTERVAL '1' HOUR
AS SELECT id, ds, sum(amount) AS total FROM orders GROUP BY id, ds"""


def test_create_or_alter_creates_an_absent_table_with_its_schema_part_and_buckets(api, sales):
    result = ok(api, DAILY)
    assert result["plan"]["action"] == "create"
    mt = MaterializedTable.objects.get()
    metadata = read_json(mt.table.metadata_location)
    fields = {f["name"]: f for f in metadata["schemas"][-1]["fields"]}
    assert fields["id"]["doc"] == "the order" and "doc" not in fields["ds"]
    spec = metadata["partition-specs"][-1]["fields"]
    assert [(f["name"], f["transform"], f["source-id"]) for f in spec] == [
        ("ds", "identity", fields["ds"]["id"]),
        ("id_bucket", "bucket[4]", fields["id"]["id"]),
    ]
    distribution = metadata["properties"]["lakeview.materialized-table.distribution"]
    assert distribution == '{"columns": ["id"], "buckets": 4}'


def test_show_creates_text_applied_back_changes_nothing_and_says_so(api, sales):
    ok(api, DAILY)
    shown = ok(api, "SHOW CREATE MATERIALIZED TABLE daily")
    text = shown["rows"][0][0]
    assert text.startswith("CREATE OR ALTER MATERIALIZED TABLE `sales`.`daily` (")
    assert "`id` BIGINT NOT NULL COMMENT 'the order'" in text
    assert "DISTRIBUTED BY HASH (`id`) INTO 4 BUCKETS" in text
    before = counts()

    again = ok(api, text)
    also = ok(api, DAILY)

    assert again["plan"]["action"] == also["plan"]["action"] == "nothing"
    assert "nothing to do" in again["message"]
    assert counts() == before
    assert ok(api, "SHOW CREATE MATERIALIZED TABLE sales.daily")["rows"][0][0] == text


def test_create_or_alter_applies_only_what_differs_through_the_set_statements(
    api, sales, dispatched
):
    ok(api, DAILY)
    mt = MaterializedTable.objects.get()
    events = CatalogEvent.objects.count()
    changed = (
        DAILY.replace("INTERVAL '1' HOUR", "INTERVAL '2' HOUR")
        .replace("'Orders per day'", "'Orders by day'")
        .replace("'the order'", "'the order id'")
        .replace(
            "WITH ('partition.fields.ds.date-formatter' = 'yyyy-MM-dd')",
            "WITH ('partition.fields.ds.date-formatter' = 'yyyyMMdd', "
            "'write.target-file-size-bytes' = '1048576')",
        )
        .replace("FRESHNESS", "FRESHNESS", 1)
    )
    result = ok(api, changed.replace("INTERVAL '2' HOUR", "INTERVAL '2' HOUR\nREFRESH_MODE = FULL"))

    assert result["plan"]["action"] == "alter"
    assert result["plan"]["changes"] == [
        "FRESHNESS: INTERVAL '1' HOUR -> INTERVAL '2' HOUR",
        "REFRESH_MODE: automatic (FULL) -> FULL",
        "SET 'partition.fields.ds.date-formatter': 'yyyy-MM-dd' -> 'yyyyMMdd'",
        "SET 'write.target-file-size-bytes': '1048576' (new)",
        "COMMENT: 'Orders per day' -> 'Orders by day'",
        "COMMENT of column 'id' -> 'the order id'",
    ]
    mt.refresh_from_db()
    assert (str(mt.freshness), mt.mode_is_explicit, mt.comment) == (
        "INTERVAL '2' HOUR",
        True,
        "Orders by day",
    )
    assert mt.options["write.target-file-size-bytes"] == "1048576"
    fields = read_json(mt.table.metadata_location)["schemas"][-1]["fields"]
    assert fields[0]["doc"] == "the order id"
    assert mt.versions.count() == 1  # no new definition
    assert CatalogEvent.objects.count() > events

    # Back to the first text: options reset, the mode automatic again.
    back = ok(api, DAILY)
    assert "RESET 'write.target-file-size-bytes'" in back["plan"]["changes"]
    assert "REFRESH_MODE: FULL -> automatic" in back["plan"]["changes"]
    assert ok(api, DAILY)["plan"]["action"] == "nothing"


def test_a_new_query_is_a_new_definition_version_built_by_a_rebuild(api, sales, dispatched):
    ok(api, DAILY)
    new_query = DAILY.replace(
        "sum(amount) AS total FROM", "sum(amount) AS total, count(*) AS n FROM"
    ).replace("  total DOUBLE,\n", "  total DOUBLE,\n  n BIGINT NOT NULL,\n")
    result = ok(api, new_query)
    mt = MaterializedTable.objects.get()
    assert result["plan"]["changes"] == [
        "query: a new definition version after 1, built by a rebuild (ALTER ... AS)"
    ]
    [rebuild] = RefreshRun.objects.filter(trigger=RefreshRun.Trigger.REBUILD)
    assert rebuild.definition_version == 2 and rebuild.pk in dispatched
    assert mt.versions.count() == 2
    # The same query again, spelled differently, while its rebuild runs: nothing to do.
    before = counts()
    assert ok(api, new_query.replace("count(*)", "COUNT( * )"))["plan"]["action"] == "nothing"
    assert counts() == before
    # Anything else waits for the rebuild, as SET FRESHNESS does.
    error = refused(api, new_query.replace("INTERVAL '1' HOUR", "INTERVAL '2' HOUR"))
    assert "while version 2 is being applied" in error["message"]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("PARTITIONED BY (ds)", "PARTITIONED BY (ds, id)"),
         "Changing the partition keys of materialized table sales.daily is not supported"),
        (("PRIMARY KEY (id)", "PRIMARY KEY (id, ds)"),
         "The current materialized table has already defined the primary key constraint "
         "[`id`]. You might want to drop it before adding a new one."),
        (("INTO 4 BUCKETS", "INTO 8 BUCKETS"),
         "Changing the distribution of materialized table sales.daily is not supported"),
        (("ds STRING,", "ds STRING NOT NULL,"),
         "Incompatible types for sink column 'ds' at position 2. The source column has type "
         "'STRING', while the target column has type 'STRING NOT NULL'."),
        (("total DOUBLE", "total BIGINT"),
         "Incompatible types for sink column 'total' at position 3."),
    ],
)  # fmt: skip
def test_what_cannot_change_is_refused_and_nothing_changes(api, sales, edit, message):
    ok(api, DAILY)
    before = counts()
    error = refused(api, DAILY.replace(*edit))
    assert message in error["message"]
    assert counts()[:3] == before[:3]


def test_create_or_alter_over_a_table_that_is_not_materialized_is_refused_in_flinks_words(
    api, sales
):
    error = refused(
        api,
        "CREATE OR ALTER MATERIALIZED TABLE orders FRESHNESS = INTERVAL '1' HOUR AS SELECT 1",
    )
    assert error["message"] == (
        "Table sales.orders is not a materialized table. Only materialized table support "
        "create or alter operation."
    )


def test_a_schema_part_the_query_does_not_give_is_refused_at_create_naming_the_column(api, sales):
    error = refused(
        api,
        "CREATE MATERIALIZED TABLE t (id BIGINT NOT NULL, missing STRING) "
        "FRESHNESS = INTERVAL '1' HOUR AS SELECT id FROM orders",
    )
    assert (
        "However, physical column `missing` could not be found in the query." in (error["message"])
    )
    assert not MaterializedTable.objects.exists()


def test_a_dry_run_plans_every_statement_and_changes_nothing(api, sales, viewer):
    ok(api, DAILY)
    before = counts()
    script = (
        DAILY.replace("INTERVAL '1' HOUR", "INTERVAL '2' HOUR") + ";\n"
        + DAILY + ";\n"
        + "CREATE MATERIALIZED TABLE weekly FRESHNESS = INTERVAL '1' DAY AS "
        "SELECT ds, sum(total) AS total FROM daily GROUP BY ds;\n"
        "CREATE OR ALTER MATERIALIZED TABLE monthly FRESHNESS = INTERVAL '1' DAY AS "
        "SELECT ds, total FROM weekly;\n"
        "CREATE MATERIALIZED TABLE broken FRESHNESS = INTERVAL '1' DAY AS\n"
        "  SELECT x FROM nowhere;\n"
        + DAILY.replace("PARTITIONED BY (ds)", "PARTITIONED BY (id)") + ";\n"
        "ALTER MATERIALIZED TABLE daily SET FRESHNESS = INTERVAL '3' HOUR;\n"
        "SHOW CREATE MATERIALIZED TABLE daily"
    )  # fmt: skip
    response = run_sql(api, script, dry_run=True)
    assert response.status_code == 200, response.content
    body = response.json()
    plans = [(r["plan"]["action"], r["ok"]) for r in body["results"]]
    assert plans == [
        ("alter", True),
        ("nothing", True),
        ("create", True),
        ("create", True),  # reads weekly, which the statement before creates
        ("refused", False),
        ("refused", False),
        ("alter", True),
        ("read", True),
    ]
    assert body["dry_run"] is True and body["refused"] == 2
    first = body["results"][0]["plan"]
    assert first["changes"] == ["FRESHNESS: INTERVAL '1' HOUR -> INTERVAL '2' HOUR"]
    broken = body["results"][4]
    assert broken["error"]["message"].startswith("Table or view not found: sales.nowhere")
    assert (broken["error"]["line"], broken["error"]["column"]) == (
        DAILY.count("\n") * 2 + 6,
        17,
    )
    assert counts() == before
    assert not MaterializedTable.objects.filter(table__name="weekly").exists()

    viewer_api = APIClient()
    viewer_api.force_authenticate(viewer)
    as_viewer = run_sql(viewer_api, DAILY, dry_run=True).json()["results"][0]
    assert as_viewer["plan"]["action"] == "refused"
    assert (
        "lacks the manage privilege on materialized table sales.daily"
        in (as_viewer["error"]["message"])
    )


def test_the_console_pages_plan_button_shows_each_statements_plan_and_changes_nothing(
    client, editor, sales
):
    client.force_login(editor)
    before = counts()
    response = client.post(
        "/console/", {"sql": f"{DAILY};\nSHOW MATERIALIZED TABLES", "namespace": "sales",
                      "action": "plan"},
    )  # fmt: skip
    assert response.status_code == 200
    page = response.content.decode()
    assert 'id="console-plan-results"' in page and 'data-action="create"' in page
    assert 'data-action="read"' in page
    assert counts() == before and not MaterializedTable.objects.exists()


def test_hostile_text_in_comments_and_options_round_trips_as_data(api, sales):
    hostile = "it's \\'; DROP TABLE orders; --\n`x` /* y */ \u202e"
    escaped = hostile.replace("\\", "\\\\").replace("'", "\\'")
    sql = (
        f"CREATE OR ALTER MATERIALIZED TABLE `we'ird``t` (ds STRING COMMENT '{escaped}')\n"
        f"COMMENT '{escaped}'\nWITH ('write.target-file-size-bytes' = '{escaped}')\n"
        "FRESHNESS = INTERVAL '1' HOUR AS SELECT ds FROM orders"
    )
    ok(api, sql)
    mt = MaterializedTable.objects.get()
    assert (mt.table.name, mt.comment, mt.options["write.target-file-size-bytes"]) == (
        "we'ird`t",
        hostile,
        hostile,
    )
    text = ok(api, "SHOW CREATE MATERIALIZED TABLE `we'ird``t`")["rows"][0][0]
    before = counts()
    assert ok(api, text)["plan"]["action"] == "nothing"
    assert counts() == before
    assert Table.objects.filter(namespace__name="sales", name="orders").exists()


def test_an_unchanged_definition_applies_with_no_worker_running_and_a_new_query_needs_one(
    api, sales, monkeypatch
):
    ok(api, DAILY)
    monkeypatch.setattr("catalog.workers.alive", lambda: False)
    before = counts()

    assert ok(api, DAILY.replace("INTERVAL '1' HOUR", "INTERVAL '2' HOUR"))["plan"]["action"] == (
        "alter"
    )
    error = refused(api, DAILY.replace("sum(amount)", "max(amount)"))

    assert error["status"] == 503 and "No refresh worker is running" in error["message"]
    assert counts()[1:] == before[1:]  # the freshness changed; no version, run or job


def test_the_incremental_policy_is_shown_by_show_create_and_planned_as_one_alter(api, sales):
    ok(api, DAILY)
    strict = DAILY.replace(
        "WITH ('partition.fields.ds.date-formatter' = 'yyyy-MM-dd')",
        "WITH ('partition.fields.ds.date-formatter' = 'yyyy-MM-dd', "
        "'refresh.incremental' = 'strict', 'refresh.incremental.max-change-ratio' = '0.1')",
    )
    assert ok(api, strict)["plan"]["changes"] == [
        "SET 'refresh.incremental': 'strict' (new)",
        "SET 'refresh.incremental.max-change-ratio': '0.1' (new)",
    ]
    text = ok(api, "SHOW CREATE MATERIALIZED TABLE daily")["rows"][0][0]
    assert "'refresh.incremental' = 'strict'" in text
    assert "'refresh.incremental.max-change-ratio' = '0.1'" in text
    detail = api.get("/api/namespaces/sales/materialized-tables/daily/")
    assert detail.json()["options"]["refresh.incremental"] == "strict"
    assert ok(api, text)["plan"]["action"] == "nothing"
    error = refused(api, strict.replace("'0.1'", "'2'"))
    assert "refresh.incremental.max-change-ratio" in error["message"]

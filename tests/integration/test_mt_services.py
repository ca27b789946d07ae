"""The materialized-table services' own rules: what a create checks against the schema Spark
derives (Flink's words), undoing a create whose pipeline cannot be set up, cycles, drops
refused while something reads the table, the definition in the table's properties, modes
re-planned by SET, one run per tick. Spark's analyzer is a fake returning a StructType's
JSON; sending runs to a worker is recorded (tests/spark runs the real ones)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django_celery_beat.models import PeriodicTask
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from catalog import services
from catalog.core.errors import (
    AlreadyExists,
    InvalidInput,
    SqlError,
    Unavailable,
)
from catalog.core.metadata_io import read_json
from catalog.models import CatalogEvent, Table
from refresh import definitions, runs, table_state
from refresh import services as mts
from refresh.core.freshness import Freshness, RefreshMode, TimeUnit
from refresh.models import MaterializedTable, RefreshRun

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
QUERY = "SELECT id, ds, amount * 2 AS doubled FROM orders"
RESULT = StructType(
    [
        StructField("id", LongType(), False),
        StructField("ds", StringType(), True),
        StructField("doubled", DoubleType(), True),
    ]
).json()


@pytest.fixture
def dispatched(monkeypatch) -> list[int]:
    sent: list[int] = []
    monkeypatch.setattr("refresh.runs.dispatch", lambda run, **kw: sent.append(run.pk))
    return sent


@pytest.fixture
def analyzer(monkeypatch) -> list[tuple[str, str]]:
    asked: list[tuple[str, str]] = []

    def query_schema(query: str, *, namespace: str, timeout: float | None = None) -> str:
        asked.append((query, namespace))
        return RESULT

    monkeypatch.setattr("refresh.analysis.query_schema", query_schema)
    return asked


@pytest.fixture
def sales(editor, analyzer, dispatched) -> str:
    services.create_namespace(name="sales", actor=editor)
    services.create_table(namespace="sales", name="orders", schema=ORDERS, actor=editor)
    return "sales"


def create(name: str = "wide", query: str = QUERY, **kwargs) -> MaterializedTable:
    arguments = {"freshness": Freshness(1, "HOUR"), "refresh_mode": None, **kwargs}
    return mts.create_materialized_table(namespace="sales", name=name, query=query, **arguments)


def nothing_named(name: str) -> bool:
    return (
        not Table.objects.filter(name=name).exists()
        and not MaterializedTable.objects.filter(table__name=name).exists()
        and not PeriodicTask.objects.filter(name__contains=f"sales.{name}").exists()
    )


def test_a_create_makes_the_table_the_schedule_and_the_first_run_with_the_definition_in_its_properties(  # noqa: E501
    sales, analyzer, dispatched, editor
):
    mt = create(primary_key=("id",), partitioned_by=("ds",), comment="twice", actor=editor)

    assert mt.state == MaterializedTable.State.ACTIVATED
    assert analyzer == [(QUERY, "sales")]
    [run] = mt.runs.all()
    assert (run.trigger, run.force, dispatched) == (RefreshRun.Trigger.CREATE, True, [run.pk])
    metadata = read_json(mt.table.metadata_location)
    properties = metadata["properties"]
    assert properties["lakeview.materialized-table.query"] == QUERY
    assert properties["lakeview.materialized-table.freshness"] == "INTERVAL '1' HOUR"
    assert properties["lakeview.materialized-table.refresh-mode"] == "FULL"
    assert properties["lakeview.materialized-table.state"] == "ACTIVATED"
    assert properties["comment"] == "twice"
    schema = metadata["schemas"][-1]
    assert [f["name"] for f in schema["fields"]] == ["id", "ds", "doubled"]
    assert schema["identifier-field-ids"] == [schema["fields"][0]["id"]]
    assert metadata["partition-specs"][-1]["fields"][0]["name"] == "ds"
    assert mt.sources == ["sales.orders"]
    assert PeriodicTask.objects.get(pk=mt.periodic_task_id).enabled


def test_suspend_writes_the_state_into_the_tables_properties(sales):
    mt = create()
    table_state.suspend(mt)
    mt.refresh_from_db()
    properties = read_json(mt.table.metadata_location)["properties"]
    assert properties["lakeview.materialized-table.state"] == "SUSPENDED"


@pytest.mark.parametrize(
    ("kwargs", "field", "words"),
    [
        (
            {"primary_key": ("ds",)},
            "primary_key",
            "Could not create a PRIMARY KEY with nullable column 'ds'.",
        ),
        (
            {"primary_key": ("nope",)},
            "primary_key",
            "Primary key column 'nope' not defined in the query schema. Available columns: "
            "['id', 'ds', 'doubled'].",
        ),
        (
            {"partitioned_by": ("nope",)},
            "partitioned_by",
            "Partition column 'nope' not defined in the query schema.",
        ),
        (
            {
                "partitioned_by": ("id",),
                "options": {"partition.fields.id.date-formatter": "yyyy-MM-dd"},
            },
            "options",
            "Materialized table option 'partition.fields.id.date-formatter' only supports "
            "referring to char, varchar and string type partition column. Column `id` type is "
            "LONG.",
        ),
        ({"options": {"colour": "blue"}}, "options", "Unknown option 'colour'"),
        (
            {"freshness": Freshness(1, "MINUTE"), "query": QUERY + " ORDER BY id"},
            "query",
            "cannot maintain this query: ORDER BY",
        ),
        (
            {
                "freshness": Freshness(1, "MINUTE"),
                "query": "SELECT ds, count(*) AS n FROM orders GROUP BY ds",
            },
            "query",
            "needs PRIMARY KEY (...) NOT ENFORCED",
        ),
        (
            {"freshness": Freshness(7, "MINUTE"), "refresh_mode": RefreshMode.FULL},
            "freshness",
            "only freshness that are factors of 60",
        ),
    ],
)
def test_a_create_the_schema_or_the_rules_refuse_creates_nothing(sales, kwargs, field, words):
    with pytest.raises(InvalidInput) as refused:
        create(**kwargs)
    assert words in refused.value.message
    assert refused.value.field == field
    assert nothing_named("wide")


def test_an_unknown_source_is_refused_at_its_line_and_column(sales):
    with pytest.raises(SqlError) as refused:
        create(query="SELECT id\nFROM sales.nope")
    assert (refused.value.line, refused.value.column) == (2, 12)
    assert "Table or view not found: sales.nope" in refused.value.message
    assert nothing_named("wide")


def test_a_name_that_is_taken_is_refused(sales):
    with pytest.raises(AlreadyExists, match="already exists: sales.orders"):
        create(name="orders")


def test_a_query_that_reads_itself_through_a_view_is_a_cycle(sales, editor):
    # A view may be made before its sources; this one reads the table about to be made.
    services.create_view(
        namespace="sales",
        name="v",
        sql="SELECT id, ds, doubled FROM sales.loop",
        allow_unknown_sources=True,
        actor=editor,
    )
    with pytest.raises(InvalidInput, match="cycle: sales.loop -> sales.v -> sales.loop"):
        create(name="loop", query="SELECT * FROM v")
    assert nothing_named("loop")


def test_a_create_whose_pipeline_cannot_be_set_up_is_undone(
    sales, monkeypatch, warehouse, django_capture_on_commit_callbacks
):
    def broker_down(run, **kwargs):
        raise Unavailable("The task queue cannot be reached: connection refused")

    monkeypatch.setattr("refresh.runs.dispatch", broker_down)
    with (
        django_capture_on_commit_callbacks(execute=True),
        pytest.raises(mts.PipelineFailed, match="create was undone: The task queue") as failed,
    ):
        create()
    assert failed.value.status == 503
    assert nothing_named("wide")
    assert not RefreshRun.objects.exists()
    assert not (warehouse / "sales" / "wide").exists(), "the table's files are purged"


def test_a_drop_is_refused_while_a_view_or_a_materialized_table_reads_the_table(sales, editor):
    base = create(name="base")
    create(name="derived", query="SELECT id, ds, doubled FROM base")
    services.create_view(namespace="sales", name="report", sql="SELECT id FROM base")

    with pytest.raises(table_state.InvalidState) as refused:
        mts.drop_materialized_table(base, actor=editor)
    assert "view sales.report" in refused.value.message
    assert "materialized table sales.derived" in refused.value.message
    assert Table.objects.filter(name="base").exists()


def test_a_drop_cancels_queued_runs_removes_the_schedule_and_the_table(sales, editor):
    mt = create()
    [run] = mt.runs.all()
    mts.drop_materialized_table(mt, actor=editor)
    run.refresh_from_db()
    assert run.state == RefreshRun.State.CANCELLED
    assert nothing_named("wide")


def test_set_freshness_replans_the_schedule_and_switches_to_the_stream_and_back(sales):
    mt = create()
    mt = mts.set_freshness(mt, freshness=Freshness(2, "HOUR"))
    task = PeriodicTask.objects.get(pk=mt.periodic_task_id)
    assert (task.crontab.minute, task.crontab.hour) == ("0", "*/2")

    mt = mts.set_freshness(mt, freshness=Freshness(5, "SECOND"))
    assert mt.refresh_mode == "CONTINUOUS" and mt.periodic_task_id is None
    assert mt.stream_checkpoint == "", "the streaming process loads the table first"
    assert not PeriodicTask.objects.filter(pk=task.pk).exists()

    mt = mts.set_freshness(mt, freshness=Freshness(1, "HOUR"))
    assert mt.refresh_mode == "FULL" and mt.periodic_task_id is not None

    mt = mts.set_refresh_mode(mt, refresh_mode=RefreshMode.FULL)
    mt = mts.set_freshness(mt, freshness=Freshness(5, "MINUTE"))
    assert mt.refresh_mode == "FULL" and mt.mode_is_explicit
    task = PeriodicTask.objects.get(pk=mt.periodic_task_id)
    assert task.crontab.minute == "*/5"


def test_options_are_set_and_reset_in_the_definition_and_the_properties(sales):
    mt = create()
    mt = mts.set_options(mt, options={"write.format.default": "orc"})
    assert read_json(mt.table.metadata_location)["properties"]["write.format.default"] == "orc"
    mt = mts.reset_options(mt, keys=["write.format.default"])
    assert "write.format.default" not in read_json(mt.table.metadata_location)["properties"]
    with pytest.raises(InvalidInput, match="Unknown option 'nope'"):
        mts.set_options(mt, options={"nope": "1"})


def test_resume_options_go_to_the_scheduled_runs_not_the_definition(sales):
    mt = create()
    table_state.suspend(mt)
    mt = mts.resume(mt, options={"spark.sql.shuffle.partitions": "8"})
    assert mt.options == {}
    task = PeriodicTask.objects.get(pk=mt.periodic_task_id)
    assert '"spark.sql.shuffle.partitions": "8"' in task.kwargs
    with pytest.raises(InvalidInput, match="Unknown run option 'colour'"):
        table_state.suspend(mt)
        mts.resume(mt, options={"colour": "blue"})


def test_one_planned_tick_gets_one_run(sales):
    mt = create()
    tick = datetime(2024, 1, 2, tzinfo=UTC)
    runs.enqueue(mt, trigger=RefreshRun.Trigger.SCHEDULED, schedule_time=tick)
    with pytest.raises(AlreadyExists):
        runs.enqueue(mt, trigger=RefreshRun.Trigger.SCHEDULED, schedule_time=tick)
    assert mt.runs.filter(trigger=RefreshRun.Trigger.SCHEDULED).count() == 1


def test_a_manual_refresh_that_cannot_be_sent_is_failed_not_left_queued(sales, monkeypatch):
    mt = create()

    def broker_down(run, **kwargs):
        raise Unavailable("The task queue cannot be reached")

    monkeypatch.setattr("refresh.runs.dispatch", broker_down)
    with pytest.raises(Unavailable):
        runs.request_refresh(mt)
    latest = mt.runs.order_by("-id").first()
    assert latest.state == RefreshRun.State.FAILED
    assert "task queue" in latest.error


def _fields(mt: MaterializedTable) -> list[tuple[str, int, str]]:
    metadata = read_json(mt.table.metadata_location)
    schema = next(s for s in metadata["schemas"] if s["schema-id"] == metadata["current-schema-id"])
    return [(f["name"], f["id"], f["type"]) for f in schema["fields"]]


WIDER = StructType(
    [
        StructField("id", LongType(), False),
        StructField("ds", StringType(), True),
        StructField("doubled", StringType(), True),  # double -> string
        StructField("tripled", DoubleType(), True),  # added
    ]
).json()
WIDER_QUERY = "SELECT id, ds, cast(amount AS STRING) AS doubled, amount * 3 AS tripled FROM orders"


def test_alter_as_changes_nothing_readers_see_until_its_rebuild_commits(
    sales, monkeypatch, editor, dispatched
):
    mt = create(partitioned_by=("ds",))
    fields_before, metadata_before = _fields(mt), mt.table.metadata_location
    monkeypatch.setattr("refresh.analysis.query_schema", lambda q, **kw: WIDER)

    run = definitions.alter_query(mt, query=WIDER_QUERY, actor=editor)

    mt.refresh_from_db()
    mt.table.refresh_from_db()
    assert (run.trigger, run.definition_version, run.force) == ("REBUILD", 2, True)
    assert run.pk in dispatched
    assert mt.current_version == 1 and mt.query == QUERY
    assert mt.table.metadata_location == metadata_before and _fields(mt) == fields_before
    assert [v.version_id for v in mt.versions.all()] == [1, 2]
    pending = definitions.pending_change(mt)
    assert (pending.version_id, pending.outcome, pending.run_id) == (2, "PENDING", run.pk)
    with pytest.raises(table_state.InvalidState, match="version 2 is being applied"):
        definitions.alter_query(mt, query=QUERY, actor=editor)
    with pytest.raises(table_state.InvalidState, match="being applied"):
        mts.set_freshness(mt, freshness=Freshness(2, TimeUnit.HOUR))


def test_a_failed_rebuild_leaves_the_definition_and_says_why(sales, monkeypatch, editor):
    mt = create()
    monkeypatch.setattr("refresh.analysis.query_schema", lambda q, **kw: WIDER)
    run = definitions.alter_query(mt, query=WIDER_QUERY, actor=editor)

    runs.fail_rebuild(run, error="assert_true failed")

    mt.refresh_from_db()
    run.refresh_from_db()
    entry = mt.version_log.get(run=run)
    assert run.state == "FAILED" and "assert_true" in run.error
    assert (entry.outcome, entry.error) == ("FAILED", "assert_true failed")
    assert mt.current_version == 1 and mt.query == QUERY and mt.consecutive_failures == 0
    assert definitions.pending_change(mt) is None
    events = CatalogEvent.objects.for_object(mt.table).order_by("id")
    failed = events.get(action="alter_materialized_table_definition_failed")
    assert "version 2 did not take effect: assert_true failed" in failed.message
    # The next ALTER takes the next version id; the failed one stays in the versions.
    assert definitions.alter_query(mt, query=WIDER_QUERY, actor=editor).definition_version == 3


def test_an_applied_rebuild_makes_its_version_current_and_a_rollback_returns(
    sales, monkeypatch, editor
):
    mt = create()
    monkeypatch.setattr("refresh.analysis.query_schema", lambda q, **kw: WIDER)
    run = definitions.alter_query(mt, query=WIDER_QUERY, actor=editor)
    RefreshRun.objects.filter(pk=run.pk).update(state="RUNNING")

    runs.apply_rebuild(run, snapshot_id=None)

    mt.refresh_from_db()
    assert mt.current_version == 2 and mt.query == WIDER_QUERY
    assert mt.version_log.get(run=run).outcome == "APPLIED"
    assert RefreshRun.objects.get(pk=run.pk).state == "SUCCEEDED"

    monkeypatch.setattr("refresh.analysis.query_schema", lambda q, **kw: RESULT)
    back = definitions.rollback_definition(mt, version_id=1, actor=editor)
    assert back.definition_version == 1
    runs.apply_rebuild(back)
    mt.refresh_from_db()
    assert mt.current_version == 1 and mt.query == QUERY
    assert [e.operation for e in mt.version_log.all()] == ["create", "alter", "rollback"]
    with pytest.raises(InvalidInput, match="already current"):
        definitions.rollback_definition(mt, version_id=1)


def test_a_rebuild_whose_worker_died_is_settled_by_what_the_table_says(sales, monkeypatch, editor):
    from datetime import timedelta

    from django.utils import timezone

    from refresh.core.definition import VERSION_PROPERTY

    mt = create()
    monkeypatch.setattr("refresh.analysis.query_schema", lambda q, **kw: WIDER)
    lost = definitions.alter_query(mt, query=WIDER_QUERY, actor=editor)
    long_ago = timezone.now() - timedelta(hours=1)
    RefreshRun.objects.filter(pk=lost.pk).update(state="RUNNING", heartbeat_at=long_ago)

    runs.fail_abandoned(silent_for=timedelta(minutes=1))  # its commit never landed

    assert mt.version_log.get(run=lost).outcome == "FAILED"
    landed = definitions.alter_query(mt, query=WIDER_QUERY, actor=editor)
    RefreshRun.objects.filter(pk=landed.pk).update(state="RUNNING", heartbeat_at=long_ago)
    services.commit_table(
        namespace="sales",
        name="wide",
        requirements=[],
        updates=[{"action": "set-properties", "updates": {VERSION_PROPERTY: "3"}}],
    )

    runs.fail_abandoned(silent_for=timedelta(minutes=1))  # it landed, then the worker died

    mt.refresh_from_db()
    assert mt.version_log.get(run=landed).outcome == "APPLIED" and mt.current_version == 3


@pytest.mark.parametrize("call", ["reflect", "java_method"])
def test_a_query_that_calls_java_by_reflection_is_refused(sales, call):
    with pytest.raises(InvalidInput, match=f"{call}\\(\\) calls Java methods"):
        create(query=f"SELECT id, {call}('java.lang.System', 'exit', 1) AS x FROM orders")
    assert nothing_named("wide")


def test_a_refresh_right_after_a_switch_from_continuous_waits_until_the_stream_stopped(
    sales, dispatched
):
    from datetime import timedelta

    from refresh import runner

    mt = create()
    mt = mts.set_refresh_mode(mt, refresh_mode=RefreshMode.CONTINUOUS)
    MaterializedTable.objects.filter(pk=mt.pk).update(stream_status="RUNNING")
    mt = mts.set_refresh_mode(mt, refresh_mode=RefreshMode.FULL)
    run = runs.enqueue(mt, trigger=RefreshRun.Trigger.MANUAL)

    # Its last micro-batch may still commit: the refresh waits, queued, and comes back.
    assert runner._execute(run.pk) == "waiting for the stream to stop"
    run.refresh_from_db()
    assert (run.state, run.worker, run.started_at) == ("QUEUED", "", None)
    assert dispatched[-1] == run.pk

    MaterializedTable.objects.filter(pk=mt.pk).update(stream_status="STOPPED")
    assert not runner._stream_stopping(MaterializedTable.objects.get(pk=mt.pk))
    # A streaming process that never says so is taken as gone after the abandon time.
    MaterializedTable.objects.filter(pk=mt.pk).update(stream_status="RUNNING")
    long_ago = MaterializedTable.objects.get(pk=mt.pk)
    long_ago.updated_at -= timedelta(minutes=5)
    assert not runner._stream_stopping(long_ago)

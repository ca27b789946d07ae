"""`manage.py apply_sql <folder>`: ten interdependent CREATE OR ALTER definitions, in files
whose names sort against their dependencies, applied from scratch in dependency order;
applied again (nothing: no version, no run, no event, no job); applied with two edits
(exactly two changes). A refusal stops it before anything changes, with file, line and
column; so does a cycle. Spark's analyzer is the fake of test_mt_pipelines; runs sent to a
worker are recorded."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from catalog import services
from refresh.models import MaterializedTable, MaterializedTableVersion, RefreshRun
from tests.integration.test_mt_pipelines import ORDERS, counts, fake_schema

pytestmark = pytest.mark.django_db

#: name -> query; each reads the one(s) named in it. Files are numbered so that sorting them
#: by name puts every reader before what it reads.
DEFINITIONS = {
    "summary": "SELECT ds, count(*) AS n FROM top GROUP BY ds",
    "top": "SELECT ds, total, big_total FROM joined WHERE total > 0",
    "counts": "SELECT id, n FROM by_id",
    "weekly": "SELECT ds, total FROM daily",
    "joined": "SELECT d.ds, d.total, b.total AS big_total\n"
    "  FROM daily d JOIN daily_big b ON d.ds = b.ds",
    "daily_big": "SELECT ds, sum(amount) AS total FROM big GROUP BY ds",
    "big": "SELECT id, ds, amount FROM base_orders WHERE amount > 100",
    "by_id": "SELECT id, count(*) AS n FROM base_orders GROUP BY id",
    "daily": "SELECT ds, sum(amount) AS total FROM base_orders GROUP BY ds",
    "base_orders": "SELECT id, ds, amount FROM orders",
}
READS = {
    "summary": {"top"}, "top": {"joined"}, "counts": {"by_id"}, "weekly": {"daily"},
    "joined": {"daily", "daily_big"}, "daily_big": {"big"}, "big": {"base_orders"},
    "by_id": {"base_orders"}, "daily": {"base_orders"}, "base_orders": set(),
}  # fmt: skip


def definition(name: str, query: str, freshness: str = "1") -> str:
    extra = ""
    if name == "base_orders":  # one definition with a schema part and buckets
        extra = (
            "(\n  id BIGINT NOT NULL COMMENT 'order id',\n  ds STRING,\n  amount DOUBLE\n)\n"
            "DISTRIBUTED BY HASH (id) INTO 4 BUCKETS\n"
        )
    return (
        f"-- {name}: kept in git\nCREATE OR ALTER MATERIALIZED TABLE {name}\n{extra}"
        f"FRESHNESS = INTERVAL '{freshness}' HOUR\nAS {query};\n"
    )


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    for number, (name, query) in enumerate(DEFINITIONS.items()):
        (tmp_path / f"{number:02d}_{name}.sql").write_text(definition(name, query))
    return tmp_path


@pytest.fixture
def sales(editor, monkeypatch) -> list[int]:
    monkeypatch.setattr("refresh.analysis.query_schema", fake_schema)
    sent: list[int] = []
    monkeypatch.setattr("refresh.runs.dispatch", lambda run, **kw: sent.append(run.pk))
    services.create_namespace(name="sales", actor=editor)
    services.create_table(namespace="sales", name="orders", schema=ORDERS, actor=editor)
    return sent


def apply(folder: Path, *extra: str) -> str:
    out = io.StringIO()
    call_command("apply_sql", str(folder), "--namespace", "sales", "--user", "erin", *extra,
                 stdout=out)  # fmt: skip
    return out.getvalue()


def test_a_folder_applies_in_dependency_order_then_changes_nothing_then_only_its_edits(
    folder, sales
):
    output = apply(folder)

    assert "10 create" in output
    tables = {mt.table.name: mt for mt in MaterializedTable.objects.select_related("table")}
    assert set(tables) == set(DEFINITIONS)
    for name, sources in READS.items():  # every source was made before its readers
        assert all(tables[source].pk < tables[name].pk for source in sources), name
        assert set(tables[name].sources) == {f"sales.{s}" for s in sources or {"orders"}}
    assert MaterializedTableVersion.objects.count() == 10
    assert RefreshRun.objects.filter(trigger=RefreshRun.Trigger.CREATE).count() == 10
    plan_lines = output.split("Applied")[0]
    assert plan_lines.index("09_base_orders.sql") < plan_lines.index("00_summary.sql")

    before = counts()
    updated = {name: mt.updated_at for name, mt in tables.items()}
    again = apply(folder)

    assert "10 nothing" in again and "create" not in again.split("Applied")[0]
    assert counts() == before  # no event, no version, no run, no job
    assert {mt.table.name: mt.updated_at for mt in MaterializedTable.objects.all()} == updated

    (folder / "03_weekly.sql").write_text(definition("weekly", DEFINITIONS["weekly"], "2"))
    (folder / "02_counts.sql").write_text(
        definition("counts", "SELECT id, n, n * 2 AS twice FROM by_id")
    )
    edited = apply(folder)

    assert "2 alter, 8 nothing" in edited
    assert "FRESHNESS: INTERVAL '1' HOUR -> INTERVAL '2' HOUR" in edited
    after = {mt.table.name: mt for mt in MaterializedTable.objects.select_related("table")}
    changed = {name for name, mt in after.items() if mt.updated_at != updated[name]}
    assert changed == {"weekly"}  # counts changes when its rebuild commits
    assert str(after["weekly"].freshness) == "INTERVAL '2' HOUR"
    new_versions = MaterializedTableVersion.objects.filter(version_id=2)
    assert [v.materialized_table.table.name for v in new_versions] == ["counts"]
    rebuilds = RefreshRun.objects.filter(trigger=RefreshRun.Trigger.REBUILD)
    assert [run.table_name for run in rebuilds] == ["sales.counts"]
    assert counts()[1:3] == (before[1] + 1, before[2] + 1)


def test_the_plan_alone_changes_nothing(folder, sales):
    output = apply(folder, "--plan")
    assert "10 create" in output and "Applied" not in output
    assert not MaterializedTable.objects.exists()


def test_a_refusal_stops_before_anything_changes_with_its_file_line_and_column(folder, sales):
    (folder / "05_daily_big.sql").write_text(
        "-- reads a table that is not there\n"
        "CREATE OR ALTER MATERIALIZED TABLE daily_big\n"
        "FRESHNESS = INTERVAL '1' HOUR\n"
        "AS SELECT ds, sum(amount) AS total\n"
        "   FROM nowhere GROUP BY ds;\n"
    )
    with pytest.raises(CommandError) as caught:
        apply(folder)
    assert str(caught.value).startswith(
        "05_daily_big.sql:5:9: refused: Table or view not found: sales.nowhere"
    )
    assert not MaterializedTable.objects.exists()


def test_definitions_that_read_each_other_are_a_cycle_naming_their_files(tmp_path, sales):
    (tmp_path / "a.sql").write_text(definition("a", "SELECT ds FROM b"))
    (tmp_path / "b.sql").write_text(definition("b", "SELECT ds FROM a"))
    with pytest.raises(CommandError, match=r"cycle: a.sql \(sales.a\), b.sql \(sales.b\)"):
        apply(tmp_path)


def test_a_grant_in_a_folder_comes_after_the_table_it_names_and_is_kept(folder, sales):
    from django.contrib.auth.models import Group

    from catalog.models import Grant

    Group.objects.create(name="analysts")
    (folder / "000_grants.sql").write_text(
        "GRANT SELECT ON TABLE daily TO GROUP analysts;\n"
        "GRANT USE SCHEMA ON SCHEMA sales TO GROUP analysts;\n"
    )

    output = apply(folder)

    assert "10 create" in output and "2 grant" in output, output
    plan_lines = output.split("Applied")[0]
    assert plan_lines.index("08_daily.sql") < plan_lines.index("000_grants.sql:1")
    held = set(Grant.objects.filter(group__name="analysts").values_list("privilege", flat=True))
    assert held == {"read_data", "read_metadata"}
    again = apply(folder)
    assert "held already, unchanged" in again

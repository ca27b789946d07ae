"""Row filters and column masks inside Spark's plan (runtime.spark.policies), tried the way a
curious analyst would: a reader under `region = 'EU'` and a mask of `email` sees the EU rows
with masked emails through every form of query, no predicate of theirs is evaluated on a
hidden row (so no error says one is there, nor prints its values), and what would read
around the policies (metadata tables, file paths, writes, EXPLAIN COST) is refused naming
them. Without policies the same statements see everything: the attacks are real. In the
shared Spark session, over the app's REST catalog (`lv`)."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from catalog.core.errors import SqlError
from catalog.core.policies import TablePolicy
from refresh.spark import query
from runtime.spark import policies as row_policies
from runtime.spark import sandbox
from runtime.spark.session import session_with
from tests.live_server import CatalogServer
from tests.spark.conftest import rest_catalog_conf, rest_session

NS = "rowpol"
POLICY = TablePolicy(
    table=(NS, "people"),
    row_filter="region = 'EU'",
    masks=(("email", "concat('***@', substring_index(email, '@', -1))"),),
)
NAMED = "the row filter and the mask of email on rowpol.people"
#: What the reader must never see: the hidden rows' values and the visible rows' raw emails.
#: The hidden salaries are numbers no stage, task or line number of Spark's texts is likely
#: to hold by chance (a plain 300 once matched a task's id in an error's stack trace).
HIDDEN = (
    "carol@us.example",
    "dave@us.example",
    "alice@eu.example",
    "bob@eu.example",
    "300917",
    "400919",
)
MASKED = "***@eu.example"


@pytest.fixture(scope="module")
def session(spark: SparkSession, catalog_server: CatalogServer) -> SparkSession:
    """A console run's session in namespace rowpol, ANSI on (casts and divisions fail loudly,
    printing the value): `people` (two EU rows, two US rows, in two snapshots), `orders`
    naming them, an empty `copies`, and a view over `people` that filters nothing."""
    setup = rest_session(spark, catalog_server)
    setup.sql(f"CREATE NAMESPACE IF NOT EXISTS lv.{NS}")
    for name in ("people", "orders", "copies"):
        setup.sql(f"DROP TABLE IF EXISTS lv.{NS}.{name}")
    setup.sql(f"CREATE TABLE lv.{NS}.people (id BIGINT, region STRING, email STRING, salary INT)")
    # Each snapshot writes one file holding both regions: Iceberg cannot skip the hidden rows
    # by a file's statistics, so a predicate moved below the filter would meet them.
    setup.sql(
        f"INSERT INTO lv.{NS}.people SELECT /*+ REPARTITION(1) */ * FROM VALUES "
        "(1, 'EU', 'alice@eu.example', 100), (3, 'US', 'carol@us.example', 300917)"
    )
    setup.sql(
        f"INSERT INTO lv.{NS}.people SELECT /*+ REPARTITION(1) */ * FROM VALUES "
        "(2, 'EU', 'bob@eu.example', 200), (4, 'US', 'dave@us.example', 400919)"
    )
    setup.sql(f"CREATE TABLE lv.{NS}.orders (id BIGINT, person BIGINT)")
    setup.sql(f"INSERT INTO lv.{NS}.orders VALUES (10, 1), (30, 3), (40, 4)")
    setup.sql(f"CREATE TABLE lv.{NS}.copies (id BIGINT, email STRING)")
    setup.sql(f"CREATE OR REPLACE VIEW lv.{NS}.everyone AS SELECT id, email FROM lv.{NS}.people")
    conf = {
        **rest_catalog_conf(catalog_server),
        "spark.sql.defaultCatalog": "lv",
        "spark.sql.ansi.enabled": "true",
    }
    run = session_with(setup, catalog="lv", namespace=[NS], conf=conf)
    # Spark's analyzer reads ANSI from the thread's active session (as a console run's does).
    run._jvm.org.apache.spark.sql.SparkSession.setActiveSession(run._jsparkSession)  # noqa: SLF001
    return run


@pytest.fixture(scope="module")
def first_snapshot(session: SparkSession) -> int:
    [row] = session.sql(
        f"SELECT snapshot_id FROM lv.{NS}.people.snapshots ORDER BY committed_at LIMIT 1"
    ).collect()
    return row[0]


def rows(session: SparkSession, sql: str, policies=(POLICY,)) -> list[tuple]:
    prepared = query.prepare(session, sql, catalog="lv", namespace=[NS], policies=policies)
    table = query.fetch(prepared, max_rows=100)
    # By position: a self-join's columns share a name.
    return list(zip(*(column.to_pylist() for column in table.columns), strict=True))


def refusal(session: SparkSession, sql: str, policies=(POLICY,)) -> str:
    with pytest.raises(SqlError) as raised:
        rows(session, sql, policies)
    return str(raised.value)


def test_without_policies_a_reader_sees_every_row_and_value(session):
    assert rows(session, "SELECT id, region, email FROM people ORDER BY id", ()) == [
        (1, "EU", "alice@eu.example"),
        (2, "EU", "bob@eu.example"),
        (3, "US", "carol@us.example"),
        (4, "US", "dave@us.example"),
    ]


def test_a_reader_sees_the_filtered_rows_with_masked_values_and_the_tables_types(session):
    assert rows(session, "SELECT * FROM people ORDER BY id") == [
        (1, "EU", MASKED, 100),
        (2, "EU", MASKED, 200),
    ]
    described = rows(session, "DESCRIBE QUERY SELECT * FROM people")
    assert [row[:2] for row in described] == [
        ("id", "bigint"),
        ("region", "string"),
        ("email", "string"),
        ("salary", "int"),
    ]


#: Statements whose own predicates fail on a hidden (US) row, saying it is there and, for
#: most, printing its email. Under the policies each must answer the visible rows.
ATTACKS = [
    # (Not over `region`: Spark would fold the filter's `region = 'EU'` into such a predicate.)
    ("SELECT id FROM people WHERE CASE WHEN salary > 250 THEN raise_error(concat('salary ', "
     "salary)) ELSE true END ORDER BY id", [(1,), (2,)]),
    ("SELECT id FROM people WHERE assert_true(salary < 250) IS NULL ORDER BY id", [(1,), (2,)]),
    # ANSI casts and divisions print the value they fail on.
    ("SELECT id FROM people WHERE CAST(CASE WHEN salary > 250 THEN concat('x', salary) END "
     "AS INT) IS NULL ORDER BY id", [(1,), (2,)]),
    ("SELECT id FROM people WHERE 10 / CASE WHEN salary > 250 THEN 0 ELSE 1 END > 0 "
     "ORDER BY id", [(1,), (2,)]),
    # Functions that fail printing the value, ANSI or not.
    ("SELECT id FROM people WHERE to_number(CASE WHEN salary > 250 THEN concat('x', salary) "
     "ELSE '1' END, '9') > 0 ORDER BY id", [(1,), (2,)]),
    ("SELECT id FROM people WHERE from_json(CASE WHEN salary > 250 THEN concat('x', salary) "
     "ELSE '{}' END, 'a INT', map('mode', 'FAILFAST')) IS NOT NULL ORDER BY id", [(1,), (2,)]),
    # In a join's condition, a subquery, a CTE, an aggregate's filter.
    ("SELECT o.id FROM orders o JOIN people p ON o.person = p.id "
     "AND CAST(CASE WHEN p.salary > 250 THEN concat('x', p.salary) END AS INT) IS NULL",
     [(10,)]),
    ("SELECT id FROM orders WHERE person IN (SELECT id FROM people WHERE "
     "CAST(CASE WHEN salary > 250 THEN concat('x', salary) END AS INT) IS NULL)", [(10,)]),
    ("WITH p AS (SELECT * FROM people WHERE CASE WHEN salary > 250 THEN "
     "raise_error(concat('salary ', salary)) ELSE true END) SELECT count(*) FROM p", [(2,)]),
    ("SELECT o.id FROM orders o WHERE EXISTS (SELECT 1 FROM people p WHERE p.id = o.person "
     "AND CAST(CASE WHEN p.salary > 250 THEN concat('x', p.salary) END AS INT) IS NULL)",
     [(10,)]),
    ("SELECT o.id, (SELECT max(p.id) FROM people p WHERE p.id = o.person AND "
     "10 / CASE WHEN p.salary > 250 THEN 0 ELSE 1 END > 0) AS m FROM orders o ORDER BY o.id",
     [(10, 1), (30, None), (40, None)]),
    ("SELECT p.id FROM people p, LATERAL (SELECT CASE WHEN p.salary > 250 THEN "
     "raise_error(concat('salary ', p.salary)) END AS x) l WHERE l.x IS NULL ORDER BY p.id",
     [(1,), (2,)]),
    ("SELECT id FROM people WHERE CASE WHEN salary > 250 THEN raise_error(concat('salary ', "
     "salary)) ELSE true END ORDER BY id LIMIT 1", [(1,)]),
    ("SELECT count(*) FROM people WHERE salary < 250 OR CAST(concat('x', salary) AS INT) = 1",
     [(2,)]),
    ("SELECT count(*) FILTER (WHERE CAST(CASE WHEN salary > 250 THEN concat('x', salary) END "
     "AS INT) > 0) FROM people", [(0,)]),
]  # fmt: skip


#: The same filter through a subquery: Spark turns it into a semi-join, and would push the
#: reader's predicates below it (and evaluate predicates with subqueries last).
BY_SUBQUERY = TablePolicy(
    table=POLICY.table, row_filter="region IN (SELECT col1 FROM VALUES ('EU'))", masks=POLICY.masks
)


@pytest.mark.parametrize("policy", [POLICY, BY_SUBQUERY], ids=["plain", "subquery"])
@pytest.mark.parametrize(("sql", "seen"), ATTACKS)
def test_no_predicate_of_the_reader_is_evaluated_on_a_row_the_filter_hides(
    session, sql, seen, policy
):
    assert rows(session, sql, (policy,)) == seen
    # Without the policies the very same statement fails on a hidden row: the attack is real.
    with pytest.raises(Exception):  # noqa: B017, PT011 - Spark's error, whichever
        rows(session, sql, ())


def test_an_error_on_a_visible_row_prints_the_masked_value_only(session):
    with pytest.raises(Exception) as raised:  # noqa: PT011 - Spark's error when rows are read
        rows(session, "SELECT CAST(email AS INT) FROM people")
    text = str(raised.value)
    assert MASKED in text
    assert not [secret for secret in HIDDEN if secret in text]


AGGREGATES = [
    ("SELECT count(*) FROM people", [(2,)]),
    # A masked value's existence is not revealed by a count over its raw value.
    ("SELECT count(*) FROM people WHERE email = 'alice@eu.example'", [(0,)]),
    ("SELECT count(*) FROM people WHERE email = '***@eu.example'", [(2,)]),
    ("SELECT max(salary), count(DISTINCT email), max(email) FROM people", [(200, 1, MASKED)]),
    ("SELECT region, count(*) FROM people GROUP BY region", [("EU", 2)]),
]  # fmt: skip


@pytest.mark.parametrize(("sql", "seen"), AGGREGATES)
def test_aggregates_count_only_visible_rows_and_masked_values(session, sql, seen):
    assert rows(session, sql) == seen


FORMS = [
    # A self-join, subqueries of each kind, a CTE, a view over the table.
    ("SELECT a.id, b.id FROM people a JOIN people b ON a.id < b.id ORDER BY 1, 2", [(1, 2)]),
    ("SELECT (SELECT count(*) FROM people) AS n", [(2,)]),
    ("SELECT o.id FROM orders o WHERE EXISTS (SELECT 1 FROM people p WHERE p.id = o.person)",
     [(10,)]),
    ("SELECT id FROM orders WHERE person NOT IN (SELECT id FROM people) ORDER BY id",
     [(30,), (40,)]),
    ("WITH p AS (SELECT id, email FROM people) SELECT * FROM p ORDER BY id",
     [(1, MASKED), (2, MASKED)]),
    ("SELECT * FROM everyone ORDER BY id", [(1, MASKED), (2, MASKED)]),
    ("SELECT * FROM lv.rowpol.everyone WHERE id IN (SELECT id FROM everyone) ORDER BY id",
     [(1, MASKED), (2, MASKED)]),
]  # fmt: skip


@pytest.mark.parametrize(("sql", "seen"), FORMS)
def test_every_form_of_query_reads_the_table_through_its_policies(session, sql, seen):
    assert rows(session, sql) == seen


def test_time_travel_reads_the_old_snapshot_through_the_policies(session, first_snapshot):
    for sql in (
        f"SELECT id, email FROM people VERSION AS OF {first_snapshot}",
        f"SELECT id, email FROM rowpol.people.snapshot_id_{first_snapshot}",
    ):
        assert rows(session, sql, ()) == [(1, "alice@eu.example"), (3, "carol@us.example")]
        assert rows(session, sql) == [(1, MASKED)]
    when = session.sql(
        f"SELECT committed_at FROM lv.{NS}.people.snapshots WHERE snapshot_id = {first_snapshot}"
    ).collect()[0][0]
    sql = f"SELECT id, email FROM people TIMESTAMP AS OF '{when.isoformat()}'"
    assert rows(session, sql) == [(1, MASKED)]


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM rowpol.people.files",
        "SELECT * FROM lv.rowpol.people.snapshots",
        "SELECT * FROM rowpol.people.partitions",
        "SELECT * FROM rowpol.people.all_data_files",
        "SELECT * FROM rowpol.people.entries",
        "SELECT * FROM rowpol.people.changes",
        "SELECT * FROM rowpol.people.refs",
        "SELECT id FROM orders WHERE id IN (SELECT count(*) FROM rowpol.people.files)",
        "EXPLAIN SELECT * FROM rowpol.people.files",
    ],
)
def test_a_metadata_table_of_a_protected_table_is_refused_naming_the_policies(session, sql):
    text = refusal(session, sql)
    assert "metadata table of rowpol.people" in text
    assert NAMED in text
    rows(session, sql, ())  # readable without policies


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT input_file_name() FROM people",
        "SELECT _file FROM people",
        "SELECT id, _pos FROM people",
        "SELECT input_file_block_start(), input_file_block_length() FROM people",
    ],
)
def test_the_files_and_positions_of_a_protected_tables_rows_are_refused(session, sql):
    assert NAMED in refusal(session, sql)
    rows(session, sql, ())


def test_a_write_to_a_protected_table_is_refused_and_changes_nothing(session):
    for sql in (
        "UPDATE people SET salary = 0 WHERE id = 1",
        "DELETE FROM people WHERE region = 'US'",
        "MERGE INTO people t USING (SELECT 3 AS id) s ON t.id = s.id WHEN MATCHED THEN DELETE",
    ):
        with pytest.raises(sandbox.SandboxRefused) as raised:
            sandbox.data_change(
                session, sql, catalog="lv", target=[NS, "people"], policies=(POLICY,)
            )
        assert "rowpol.people cannot be changed" in str(raised.value)
        assert NAMED in str(raised.value)
    insert = sandbox.analyze(
        session, sandbox.parse(session, "INSERT INTO people VALUES (9, 'US', 'x', 1)")
    )
    with pytest.raises(sandbox.SandboxRefused, match=NAMED):
        row_policies.enforce(session, insert, [POLICY], catalog="lv")
    assert rows(session, "SELECT count(*), sum(salary) FROM people", ()) == [(4, 702136)]


def test_a_change_that_reads_a_protected_table_writes_only_what_its_reader_sees(session):
    sandbox.data_change(
        session,
        "MERGE INTO copies c USING people p ON c.id = p.id "
        "WHEN NOT MATCHED THEN INSERT (id, email) VALUES (p.id, p.email)",
        catalog="lv",
        target=[NS, "copies"],
        policies=(POLICY,),
    )
    assert rows(session, "SELECT * FROM copies ORDER BY id", ()) == [(1, MASKED), (2, MASKED)]


def test_a_change_of_another_table_cannot_use_the_hidden_rows(session):
    for sql in (
        "DELETE FROM orders WHERE person IN (SELECT id FROM people WHERE salary > 250)",
        "UPDATE orders SET person = (SELECT max(salary) FROM people) WHERE id = 40",
    ):
        sandbox.data_change(session, sql, catalog="lv", target=[NS, "orders"], policies=(POLICY,))
    assert rows(session, "SELECT id, person FROM orders ORDER BY id", ()) == [
        (10, 1),
        (30, 3),
        (40, 200),
    ]
    sandbox.data_change(
        session,
        "UPDATE orders SET person = 4 WHERE id = 40",
        catalog="lv",
        target=[NS, "orders"],
    )


def test_a_mask_may_give_null_in_a_column_that_holds_none(session):
    session.sql(
        f"CREATE TABLE IF NOT EXISTS lv.{NS}.strict (id BIGINT NOT NULL, s STRING NOT NULL)"
    )
    session.sql(f"INSERT OVERWRITE lv.{NS}.strict VALUES (1, 'a'), (2, 'b')")
    policy = TablePolicy(table=(NS, "strict"), masks=(("s", "NULL"),))
    sql = "SELECT id + 1, s, coalesce(s, 'z'), s IS NOT NULL FROM strict ORDER BY 1"
    assert rows(session, sql, (policy,)) == [(2, None, "z", False), (3, None, "z", False)]
    assert rows(session, sql, ()) == [(2, "a", "a", True), (3, "b", "b", True)]


def test_the_table_is_protected_under_each_name_the_session_gives_the_catalog(
    session, catalog_server
):
    conf = {
        **rest_catalog_conf(catalog_server),
        **rest_catalog_conf(catalog_server, "lake"),  # as session_with's alias_settings make it
        "spark.sql.defaultCatalog": "lv",
    }
    engine = session_with(session, catalog="lv", namespace=[NS], conf=conf, aliases=["lake"])
    sql = f"SELECT id, email FROM lake.{NS}.people ORDER BY id"
    assert rows(engine, sql) == [(1, MASKED), (2, MASKED)]
    assert "metadata table" in refusal(engine, f"SELECT * FROM lake.{NS}.people.files")


@pytest.mark.parametrize(
    "sql", ["SELECT o.id FROM orders o\n JOIN people p ON o.person = p.id", "TABLE everyone"]
)
def test_what_a_query_reads_and_where_it_names_it_are_the_same_under_policies(session, sql):
    """The grants are asked of `reads`, and a hidden read fails at its `places`."""
    under = query.prepare(session, sql, catalog="lv", namespace=[NS], policies=(POLICY,))
    bare = query.prepare(session, sql, catalog="lv", namespace=[NS])
    assert (under.reads, under.places) == (bare.reads, bare.places)
    assert under.reads


def test_a_frame_the_app_built_reads_through_the_policies_once_checked(session):
    frame = session.table(f"lv.{NS}.people").where("salary > 0").select("id", "email")
    checked = sandbox.check_frame(frame, catalog="lv", policies=[POLICY])
    assert sorted(tuple(row) for row in checked.collect()) == [(1, MASKED), (2, MASKED)]
    assert len(sandbox.check_frame(frame, catalog="lv").collect()) == 4


def test_sandbox_query_reads_through_the_policies(session):
    frame = sandbox.query(session, "SELECT id, email FROM people", catalog="lv", policies=[POLICY])
    assert sorted(tuple(row) for row in frame.collect()) == [(1, MASKED), (2, MASKED)]


@pytest.mark.parametrize(
    ("policy", "words"),
    [
        (TablePolicy(table=(NS, "people"), row_filter="country = 'EU'"), "the row filter on"),
        (TablePolicy(table=(NS, "people"), row_filter="region = "), "the row filter on"),
        (TablePolicy(table=(NS, "people"), masks=(("phone", "'x'"),)), "the mask of phone on"),
        (TablePolicy(table=(NS, "people"), masks=(("email", "upper(nope)"),)), "the mask of email"),
    ],
)
def test_a_policy_that_does_not_resolve_refuses_the_query_never_runs_it_unfiltered(
    session, policy, words
):
    text = refusal(session, "SELECT id FROM people", (policy,))
    assert f"{words}" in text
    assert "cannot be applied" in text


def test_a_policys_sql_passes_the_sandboxs_function_check(session):
    policy = TablePolicy(
        table=(NS, "people"),
        row_filter="reflect('java.lang.System', 'getProperty', 'user.home') IS NOT NULL",
    )
    assert "reflect" in refusal(session, "SELECT id FROM people", (policy,))


def test_explain_shows_the_plan_with_the_filter_and_cost_is_refused(session):
    [[text]] = rows(session, "EXPLAIN EXTENDED SELECT id FROM people WHERE salary > 0")
    assert "region" in text and "EU" in text  # the policy, as bound for this reader
    assert not [secret for secret in HIDDEN if secret in text]
    assert "count the rows the filter hides" in refusal(
        session, "EXPLAIN COST SELECT * FROM people"
    )
    rows(session, "EXPLAIN COST SELECT * FROM people", ())


def test_a_table_the_policies_do_not_name_is_read_as_it_is(session):
    assert rows(session, "SELECT id, person FROM orders ORDER BY id") == [
        (10, 1),
        (30, 3),
        (40, 4),
    ]
    [(files,)] = rows(session, "SELECT count(*) FROM rowpol.orders.files")
    assert files >= 1

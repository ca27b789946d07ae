"""The sandbox's policy over plan facts (runtime.spark.sandbox.check), for the shapes real
plans rarely show: calls into classes outside Spark and Iceberg, functions of other
catalogs, writes to something that is not a table. Real plans are in
tests/spark/test_sandbox.py."""

from __future__ import annotations

from dataclasses import replace

import pytest

from catalog.core.errors import SqlError
from runtime.spark import sandbox
from runtime.spark.sandbox import Policy, SandboxRefused, check

EXPR = "org.apache.spark.sql.catalyst.expressions."
PLAN = "org.apache.spark.sql.catalyst.plans.logical."
RELATION = "org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation"
ICEBERG = "org.apache.iceberg.spark.SparkCatalog"

POLICY = Policy(
    catalog="lv",
    function_classes={
        EXPR + "Upper": frozenset({"upper", "ucase"}),
        EXPR + "CallMethodViaReflection": frozenset({"reflect", "java_method"}),
        EXPR + "InputFileName": frozenset({"input_file_name"}),
        EXPR + "SomethingNew": frozenset({"something_new"}),
    },
)


def relation(catalog: str = "lv", catalog_class: str = ICEBERG, name: str = "t") -> dict:
    return {
        "kind": "plan", "class": RELATION, "leaf": True, "catalog": catalog,
        "catalog_class": catalog_class, "identifier": ["ns", name], "line": 1, "position": 14,
    }  # fmt: skip


def project(*expressions: dict) -> list[dict]:
    return [{"kind": "plan", "class": PLAN + "Project", "leaf": False}, *expressions]


def expression(class_name: str, **extra: object) -> dict:
    return {
        "kind": "expression", "class": class_name, "udf": False, "line": 1, "position": 7,
        **extra,
    }  # fmt: skip


def test_a_query_over_the_catalogs_tables_with_built_in_functions_passes():
    check([*project(expression(EXPR + "Upper", name="upper")), relation()], POLICY)


@pytest.mark.parametrize(
    ("facts", "words"),
    [
        ([*project(), relation(catalog="spark_catalog")], "spark_catalog.ns.t is not a table"),
        ([*project(), relation(catalog_class="evil.Catalog")], "is not a table or view"),
        ([*project(expression(EXPR + "CallMethodViaReflection", name="reflect")), relation()],
         "reflect() is not allowed"),
        ([*project(expression(EXPR + "SomethingNew", name="something_new")), relation()],
         "something_new() is not among the functions"),
        ([*project(expression(EXPR + "objects.StaticInvoke", target="java.lang.Runtime")),
          relation()], "java.lang.Runtime is not allowed"),
        ([*project(expression(EXPR + "ApplyFunctionExpression", target="evil.Function")),
          relation()], "evil.Function is not allowed"),
        ([*project(expression("org.apache.spark.sql.hive.HiveGenericUDF", name="h")),
          relation()], "HiveGenericUDF is not allowed"),
        ([*project(expression(EXPR + "ScalaUDF", name="mine", udf=True)), relation()],
         "mine is a user-defined function"),
        ([{"kind": "plan", "class": PLAN + "View", "leaf": False, "temp": True, "name": "tv"},
          relation()], "tv is not a table or view"),
        ([{"kind": "plan", "class": "org.apache.spark.sql.execution.datasources.LogicalRelation",
           "leaf": True}], "LogicalRelation is not a table or view"),
        ([{"kind": "plan", "class": PLAN + "AppendData", "leaf": False, "command": True,
           "target": {"class": RELATION, "catalog": "lv", "catalog_class": ICEBERG,
                      "identifier": ["ns", "t"]}}], "AppendData is a command"),
    ],
)  # fmt: skip
def test_ways_out_are_refused_at_their_place(facts, words):
    with pytest.raises(SqlError) as refused:
        check(facts, POLICY)
    assert words in refused.value.message


def test_a_refusal_inside_a_view_points_at_where_the_statement_names_the_view():
    inside = expression(
        EXPR + "CallMethodViaReflection", name="reflect", view="ns.v", view_line=2,
        view_position=4,
    )  # fmt: skip
    with pytest.raises(SqlError) as refused:
        check([*project(inside), relation()], POLICY)
    assert "in the SQL of view ns.v" in refused.value.message
    assert (refused.value.line, refused.value.column) == (2, 5)


def test_a_data_change_must_write_exactly_its_table():
    def write(name: str) -> dict:
        target = {"class": RELATION, "catalog": "lv", "catalog_class": ICEBERG,
                  "identifier": ["ns", name]}  # fmt: skip
        return {"kind": "plan", "class": PLAN + "ReplaceData", "leaf": False, "command": True,
                "target": target}  # fmt: skip

    policy = Policy(catalog="lv", write_target=("ns", "mt"))
    check([write("mt"), relation(name="mt")], policy)
    with pytest.raises(SqlError, match="changes lv.ns.other; only lv.ns.mt may be changed"):
        check([write("other"), relation(name="other")], policy)
    with pytest.raises(SqlError, match="Expected an UPDATE, DELETE or MERGE of lv.ns.mt"):
        check([*project(), relation(name="mt")], policy)


def test_the_apps_own_temporary_views_are_trusted_and_only_those():
    facts = [
        {"kind": "plan", "class": PLAN + "View", "leaf": False, "temp": True, "name": "batch"},
        {"kind": "plan", "class": "org.apache.spark.sql.execution.LogicalRDD", "leaf": True,
         "temp_view": "batch"},
    ]  # fmt: skip
    check(facts, Policy(catalog="lv", trusted_views=frozenset({"batch"})))
    with pytest.raises(SqlError):
        check(facts, POLICY)


def test_what_a_plan_reads_is_its_tables_and_its_views_as_themselves_once_each():
    from runtime.spark.sandbox import reads

    named_at = {"view": "lv.ns.`odd.view`", "view_line": 1, "view_position": 20}
    inside_view = {**relation(name="hidden"), **named_at}
    facts = [
        *project(),
        relation(name="orders"),
        {"kind": "plan", "class": PLAN + "SubqueryAlias", "leaf": False, **named_at},
        inside_view,
        relation(name="orders"),
        {**relation(name="snapshots"), "identifier": ["ns", "orders", "snapshots"],
         "position": 30},
        {"kind": "expression", "class": EXPR + "Upper", "view": "lv.other.v"},
    ]  # fmt: skip
    assert reads(facts, "lv") == [
        ("ns", "orders"),
        ("ns", "odd.view"),
        ("ns", "orders", "snapshots"),
    ]


def test_what_a_plan_reads_is_in_the_order_the_statement_names_it():
    from runtime.spark.sandbox import reads

    # A join's facts come right side first.
    facts = [
        *project(),
        {**relation(name="customers"), "line": 2, "position": 5},
        {"kind": "plan", "class": PLAN + "SubqueryAlias", "leaf": False, "view": "big",
         "view_line": 1, "view_position": 30},
        {**relation(name="orders"), "line": 1, "position": 14},
    ]  # fmt: skip
    assert reads(facts, "lv", namespace=["ns"]) == [
        ("ns", "orders"),
        ("ns", "big"),
        ("ns", "customers"),
    ]


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("lv.ns.v", ["lv", "ns", "v"]),
        ("lv.`a.b`.v", ["lv", "a.b", "v"]),
        ("`we``ird`.v", ["we`ird", "v"]),
        ("v", ["v"]),
    ],
)
def test_sparks_quoted_names_are_read_back_into_their_parts(text, parts):
    from runtime.spark.sandbox import _identifier_parts

    assert _identifier_parts(text) == parts


def test_an_engines_name_for_the_catalog_is_read_only_where_the_session_registered_it():
    """A run session registers `lake` (a name engines' views give the catalog) as the same
    REST catalog: its relations are the catalog's own there, and nowhere else."""
    check([*project(), relation(catalog="lake")], replace(POLICY, aliases=frozenset({"lake"})))
    with pytest.raises(SandboxRefused, match="lake.ns.t is not a table or view"):
        check([*project(), relation(catalog="lake")], POLICY)
    with pytest.raises(SandboxRefused, match="is not a table or view"):
        check(
            [*project(), relation(catalog="lake", catalog_class="evil.Catalog")],
            replace(POLICY, aliases=frozenset({"lake"})),
        )


def test_a_view_named_through_an_engines_name_for_the_catalog_is_read_as_the_catalogs_own():
    facts = [
        {"kind": "plan", "view": "lake.shop.v", "view_line": 1, "view_position": 14,
         "catalog_alias": True},
        {"kind": "plan", "view": "other.shop.w", "view_line": 1, "view_position": 40},
    ]  # fmt: skip
    assert sandbox.reads(facts, "lakeview", namespace=["ns"]) == [
        ("shop", "v"),
        ("other", "shop", "w"),  # not a name of this catalog: read as a nested namespace
    ]

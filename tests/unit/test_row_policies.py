"""The Python side of runtime.spark.policies, without Spark: which policies reach the JVM
helper, what it is told, and the refusals' words, each naming the policies."""

from __future__ import annotations

import json

import pytest

from catalog.core.policies import TablePolicy
from runtime.spark import policies
from runtime.spark.sandbox import SandboxRefused

ORDERS = TablePolicy(
    table=("sales", "orders"), row_filter="region = 'EU'", masks=(("email", "'***'"),)
)
NAMED = "the row filter and the mask of email on sales.orders"


def test_only_policies_that_change_what_a_reader_sees_reach_spark():
    empty = TablePolicy(table=("sales", "customers"))
    masks_only = TablePolicy(table=("sales", "people"), masks=(("ssn", "NULL"),))
    assert policies.effective([empty, ORDERS, masks_only]) == [ORDERS, masks_only]


def test_two_policies_for_one_table_are_a_mistake_of_the_caller_whatever_the_case():
    with pytest.raises(ValueError, match="Two policies for SALES.orders"):
        policies.effective([ORDERS, TablePolicy(table=("SALES", "orders"), row_filter="true")])


def test_the_helper_is_told_the_catalogs_names_and_each_policy_as_written():
    told = json.loads(policies.request([ORDERS], ["lv", "lake", "lv"]))
    assert told == {
        "catalogs": ["lake", "lv"],
        "policies": [
            {
                "table": ["sales", "orders"],
                "row_filter": "region = 'EU'",
                "masks": [["email", "'***'"]],
            }
        ],
    }


@pytest.mark.parametrize(
    ("kind", "detail", "words"),
    [
        ("metadata", "", "A metadata table of sales.orders cannot be read here"),
        ("write", "", "sales.orders cannot be changed by a reader whom"),
        ("file", "_file", "_file gives the files and row positions of sales.orders"),
        ("stream", "", "sales.orders cannot be read as a stream"),
        ("unresolved", "no column region", "cannot be applied (no column region)"),
    ],
)
def test_each_refusal_says_why_and_names_the_policies(kind, detail, words):
    refused = policies.refusal(kind, ORDERS, detail)
    assert isinstance(refused, SandboxRefused)
    assert words in str(refused)
    assert NAMED in str(refused)


def test_without_policies_the_plan_is_untouched_and_spark_is_not_asked():
    plan = object()
    assert policies.enforce(None, plan, [TablePolicy(table=("a", "b"))], catalog="lv") is plan  # type: ignore[arg-type]

"""Console queries meet the reader's row filters and column masks (issue 51): the worker's
Spark is handed the reader's policies, bound to them, for every query; the in-process
reader (which cannot apply them) leaves a protected table to Spark; an exempt reader's
query is not narrowed; and a result kept from before a policy changed is not served.
Spark is faked here (tests/integration/test_queries.py's `spark`); tests/spark/
test_row_policies.py shows what Spark does with the policies."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from catalog.core.policies import TablePolicy, bind
from catalog.services import policies as policy_services
from refresh.tasks import run_console_job
from tests.integration.test_queries import alive, api_for, items, spark, submitted  # noqa: F401

pytestmark = pytest.mark.django_db

FILTER = "id < 4 OR is_member('finance')"
MASK = "concat('masked for ', current_user())"


@pytest.fixture
def protected(editor, items):  # noqa: F811 - the fixture imported above
    """sales.items with a row filter and a mask of `name`, finance exempt from the filter."""
    finance = Group.objects.create(name="finance")
    policy_services.set_row_filter(
        namespace="sales", name="items", expression=FILTER, exempt_groups=["finance"], actor=editor
    )
    policy_services.set_column_mask(
        namespace="sales", name="items", column="name", expression=MASK, actor=editor
    )
    return finance


def test_a_readers_query_goes_to_spark_with_their_row_filter_and_masks_bound_to_them(
    viewer,
    alive,  # noqa: F811
    spark,  # noqa: F811
    protected,
):
    client = api_for(viewer)
    # A plain read of one table, which the in-process reader would answer without Spark.
    job = submitted(client, "SELECT * FROM items")["job"]
    assert run_console_job(job["id"]) == "SUCCEEDED"
    assert spark.prepared == [("SELECT * FROM items", "sales")]
    assert spark.policies == [
        (
            TablePolicy(
                table=("sales", "items"),
                row_filter=bind(FILTER, user="vic", groups={"viewer"}),
                masks=(("name", bind(MASK, user="vic", groups={"viewer"})),),
            ),
        )
    ]
    assert "'vic'" in spark.policies[0][0].masks[0][1]


def test_an_exempt_readers_query_meets_only_the_policies_they_are_not_exempt_from(
    viewer,
    alive,  # noqa: F811
    spark,  # noqa: F811
    protected,
):
    viewer.groups.add(protected)
    client = api_for(viewer)
    job = submitted(client, "SELECT id FROM items ORDER BY id")["job"]
    assert run_console_job(job["id"]) == "SUCCEEDED"
    [(policy,)] = spark.policies
    assert policy.row_filter is None  # finance is exempt from the filter, not the mask
    assert [column for column, _ in policy.masks] == ["name"]


def test_a_result_kept_from_before_a_policy_was_set_is_refused_until_run_again(
    viewer,
    editor,
    alive,  # noqa: F811
    spark,  # noqa: F811
    items,  # noqa: F811
):
    spark.reads = [("sales", "items")]
    client = api_for(viewer)
    job = submitted(client, "SELECT id FROM items ORDER BY id")["job"]
    assert run_console_job(job["id"]) == "SUCCEEDED"
    assert client.get(f"{job['url']}rows").status_code == 200
    policy_services.set_row_filter(
        namespace="sales", name="items", expression="id < 2", actor=editor
    )
    refused = client.get(f"{job['url']}rows")
    assert refused.status_code == 403
    said = str(refused.json())
    assert "sales.items" in said and "run it again" in said, said
    # Its download is refused alike.
    csv_url = client.get(job["url"]).json()["result"]["results"][0]["query"]["csv_url"]
    assert client.get(csv_url).status_code == 403

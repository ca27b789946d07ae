"""A verification's sample rows under row filters and column masks (issue 51 item 2): the
rows were recomputed under the owner's policies, so a reader whom a filter or mask of the
materialized table applies to sees the verdict and the counts, never the sample's rows or
values, on the API, in the verify job's answer, and on the table's page; an exempt reader, and
any reader of a table without policies, sees the sample."""

# ruff: noqa: F811 - the shared fixtures are imported by name
from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse

from bench.pages import seed_materialized, seed_tables, write_shared_metadata
from catalog import services
from catalog.core.access import READ_DATA
from catalog.models import Namespace
from refresh import operations
from refresh.models import MaterializedTable, Verification
from tests.integration.grant_fixtures import admin, alice, api_as, bob, give  # noqa: F401

pytestmark = pytest.mark.django_db

URL = "/api/namespaces/sales/materialized-tables/revenue/verifications/"
SECRET = "Z-SECRET-REGION"  # a value only the sample holds
SAMPLE = {
    "columns": ["id", "region", "revenue"],
    "missing": [[1, SECRET, 9.5]],
    "extra": [[2, "EU", 20.25]],
}


@pytest.fixture
def finance() -> Group:
    return Group.objects.create(name="finance")


@pytest.fixture
def revenue(warehouse, admin, alice, bob, finance):
    """sales.revenue, a materialized table alice and bob read, with one DIFFERS verdict
    whose sample holds SECRET, and one EXACT one."""
    ns = Namespace.objects.create(name="sales")
    [table_id] = seed_tables(ns, ["revenue"], write_shared_metadata(warehouse)[1])
    seed_materialized([table_id])
    mt = MaterializedTable.objects.get(table_id=table_id)
    Verification.objects.create(
        materialized_table=mt,
        snapshot_id=11,
        verdict=Verification.Verdict.DIFFERS,
        missing_rows=1,
        extra_rows=1,
        sample=SAMPLE,
    )
    Verification.objects.create(
        materialized_table=mt, snapshot_id=12, verdict=Verification.Verdict.EXACT
    )
    give(admin, READ_DATA, alice, namespace="sales")
    give(admin, READ_DATA, bob, namespace="sales")
    alice.groups.add(finance)
    return mt


def eu_only(admin) -> None:
    """A row filter on the materialized table, finance exempt (alice is in finance)."""
    services.set_row_filter(
        namespace="sales",
        name="revenue",
        expression="region = 'EU'",
        exempt_groups=["finance"],
        actor=admin,
    )


def differs(user) -> dict:
    response = api_as(user).get(URL)
    assert response.status_code == 200, response.content
    [newest, older] = response.json()["results"]
    assert newest["verdict"] == "EXACT" and newest["sample"] == {}
    return older


def page(user) -> str:
    client = Client()
    client.force_login(user)
    response = client.get(reverse("refresh:mt-detail", args=["sales", "revenue"]))
    assert response.status_code == 200
    return response.content.decode()


def test_without_policies_every_reader_sees_the_sample(revenue, bob):
    shown = differs(bob)
    assert shown["sample"] == SAMPLE and shown["sample_withheld"] is None
    assert SECRET in page(bob)


def test_a_reader_a_row_filter_applies_to_sees_counts_and_verdict_and_no_sample(
    revenue, admin, bob
):
    eu_only(admin)
    shown = differs(bob)
    assert (shown["verdict"], shown["missing_rows"], shown["extra_rows"]) == ("DIFFERS", 1, 1)
    assert shown["sample"] == {}
    assert shown["sample_withheld"].startswith("The row filter on sales.revenue applies to you")
    text = page(bob)
    assert "1 rows missing, 1 extra" in text
    assert "The row filter on sales.revenue applies to you" in text
    assert SECRET not in text and "20.25" not in text


def test_a_mask_withholds_the_sample_too(revenue, admin, bob):
    services.set_column_mask(
        namespace="sales", name="revenue", column="region", expression="'***'", actor=admin
    )
    shown = differs(bob)
    assert shown["sample"] == {} and "mask of region on sales.revenue" in shown["sample_withheld"]
    assert SECRET not in page(bob)


def test_an_exempt_reader_still_sees_the_sample(revenue, admin, alice):
    eu_only(admin)
    shown = differs(alice)
    assert shown["sample"] == SAMPLE and shown["sample_withheld"] is None
    assert SECRET in page(alice)


def test_the_verify_jobs_answer_withholds_the_sample_from_its_requester(
    revenue, admin, bob, monkeypatch
):
    """The verdicts a verify answers (the API's 200, a job's result) are its requester's."""
    eu_only(admin)
    done = list(Verification.objects.filter(verdict=Verification.Verdict.DIFFERS))
    monkeypatch.setattr(operations.verification, "verify", lambda mt, **_: done)
    arguments = {"namespace": "sales", "name": "revenue", "snapshots": 1}

    _, withheld = operations.verify_materialized_table(arguments, bob, None)
    _, superuser = operations.verify_materialized_table(arguments, admin, None)
    # Policies apply to superusers too, unless exempt (docs/security.md).
    for answer in (withheld, superuser):
        assert answer["verifications"][0]["sample"] == {}
        assert answer["verifications"][0]["missing_rows"] == 1
        assert SECRET not in str(answer)
    admin.groups.add(Group.objects.get(name="finance"))
    exempt = type(admin).objects.get(pk=admin.pk)  # its groups read afresh, as in a new job
    _, shown = operations.verify_materialized_table(arguments, exempt, None)
    assert shown["verifications"][0]["sample"] == SAMPLE


def test_the_schema_describes_the_withheld_sample(bob):
    schema = api_as(bob).get(reverse("api:schema"), {"format": "json"}).json()
    fields = schema["components"]["schemas"]["Verification"]["properties"]
    assert fields["sample_withheld"]["nullable"] is True
    assert "sample_withheld" in schema["components"]["schemas"]["Verification"]["required"]

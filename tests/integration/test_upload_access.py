"""Uploads under grants (issue 51 item 7): `create` needs the create privilege on the
namespace and `append` write_data on the table, on the API and on the upload page, dry runs
included; a namespace or table the user may not see answers exactly as a missing one (never
a 403, never other words); and after every refusal nothing was written: no table, no
snapshot, no file in the warehouse or the upload folder."""

# ruff: noqa: F811 - the shared fixtures are imported by name
from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from catalog.core.access import CREATE, READ_DATA, WRITE_DATA
from catalog.models import AccessEvent, Table, TableSnapshot
from catalog.services import namespaces
from tests.integration.grant_fixtures import admin, alice, api_as, give  # noqa: F401

pytestmark = pytest.mark.django_db

CSV = b"id,name\n1,ada\n2,alan\n"
CSRF = re.compile(r'name="csrfmiddlewaretoken" value="[^"]*"')


@pytest.fixture(autouse=True)
def upload_dir(tmp_path: Path, settings) -> Path:
    folder = tmp_path / "uploads"
    settings.UPLOAD_DIR = str(folder)
    return folder


def post(user, namespace: str, table: str, mode: str = "create", dry_run: bool = False):
    data = {
        "file": SimpleUploadedFile("rows.csv", CSV),
        "table": table,
        "mode": mode,
        "dry_run": "true" if dry_run else "false",
    }
    return api_as(user).post(f"/api/namespaces/{namespace}/tables/upload", data, format="multipart")


@pytest.fixture
def world(admin, alice):
    """shop.orders, which alice reads (so she sees shop, and holds nothing on it);
    shop.secret and vault.secret, which she may not see; mine, where she may create
    (so that she holds a privilege to change something, and the upload page is hers)."""
    for name in ("shop", "vault", "mine"):
        namespaces.create_namespace(name=name, actor=admin)
    for namespace, table in (("shop", "orders"), ("shop", "secret"), ("vault", "secret")):
        assert post(admin, namespace, table).status_code == 201
    give(admin, READ_DATA, alice, namespace="shop", name="orders")
    give(admin, CREATE, alice, namespace="mine")
    return alice


def state(warehouse: Path, upload_dir: Path) -> tuple:
    """Everything an upload could leave: tables, their metadata and snapshots, files."""
    tables = sorted(Table.objects.values_list("namespace__name", "name", "metadata_location"))
    files = sorted(str(p) for folder in (warehouse, upload_dir) for p in folder.rglob("*"))
    return tables, TableSnapshot.objects.count(), files


@pytest.fixture
def unchanged(world, warehouse, upload_dir):
    before = state(warehouse, upload_dir)
    yield
    assert state(warehouse, upload_dir) == before


def same_answer(hidden, missing, hidden_name: str, missing_name: str) -> None:
    """A hidden target answers as a missing one: same status, same body but for its name
    (and, on a page, the form's CSRF token, new on each page)."""
    assert hidden.status_code == missing.status_code == 404, hidden.content

    def body(answer, name: str) -> str:
        text = CSRF.sub("", answer.content.decode())
        return text.replace(f"/{name}/", "/NAME/").replace(name, "NAME")

    assert body(hidden, hidden_name) == body(missing, missing_name)


# -- the API -----------------------------------------------------------------------------------


@pytest.mark.parametrize("dry_run", [False, True])
def test_create_in_a_visible_namespace_without_create_is_a_403_naming_it(world, unchanged, dry_run):
    answer = post(world, "shop", "new_one", dry_run=dry_run)
    assert answer.status_code == 403, answer.content
    assert answer.json()["error"] == (
        "Forbidden: alice lacks the create privilege on namespace shop"
    )


@pytest.mark.parametrize("dry_run", [False, True])
def test_create_in_a_namespace_one_may_not_see_answers_as_a_missing_one(world, unchanged, dry_run):
    hidden = post(world, "vault", "new_one", dry_run=dry_run)
    missing = post(world, "nowhere", "new_one", dry_run=dry_run)
    same_answer(hidden, missing, "vault", "nowhere")
    assert hidden.json()["type"] == "NoSuchNamespace"


@pytest.mark.parametrize("dry_run", [False, True])
def test_append_to_a_visible_table_without_write_data_is_a_403_naming_it(world, unchanged, dry_run):
    answer = post(world, "shop", "orders", mode="append", dry_run=dry_run)
    assert answer.status_code == 403, answer.content
    assert answer.json()["error"] == (
        "Forbidden: alice lacks the write_data privilege on table shop.orders"
    )


@pytest.mark.parametrize("dry_run", [False, True])
def test_append_to_a_table_one_may_not_see_answers_as_a_missing_one(world, unchanged, dry_run):
    hidden = post(world, "shop", "secret", mode="append", dry_run=dry_run)
    missing = post(world, "shop", "absent", mode="append", dry_run=dry_run)
    same_answer(hidden, missing, "secret", "absent")
    assert hidden.json()["type"] == "NoSuchTable"
    # In a namespace she may not see, as in one that does not exist.
    hidden = post(world, "vault", "secret", mode="append", dry_run=dry_run)
    missing = post(world, "nowhere", "secret", mode="append", dry_run=dry_run)
    same_answer(hidden, missing, "vault", "nowhere")


def test_the_grants_that_were_missing_let_the_same_uploads_through(admin, world):
    give(admin, CREATE, world, namespace="shop")
    give(admin, WRITE_DATA, world, namespace="shop", name="orders")
    assert post(world, "shop", "new_one").status_code == 201
    assert post(world, "shop", "orders", mode="append").status_code == 200
    assert TableSnapshot.objects.filter(table__name="orders").count() == 2


# -- the upload page -----------------------------------------------------------------------------


def page_post(user, namespace: str, table: str, mode: str = "create"):
    client = Client()
    client.force_login(user)
    return client.post(
        reverse("catalog:upload", args=[namespace]),
        {"file": SimpleUploadedFile("rows.csv", CSV), "table": table, "mode": mode},
    )


def test_the_page_refuses_create_in_a_visible_namespace_without_create(world, unchanged):
    answer = page_post(world, "shop", "new_one")
    assert answer.status_code == 403
    assert "alice lacks the create privilege on namespace shop" in answer.content.decode()


def test_the_page_answers_a_namespace_one_may_not_see_as_a_missing_one(world, unchanged):
    for mode in ("create", "append"):
        same_answer(
            page_post(world, "vault", "secret", mode),
            page_post(world, "nowhere", "secret", mode),
            "vault",
            "nowhere",
        )


def test_the_page_refuses_append_to_a_visible_table_without_write_data(world, unchanged):
    answer = page_post(world, "shop", "orders", mode="append")
    assert answer.status_code == 403
    assert "alice lacks the write_data privilege on shop.orders" in answer.content.decode()


def test_the_page_answers_a_table_one_may_not_see_as_a_missing_one(world, unchanged, settings):
    settings.AUDIT_READS = True
    hidden = page_post(world, "shop", "secret", mode="append")
    missing = page_post(world, "shop", "absent", mode="append")
    same_answer(hidden, missing, "secret", "absent")
    assert "Table does not exist: shop.secret" in hidden.content.decode()
    # The audit knows the one that hid a table; the missing one refused nothing.
    [event] = AccessEvent.objects.filter(outcome="refused")
    assert (event.actor, event.status, event.reason) == (
        world,
        404,
        "hidden: Table does not exist: shop.secret",
    )


def test_the_page_stages_an_upload_where_create_is_granted(world, upload_dir):
    answer = page_post(world, "mine", "new_one")
    assert answer.status_code == 302, answer.content
    assert ".upload" in {p.suffix for p in upload_dir.rglob("*") if p.is_file()}

"""Every page route, walked for principals with and without each privilege: what a page
shows and what a form changes follow grants (catalog.access), not a role on the catalog.

The routes are read from Django's URL resolver as the page fuzz reads them
(test_pages_fuzz.ROUTES), with the same real objects: sales.orders (a table), sales.daily (a
materialized table over it), sales.recent (a view), sales.events (an attached table), a
credential, a Spark job, runs, an upload and a query of the editor's; and a namespace
`vault` holding `vault.secret_ledger`, which only some principals may see. For each
principal:

- a route naming a namespace or object it may not see answers exactly as the same route
  naming a missing one does (status and body, the CSRF token aside);
- any other page shows no name of a namespace or object it may not see;
- a POST of a full form body to every route changes nothing it may not change."""

# ruff: noqa: F811 - pytest fixtures imported from other test modules, then named as arguments

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from catalog import services
from catalog.core.access import MANAGE, READ_DATA, READ_METADATA
from catalog.models import CatalogClient, CatalogObject, Grant, Namespace
from maintenance.models import MaintenanceRun
from refresh.models import MaterializedTable, RefreshRun
from tests.integration.test_mt_api import dispatched, sales, spark  # noqa: F401 - fixtures
from tests.integration.test_mt_pages import daily  # noqa: F401 - fixture
from tests.integration.test_pages_fuzz import (  # noqa: F401 - fixtures
    FORM_FIELDS,
    PARAMETER,
    ROUTES,
    World,
    counts,
    nul_refused_as_on_postgresql,
    world,
)

pytestmark = pytest.mark.django_db

#: The hidden namespace and its object.
VAULT, SECRET = "vault", "secret_ledger"
#: What a route's missing twin names instead of a real value.
MISSING = {
    "namespace": "no_such_namespace",
    "name": "no_such_object",
    "client_id": "no_such_client",
    "job_id": "987654321",
    "run_id": "987654321",
    "query_id": "987654321",
    "token": "no_such_upload",
    "version_id": "987654",
}
CSRF = re.compile(rb'name="csrfmiddlewaretoken" value="[^"]*"|csrfToken[^,}]*|"csrf[^"]*": "[^"]*"')


@dataclass
class Principal:
    """A user and what they may see: `sees(namespace, name)` (name None: the namespace)."""

    label: str
    user: Any
    sees: Callable[[str, str | None], bool]
    #: What the user may change (namespace, name): the routes whose POST may write.
    changes: Callable[[str, str | None], bool]


def _grant(user: Any, privilege: str, namespace: str, name: str | None = None) -> None:
    ns = Namespace.objects.get(name=namespace)
    if name is None:
        Grant.objects.create(user=user, privilege=privilege, namespace=ns)
    else:
        obj = CatalogObject.objects.get(namespace=ns, name=name)
        Grant.objects.create(user=user, privilege=privilege, object=obj)


@pytest.fixture
def vault(editor) -> CatalogObject:
    services.create_namespace(name=VAULT, actor=editor)
    return services.create_view(
        namespace=VAULT, name=SECRET, sql="SELECT 42 AS amount", actor=editor
    )


def _user(django_user_model, name: str) -> Any:
    return django_user_model.objects.create_user(username=name, password=f"{name}-password")


@pytest.fixture
def principals(django_user_model, world, vault) -> dict[str, Principal]:
    """none: no grant at all; other: read_metadata on `vault` alone; reader: read_data on
    `sales`; manager: manage on sales.recent alone; reader managing vault: read_data on
    `sales` and manage on `vault`."""
    nobody = _user(django_user_model, "nadia")
    other = _user(django_user_model, "oscar")
    _grant(other, READ_METADATA, VAULT)
    reader = _user(django_user_model, "rita")
    _grant(reader, READ_DATA, "sales")
    manager = _user(django_user_model, "max")
    _grant(manager, MANAGE, "sales", world.view)
    # Holds a change privilege elsewhere, so that no page refuses them before it looks at
    # the object it would change.
    vault_manager = _user(django_user_model, "vera")
    _grant(vault_manager, READ_DATA, "sales")
    _grant(vault_manager, MANAGE, VAULT)
    never = lambda namespace, name: False  # noqa: E731
    return {
        "none": Principal("none", nobody, never, never),
        "other": Principal("other", other, lambda ns, name: ns == VAULT, never),
        "reader": Principal("reader", reader, lambda ns, name: ns == "sales", never),
        "manager": Principal(
            "manager",
            manager,
            lambda ns, name: ns == "sales" and name in (None, world.view),
            lambda ns, name: ns == "sales" and name == world.view,
        ),
        "reader managing vault": Principal(
            "reader managing vault",
            vault_manager,
            lambda ns, name: ns in ("sales", VAULT),
            lambda ns, name: ns == VAULT,
        ),
    }


def _object_of(world: World, route: str) -> tuple[str | None, str | None]:
    """The namespace and object a route names (None where it names none)."""
    names = {m.group("name") for m in PARAMETER.finditer(route)}
    namespace = "sales" if "namespace" in names else None
    name = world.value(route, "name") if "name" in names else None
    return namespace, name


def _twin(world: World, route: str, principal: Principal) -> str:
    """The route naming a missing namespace (when the principal may not see `sales`) or a
    missing object instead of the hidden one."""
    namespace, name = _object_of(world, route)
    if namespace is not None and not principal.sees(namespace, None):
        return world.url(route, namespace=MISSING["namespace"])
    return world.url(route, name=MISSING["name"])


def _shown(response: Any) -> bytes:
    return CSRF.sub(b"csrf", response.content)


def _markers(world: World, principal: Principal) -> list[str]:
    """Text that would show a name the principal may not see."""
    found = []
    if not principal.sees(VAULT, None):
        found += [VAULT, SECRET]
    if not principal.sees("sales", None):
        # Not "sales" alone: the search box's placeholder says "sales.region…".
        found += ["/namespaces/sales/", '"sales"', ">sales<"]
        found += [f"sales.{name}" for name in (world.table, world.mt, world.attached, world.view)]
    for name in (world.table, world.mt, world.attached, world.view):
        if principal.sees("sales", None) and not principal.sees("sales", name):
            found += [f"sales.{name}", f"/{name}/"]
    return found


#: Query strings sent with each GET of the routes that read them (the search finds by
#: name and SQL; none holds a hidden name, which the search page writes back).
QUERIES = {
    "": ["", "?q=ales", "?q=ault"],
    "search/": ["?q=ales", "?q=ault", "?q=ledger", "?q=SELECT&sql=1", "?q=42&sql=1", "?q=e"],
    "namespaces/<str:namespace>/tables/<str:name>/": ["", "?files=1", "?preview=1"],
    "lineage/<str:namespace>/<str:name>/": [""],
}


def _principal_ids() -> list[str]:
    return ["none", "other", "reader", "manager", "reader managing vault"]


@pytest.mark.parametrize("label", _principal_ids())
def test_every_page_shows_only_what_its_principal_may_see(label, principals, world):
    principal = principals[label]
    client = Client()
    client.force_login(principal.user)
    markers = _markers(world, principal)
    for route in ROUTES:
        namespace, name = _object_of(world, route)
        for query in QUERIES.get(route, [""]):
            url = world.url(route) + query
            response = client.get(url)
            assert response.status_code < 500, (url, response.status_code)
            hidden = namespace is not None and not principal.sees(namespace, name)
            if hidden:
                twin = client.get(_twin(world, route, principal) + query)
                assert (response.status_code, _shown(response)) == (
                    twin.status_code,
                    _shown(twin),
                ), f"{label}: GET {url} differs from its missing twin"
                continue
            body = response.content.decode(errors="replace")
            for marker in markers:
                assert marker not in body, f"{label}: GET {url} shows {marker!r}"


def _state() -> dict[str, Any]:
    """Every row count, and what a form changes in place: names, pointers, properties,
    states, policies, credentials."""
    return {
        **counts(),
        "objects": sorted(
            CatalogObject.objects.values_list(
                "pk", "namespace_id", "name", "metadata_location", "properties"
            ).order_by("pk")
        ),
        "namespaces": sorted(Namespace.objects.values_list("name", "properties")),
        "materialized": sorted(
            MaterializedTable.objects.values_list("pk", "state", "current_version")
        ),
        "runs": sorted(RefreshRun.objects.values_list("pk", "state", "cancel_requested_at")),
        "maintenance": sorted(
            MaintenanceRun.objects.values_list("pk", "state", "cancel_requested_at")
        ),
        "clients": sorted(CatalogClient.objects.values_list("pk", "active")),
        "groups": Group.objects.count(),
    }


def _form(world: World) -> dict[str, str]:
    """A body every form of the pages would take as a change that succeeds."""
    body = dict.fromkeys(FORM_FIELDS, "")
    body.update(
        name="made_by_post",
        sql="SELECT 7 AS id",
        dialect="spark",
        key="k",
        value="v",
        new_namespace="sales",
        new_name="renamed_by_post",
        kind="view",
        updates="k=v",
        removals="",
        namespace="sales",
        query="SELECT 1 AS id",
        snapshots="1",
        enabled="on",
        confirm="on",
        table="made_by_post",
        mode="create",
    )
    return body


#: Routes whose POST may write what is not the catalog's for a principal holding anything:
#: the console (a query of their own), their own credentials.
OWN_THINGS = ("console/", "credentials/")


@pytest.mark.parametrize("label", _principal_ids())
def test_no_form_changes_what_its_principal_may_not_change(label, principals, world):
    principal = principals[label]
    client = Client()
    client.force_login(principal.user)
    body = _form(world)
    for route in ROUTES:
        if route.startswith(OWN_THINGS):
            continue
        namespace, name = _object_of(world, route)
        if namespace is not None and principal.changes(namespace, name):
            continue
        before = _state()
        url = world.url(route)
        response = client.post(url, body)
        assert response.status_code < 500, (url, response.status_code)
        assert _state() == before, f"{label}: POST {url} ({response.status_code}) changed"


def test_the_form_bodies_do_change_things_for_an_editor(editor, world, vault):
    """The walk above means something: as an editor, the same bodies change the catalog
    through many of the routes."""
    client = Client()
    client.force_login(editor)
    body = _form(world)
    changed = []
    for route in ROUTES:
        if route.startswith(OWN_THINGS):
            continue
        before = _state()
        client.post(world.url(route), body)
        if _state() != before:
            changed.append(route)
    assert len(changed) >= 10, changed


def test_a_manager_of_one_view_changes_it_and_nothing_else(principals, world):
    manager = principals["manager"]
    client = Client()
    client.force_login(manager.user)
    prefix = f"/namespaces/sales/views/{world.view}/"
    response = client.post(prefix + "properties", {"key": "owner_note", "value": "mine"})
    assert response.status_code == 302
    view = CatalogObject.objects.get(namespace__name="sales", name=world.view)
    assert view.properties["owner_note"] == "mine"
    # The namespace's other objects and its create forms stay out of reach.
    assert client.get("/namespaces/sales/views/new").status_code == 403
    assert client.post(f"/namespaces/sales/tables/{world.table}/detach").status_code == 404


def test_read_metadata_shows_a_table_but_not_its_rows_nor_a_views_sql(
    django_user_model, world, vault
):
    looker = _user(django_user_model, "lena")
    _grant(looker, READ_METADATA, "sales")
    client = Client()
    client.force_login(looker)
    table = f"/namespaces/sales/tables/{world.attached}/"
    assert client.get(table).status_code == 200
    assert client.get(table + "?preview=1").status_code == 403
    assert client.get(table + "?files=1").status_code == 403
    assert client.get(f"/namespaces/sales/views/{world.view}/").status_code == 403
    # The search finds its name but not its SQL.
    assert world.view in client.get("/search/?q=recen").content.decode()
    assert world.view not in client.get("/search/?q=SELECT+1&sql=1").content.decode()


def test_the_home_page_and_search_list_what_a_namespace_grant_shows(principals, world):
    client = Client()
    client.force_login(principals["other"].user)
    home = client.get("/").content.decode()
    assert f"/namespaces/{VAULT}/" in home and "/namespaces/sales/" not in home
    found = client.get("/search/?q=ledger").content.decode()
    assert f"/namespaces/{VAULT}/views/{SECRET}/" in found
    client.force_login(principals["reader"].user)
    assert f"/namespaces/{VAULT}/" not in client.get("/").content.decode()
    assert SECRET not in client.get("/search/?q=ledger").content.decode()


@pytest.mark.parametrize(
    "url", ["/", "/search/?q=ales", "/search/?q=SELECT&sql=1", "/namespaces/sales/"]
)
def test_a_page_reads_the_grants_once_and_filters_its_list_in_the_query(
    url, principals, world, viewer
):
    """One query loads the principal's grants (catalog.access); the list's rows are
    filtered by its own query, so a user with a namespace grant costs what a viewer does."""
    used = {}
    for label, user in (("viewer", viewer), ("reader", principals["reader"].user)):
        client = Client()
        client.force_login(user)
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url).status_code == 200
        grants = [q["sql"] for q in queries.captured_queries if "catalog_grant" in q["sql"]]
        assert len(grants) == 1, (label, grants)
        used[label] = len(queries.captured_queries)
    assert used["reader"] <= used["viewer"], used


def test_lineage_leaves_out_what_reads_a_table_when_one_may_not_see_it(django_user_model, daily):
    """sales.daily reads sales.orders: a user who may see orders alone gets its lineage
    without daily; one who may see both gets the edge."""
    looker = _user(django_user_model, "lou")
    _grant(looker, READ_METADATA, "sales", "orders")
    client = Client()
    client.force_login(looker)
    page = client.get("/lineage/sales/orders/")
    assert page.status_code == 200
    assert "sales.daily" not in page.content.decode()
    assert client.get("/lineage/sales/daily/").status_code == 404
    _grant(looker, READ_METADATA, "sales", "daily")
    assert "sales.daily" in client.get("/lineage/sales/orders/").content.decode()


def _counts_row(html: str, namespace: str) -> list[str]:
    """The home page's count cells of a namespace's row."""
    row = re.search(rf'href="/namespaces/{namespace}/">{namespace}</a>.*?</tr>', html, re.S)
    assert row, html
    return re.findall(r"<td>(?:<a [^>]*>)?(\d+)(?:</a>)?</td>", row.group(0))


def test_the_home_page_counts_only_what_one_may_see_in_a_namespace(
    django_user_model, daily, viewer
):
    """sales holds orders and the materialized table daily: a user granted orders alone
    is told of one table, no materialized table."""
    looker = _user(django_user_model, "lou")
    _grant(looker, READ_METADATA, "sales", "orders")
    client = Client()
    client.force_login(looker)
    assert _counts_row(client.get("/").content.decode(), "sales") == ["0", "1", "0"]
    client.force_login(viewer)
    assert _counts_row(client.get("/").content.decode(), "sales") == ["0", "1", "1"]

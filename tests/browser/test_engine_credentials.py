"""An editor makes an engine credential on a page, and pyiceberg signs in with it."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def test_a_credential_made_on_the_page_lets_pyiceberg_list_namespaces(
    live_server, page, browser_editor, results_dir
):
    from pyiceberg.catalog.rest import RestCatalog

    from catalog import services

    services.create_namespace(name="sales")
    page.goto(f"{live_server.url}/login/?next=/")
    page.get_by_label("Username").fill("erin")
    page.get_by_label("Password").fill("erin-password")
    page.get_by_role("button", name="Log in").click()
    page.get_by_role("link", name="Engine credentials").click()

    page.get_by_label("Client name").fill("pyiceberg-laptop")
    page.get_by_role("button", name="Create credential").click()
    expect(page.locator("#new-credential")).to_contain_text("shown only this once")
    credential = page.locator("#credential").inner_text().strip()
    expect(page.locator("#spark-settings")).to_contain_text(
        f"spark.sql.catalog.lv.credential={credential}"
    )
    expect(page.locator("#pyiceberg-snippet")).to_contain_text(f"{live_server.url}/iceberg")
    page.screenshot(path=str(results_dir / "credentials-page.png"), full_page=True)

    # Closed at once: a kept-alive connection would hold a server thread's database connection.
    with RestCatalog("lv", uri=f"{live_server.url}/iceberg", credential=credential) as catalog:
        assert ("sales",) in catalog.list_namespaces()

    # Shown once: a reload of the list does not show the secret again.
    page.get_by_role("link", name="Engine credentials").click()
    secret = credential.partition(":")[2]
    assert secret not in page.content()

    # Revoked on the page: the credential no longer gets a token.
    page.get_by_role("button", name="Revoke").click()
    expect(page.locator(".messages")).to_contain_text("revoked")
    with pytest.raises(Exception, match="(?i)invalid|unauthorized|not authorized"):
        RestCatalog("lv2", uri=f"{live_server.url}/iceberg", credential=credential)

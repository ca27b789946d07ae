"""Engine credentials on a page: an editor makes and revokes their own catalog clients
(OAuth2 client credentials for the Iceberg REST catalog). The secret is shown once, with
the Spark settings and the pyiceberg line to paste."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from catalog.core.errors import CatalogError
from catalog.models import CatalogClient
from catalog.pages.access import catalog_page
from catalog.pages.forms import ClientForm
from catalog.services import credentials as auth


def _catalog_uri(request: HttpRequest) -> str:
    return request.build_absolute_uri("/iceberg")


def engine_settings(*, uri: str, credential: str, catalog: str = "lv") -> dict[str, str]:
    """What to paste into Spark and pyiceberg for one credential."""
    spark = "\n".join(
        [
            "spark.sql.extensions=org.apache.iceberg.spark.extensions."
            "IcebergSparkSessionExtensions",
            f"spark.sql.catalog.{catalog}=org.apache.iceberg.spark.SparkCatalog",
            f"spark.sql.catalog.{catalog}.type=rest",
            f"spark.sql.catalog.{catalog}.uri={uri}",
            f"spark.sql.catalog.{catalog}.credential={credential}",
            # A view's SQL is text another editor wrote, and Spark's parser otherwise puts
            # this session's environment and settings into `${env:...}`, `${...}` in it.
            "spark.sql.variable.substitute=false",
        ]
    )
    pyiceberg = (
        "from pyiceberg.catalog.rest import RestCatalog\n"
        f'catalog = RestCatalog("{catalog}", uri="{uri}", credential="{credential}")'
    )
    return {"spark": spark, "pyiceberg": pyiceberg}


@require_http_methods(["GET", "HEAD", "POST"])
@catalog_page(editors_only=True)
def credentials(request: HttpRequest) -> HttpResponse:
    form = ClientForm(request.POST or None)
    created = None
    if request.method == "POST" and form.is_valid():
        try:
            client, secret = auth.create_client(
                name=form.cleaned_data["name"], user=request.user, actor=request.user
            )
        except CatalogError as error:
            form.add_catalog_error(error)
        else:
            credential = f"{client.client_id}:{secret}"
            created = {
                "client": client,
                "credential": credential,
                **engine_settings(uri=_catalog_uri(request), credential=credential),
            }
            form = ClientForm()
    context = {
        "form": form,
        "created": created,
        "clients": CatalogClient.objects.filter(user=request.user).order_by("-created_at"),
        "example": engine_settings(uri=_catalog_uri(request), credential="CLIENT_ID:SECRET"),
        "catalog_name": settings.CATALOG_NAME,
    }
    response = render(request, "catalog/credentials.html", context)
    if created:
        response["Cache-Control"] = "no-store"  # the secret is shown only this once
    return response


@require_POST
@catalog_page(editors_only=True)
def credential_revoke(request: HttpRequest, client_id: str) -> HttpResponse:
    client = CatalogClient.objects.filter(client_id=client_id, user=request.user).first()
    if client is None:
        raise Http404("You have no such client")
    if auth.revoke_client(client=client, actor=request.user):
        messages.success(
            request,
            f"Client {client.name} revoked: engines using it are refused within "
            f"{int(auth.VERIFIED_TOKEN_TTL)} seconds.",
        )
    return redirect("catalog:credentials")

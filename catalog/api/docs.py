"""A plain page listing the API's operations, built from the OpenAPI schema.

drf-spectacular's Swagger UI and ReDoc views load their scripts from a CDN; this page needs
nothing but the server, so it works where the catalog has no internet access."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from drf_spectacular.generators import SchemaGenerator

_METHODS = ("get", "post", "put", "patch", "delete")


def docs(request: HttpRequest) -> HttpResponse:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    rows = []
    for path, operations in schema.get("paths", {}).items():
        for method in _METHODS:
            operation = operations.get(method)
            if operation is None:
                continue
            summary = operation.get("summary") or operation.get("description", "")
            rows.append((method.upper(), path, operation.get("operationId", ""), summary))
    info = schema.get("info", {})
    schema_url = reverse("api:schema")
    body = format_html(
        "<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head>"
        "<body><h1>{title}</h1><p>{description}</p>"
        "<p>OpenAPI schema: <a href='{url}'>YAML</a> · <a href='{url}?format=json'>JSON</a>"
        "</p><table><thead><tr><th>Method</th><th>Path</th><th>Operation</th><th>About</th>"
        "</tr></thead><tbody>{rows}</tbody></table></body></html>",
        title=info.get("title", "API"),
        description=info.get("description", ""),
        url=schema_url,
        rows=format_html_join(
            "",
            "<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
            rows,
        ),
    )
    return HttpResponse(body)

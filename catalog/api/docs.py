"""The API's documentation pages: Swagger UI at /api/docs/ and the OpenAPI schema at
/api/schema/.

Swagger UI's scripts and styles come from drf-spectacular-sidecar's static files, served by
the app (WhiteNoise) like its own CSS: nothing is loaded from a CDN, so the page works where
the catalog has no internet access. The schema is JSON by default (browsers show it in the
page instead of downloading a file); `?format=yaml` gives YAML as text, and clients that ask
for `application/yaml` or the OpenAPI media types by Accept still get them."""

from __future__ import annotations

from drf_spectacular.renderers import (
    OpenApiJsonRenderer,
    OpenApiJsonRenderer2,
    OpenApiYamlRenderer,
    OpenApiYamlRenderer2,
)
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView


class TextYamlRenderer(OpenApiYamlRenderer2):
    """YAML that a browser shows as text."""

    media_type = "text/yaml"


class SchemaView(SpectacularAPIView):
    renderer_classes = [
        OpenApiJsonRenderer2,
        TextYamlRenderer,
        OpenApiJsonRenderer,
        OpenApiYamlRenderer,
        OpenApiYamlRenderer2,
    ]


schema = SchemaView.as_view()
docs = SpectacularSwaggerView.as_view(url_name="api:schema")

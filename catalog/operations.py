"""The catalog's operations that may need a worker's Spark, registered as job kinds
(catalog.jobs.KINDS): previews Spark reads, views whose column types Spark derives. Each
takes JSON arguments and the acting user and returns what the web request would have
answered (an HTTP status and a JSON body), calling the same service function the API and
pages call. In a web request they run until they need Spark (NeedsWorker, before any
write); on a worker they run whole."""

from __future__ import annotations

import json
from typing import Any

from rest_framework.renderers import JSONRenderer

from catalog import previews, selectors
from catalog.jobs import kind
from catalog.models import SparkJob
from catalog.roles import VIEWER
from catalog.services import follow_attached, sql_views


def as_json(data: Any) -> dict[str, Any]:
    """DRF's data as plain JSON (dates as text), as the API would have sent it."""
    return json.loads(JSONRenderer().render(data))


@kind("preview_view", role=VIEWER)
def preview_view(arguments: dict[str, Any], actor: Any, job: SparkJob | None) -> tuple[int, dict]:
    view = selectors.get_view(arguments["namespace"], arguments["name"])
    result = previews.preview_view(
        view,
        columns=arguments.get("columns") or None,
        row_filter=arguments.get("row_filter") or None,
        limit=int(arguments.get("limit") or 100),
    )
    return 200, previews.body(result)


@kind("preview_table", role=VIEWER)
def preview_table(arguments: dict[str, Any], actor: Any, job: SparkJob | None) -> tuple[int, dict]:
    table = follow_attached(
        selectors.get_table(arguments["namespace"], arguments["name"]), actor=actor
    )
    result = previews.preview_table(
        table,
        columns=arguments.get("columns") or None,
        row_filter=arguments.get("row_filter") or None,
        snapshot_id=arguments.get("snapshot_id"),
        timestamp_ms=arguments.get("timestamp_ms"),
        limit=int(arguments.get("limit") or 100),
    )
    return 200, previews.body(result)


def _view_detail(view: Any) -> dict[str, Any]:
    from catalog.api.serializers import ViewDetailSerializer

    return as_json(ViewDetailSerializer(view).data)


@kind("create_view", done_page="catalog:view-detail")
def create_view(arguments: dict[str, Any], actor: Any, job: SparkJob | None) -> tuple[int, dict]:
    return 201, _view_detail(sql_views.create_view(**arguments, actor=actor))


@kind("replace_view", done_page="catalog:view-detail")
def replace_view(arguments: dict[str, Any], actor: Any, job: SparkJob | None) -> tuple[int, dict]:
    return 200, _view_detail(sql_views.replace_view(**arguments, actor=actor))

"""The operations that may need a worker's Spark, registered as job kinds
(refresh.spark_jobs.KINDS). Each takes JSON arguments and the acting user and returns what
the web request would have answered (an HTTP status and a JSON body); each calls the same
service function the API and pages call. In a web request they run until they need Spark
(NeedsWorker, before any write); on a worker they run whole."""

from __future__ import annotations

import json
from typing import Any

from rest_framework.renderers import JSONRenderer

from refresh import console, selectors, services
from refresh.core.freshness import Freshness, RefreshMode, TimeUnit
from refresh.models import SparkJob
from refresh.spark_jobs import kind, progress


def _json(data: Any) -> dict[str, Any]:
    """DRF's data as plain JSON (dates as text), as the API would have sent it."""
    return json.loads(JSONRenderer().render(data))


def _mt_detail(namespace: str, name: str) -> dict[str, Any]:
    from refresh.api.serializers import MaterializedTableDetailSerializer

    return _json(
        MaterializedTableDetailSerializer(selectors.get_materialized_table(namespace, name)).data
    )


@kind("statements")
def statements(arguments: dict[str, Any], actor: Any, job: SparkJob | None) -> tuple[int, dict]:
    """The rest of a console script, from statement `start`."""
    done: list[dict[str, Any]] = []

    def heard(result: console.StatementResult) -> None:
        done.append(result.as_dict())
        progress(job, {"results": done})

    results = console.execute(
        arguments["sql"],
        namespace=arguments.get("namespace"),
        actor=actor,
        start=int(arguments.get("start", 0)),
        progress=heard,
    )
    return console.answer(results)


@kind("create_materialized_table")
def create_materialized_table(
    arguments: dict[str, Any], actor: Any, job: SparkJob | None
) -> tuple[int, dict]:
    args = dict(arguments)
    mode = args.pop("refresh_mode", None)
    freshness = Freshness(int(args.pop("freshness_value")), TimeUnit(args.pop("freshness_unit")))
    mt = services.create_materialized_table(
        **args,
        freshness=freshness,
        refresh_mode=RefreshMode(mode) if mode else None,
        actor=actor,
    )
    return 201, _mt_detail(mt.table.namespace.name, mt.table.name)


@kind("alter_query")
def alter_query(arguments: dict[str, Any], actor: Any, job: SparkJob | None) -> tuple[int, dict]:
    mt = selectors.get_materialized_table(arguments["namespace"], arguments["name"])
    services.alter_query(mt, query=arguments["query"], actor=actor)
    return 200, _mt_detail(mt.table.namespace.name, mt.table.name)


@kind("rollback_definition")
def rollback_definition(
    arguments: dict[str, Any], actor: Any, job: SparkJob | None
) -> tuple[int, dict]:
    mt = selectors.get_materialized_table(arguments["namespace"], arguments["name"])
    services.rollback_definition(mt, version_id=int(arguments["version_id"]), actor=actor)
    return 200, _mt_detail(mt.table.namespace.name, mt.table.name)


@kind("preview_view")
def preview_view(arguments: dict[str, Any], actor: Any, job: SparkJob | None) -> tuple[int, dict]:
    from catalog import previews
    from catalog import selectors as catalog_selectors

    view = catalog_selectors.get_view(arguments["namespace"], arguments["name"])
    result = previews.preview_view(
        view,
        columns=arguments.get("columns") or None,
        row_filter=arguments.get("row_filter") or None,
        limit=int(arguments.get("limit") or 100),
    )
    return 200, previews.body(result)


@kind("preview_table")
def preview_table(arguments: dict[str, Any], actor: Any, job: SparkJob | None) -> tuple[int, dict]:
    from catalog import previews
    from catalog import selectors as catalog_selectors
    from catalog.services import follow_attached

    table = follow_attached(
        catalog_selectors.get_table(arguments["namespace"], arguments["name"]), actor=actor
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

    return _json(ViewDetailSerializer(view).data)


@kind("create_view")
def create_view(arguments: dict[str, Any], actor: Any, job: SparkJob | None) -> tuple[int, dict]:
    from catalog.services import sql_views

    return 201, _view_detail(sql_views.create_view(**arguments, actor=actor))


@kind("replace_view")
def replace_view(arguments: dict[str, Any], actor: Any, job: SparkJob | None) -> tuple[int, dict]:
    from catalog.services import sql_views

    return 200, _view_detail(sql_views.replace_view(**arguments, actor=actor))

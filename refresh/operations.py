"""Materialized tables' operations that may need a worker's Spark, registered as job kinds
(catalog.jobs.KINDS; the catalog's own are in catalog/operations.py; the console's jobs
are refresh.console's, run by their own task, refresh.tasks.run_console_job). Each takes JSON
arguments and the acting user and returns what the web request would have answered (an
HTTP status and a JSON body); each calls the same service function the API and pages
call. In a web request they run until they need Spark (NeedsWorker, before any write); on
a worker they run whole."""

from __future__ import annotations

from typing import Any

from catalog.jobs import kind
from catalog.models import SparkJob
from catalog.operations import as_json
from refresh import definitions, selectors, services, verification
from refresh.core import expectations as ex
from refresh.core.freshness import Freshness, RefreshMode, TimeUnit


def _mt_detail(namespace: str, name: str) -> dict[str, Any]:
    from refresh.api.serializers.tables import MaterializedTableDetailSerializer

    return as_json(
        MaterializedTableDetailSerializer(selectors.get_materialized_table(namespace, name)).data
    )


@kind("create_materialized_table", done_page="refresh:mt-detail")
def create_materialized_table(
    arguments: dict[str, Any], actor: Any, job: SparkJob | None
) -> tuple[int, dict]:
    args = dict(arguments)
    mode = args.pop("refresh_mode", None)
    freshness = Freshness(int(args.pop("freshness_value")), TimeUnit(args.pop("freshness_unit")))
    expectations = ex.from_json(args.pop("expectations", None))
    mt = services.create_materialized_table(
        **args,
        expectations=expectations,
        freshness=freshness,
        refresh_mode=RefreshMode(mode) if mode else None,
        actor=actor,
    )
    return 201, _mt_detail(mt.table.namespace.name, mt.table.name)


@kind("alter_query", done_page="refresh:mt-detail")
def alter_query(arguments: dict[str, Any], actor: Any, job: SparkJob | None) -> tuple[int, dict]:
    mt = selectors.get_materialized_table(arguments["namespace"], arguments["name"])
    definitions.alter_query(mt, query=arguments["query"], actor=actor)
    return 200, _mt_detail(mt.table.namespace.name, mt.table.name)


@kind("verify_materialized_table", done_page="refresh:mt-detail")
def verify_materialized_table(
    arguments: dict[str, Any], actor: Any, job: SparkJob | None
) -> tuple[int, dict]:
    from refresh.api.serializers.verifications import VerificationSerializer

    mt = selectors.get_materialized_table(arguments["namespace"], arguments["name"])
    done = verification.verify(mt, snapshots=int(arguments.get("snapshots") or 1), actor=actor)
    # The job's result is its requester's: their policies decide whether samples show.
    shown = VerificationSerializer(done, many=True, context={"actor": actor}).data
    return 200, as_json({"verifications": shown})


@kind("rollback_definition", done_page="refresh:mt-detail")
def rollback_definition(
    arguments: dict[str, Any], actor: Any, job: SparkJob | None
) -> tuple[int, dict]:
    mt = selectors.get_materialized_table(arguments["namespace"], arguments["name"])
    definitions.rollback_definition(mt, version_id=int(arguments["version_id"]), actor=actor)
    return 200, _mt_detail(mt.table.namespace.name, mt.table.name)

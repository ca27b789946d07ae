"""A materialized table's definition versions in the API: the list with the version log, a
new definition (ALTER ... AS) and a rollback to an earlier version."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog import access, jobs
from catalog.api.jobs import ACCEPTED, respond
from catalog.api.serializers import JobAcceptedSerializer
from refresh import rights
from refresh.api.common import (
    MT_PARAMS,
    TAGS,
    SeesByGrants,
    error_responses,
    managed_table,
    validated,
    visible_table,
)
from refresh.api.serializers.tables import (
    MaterializedTableDetailSerializer,
)
from refresh.api.serializers.versions import (
    DefinitionRequestSerializer,
    DefinitionRollbackSerializer,
    MaterializedTableVersionSerializer,
    MaterializedTableVersionsSerializer,
    VersionLogEntrySerializer,
)


class VersionListView(APIView):
    permission_classes = [SeesByGrants]

    @extend_schema(
        operation_id="materialized_tables_versions_list",
        parameters=MT_PARAMS,
        responses={200: MaterializedTableVersionsSerializer, **error_responses(404)},
        description="The table's definition versions and its version log, newest first.",
        tags=TAGS,
    )
    def get(self, request: Request, namespace: str, name: str) -> Response:
        mt = visible_table(request, namespace, name)
        versions = list(mt.versions.select_related("created_by").order_by("-version_id"))
        hidden = rights.hidden_definitions(
            access.principal_of(request), [v.sources for v in versions]
        )
        context = {
            "current_version": mt.current_version,
            "hidden": {v.version_id for v, no in zip(versions, hidden, strict=True) if no},
        }
        log = mt.version_log.select_related("actor").order_by("-timestamp", "-id")
        return Response(
            {
                "namespace": mt.table.namespace.name,
                "name": mt.table.name,
                "current_version": mt.current_version,
                "versions": MaterializedTableVersionSerializer(
                    versions, many=True, context=context
                ).data,
                "log": VersionLogEntrySerializer(log, many=True).data,
            }
        )


#: A definition change answers the table, or the job that makes the change (202).
_CHANGED_LATER = {
    200: MaterializedTableDetailSerializer,
    202: JobAcceptedSerializer,
    **error_responses(400, 403, 404, 409, 429, 503),
}


class DefinitionView(APIView):
    permission_classes = [SeesByGrants]

    @extend_schema(
        operation_id="materialized_tables_definition_update",
        parameters=MT_PARAMS,
        request=DefinitionRequestSerializer,
        responses=_CHANGED_LATER,
        description=(
            "ALTER MATERIALIZED TABLE ... AS <query>: a new definition version. Spark "
            "derives the schema (on a refresh worker) and the definition is checked; then a "
            "rebuild run (trigger REBUILD, `pending_change.run_id` in the answer) replaces "
            "the table's schema and rows in one commit. Readers see the old definition "
            "with its rows until then; a rebuild that fails changes nothing (the version "
            "log says why). An SQL error answers 400 with its line and column in the "
            f"query. {ACCEPTED}"
        ),
        tags=TAGS,
    )
    def post(self, request: Request, namespace: str, name: str) -> Response:
        data = validated(DefinitionRequestSerializer, request)
        managed_table(request, namespace, name)
        return respond(
            jobs.attempt(
                "alter_query",
                {"namespace": namespace, "name": name, "query": data["query"]},
                actor=request.user,
                summary=f"ALTER MATERIALIZED TABLE {namespace}.{name} AS <query>",
            )
        )


class DefinitionRollbackView(APIView):
    permission_classes = [SeesByGrants]

    @extend_schema(
        operation_id="materialized_tables_definition_rollback",
        parameters=MT_PARAMS,
        request=DefinitionRollbackSerializer,
        responses=_CHANGED_LATER,
        description=(
            "Make an earlier definition version current again, by a rebuild run as ALTER "
            f"... AS does (one commit of the schema and rows). {ACCEPTED}"
        ),
        tags=TAGS,
    )
    def post(self, request: Request, namespace: str, name: str) -> Response:
        data = validated(DefinitionRollbackSerializer, request)
        managed_table(request, namespace, name)
        return respond(
            jobs.attempt(
                "rollback_definition",
                {"namespace": namespace, "name": name, "version_id": data["version_id"]},
                actor=request.user,
                summary=f"Roll {namespace}.{name} back to definition version {data['version_id']}",
            )
        )

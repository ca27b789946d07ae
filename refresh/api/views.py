"""The materialized-table API: statements, tables, their lifecycle and refresh runs. Each
view validates the request's shape, calls one function of `refresh.services` (or the
console), and serializes the result; `CatalogError`s become JSON 4xx/5xx through
catalog/api/errors.py."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog import access, jobs
from catalog import selectors as catalog_selectors
from catalog.api.jobs import ACCEPTED, respond
from catalog.api.permissions import HoldsAPrivilege
from catalog.api.serializers import ErrorSerializer, JobAcceptedSerializer, SparkJobSerializer
from catalog.core.access import CREATE, MANAGE, READ_DATA, READ_METADATA
from catalog.core.errors import Forbidden, InvalidInput
from catalog.core.inputs import whole_number
from refresh import checks, console, lineage, rights, selectors, services, table_state
from refresh import runs as refresh_runs
from refresh.api import serializers as s
from refresh.core.freshness import RefreshMode
from refresh.core.options import check_run_options
from refresh.core.partitions import parse_schedule_time, scheduled_partition
from refresh.models import MaterializedTable, RefreshRun

_NAMESPACE = OpenApiParameter(
    "namespace",
    OpenApiTypes.STR,
    OpenApiParameter.PATH,
    description='The namespace, levels joined by "." (e.g. "sales.eu").',
)
_NAME = OpenApiParameter(
    "name", OpenApiTypes.STR, OpenApiParameter.PATH, description="Materialized table name."
)
_RUN = OpenApiParameter(
    "run_id", OpenApiTypes.INT, OpenApiParameter.PATH, description="Refresh run (job) id."
)
_MT_PARAMS = [_NAMESPACE, _NAME]
_TAGS = ["materialized tables"]


def _errors(*codes: int) -> dict[int, OpenApiResponse]:
    descriptions = {
        400: "Invalid input: a field of the wrong type, or a value FLIP-435's rules refuse.",
        403: "The user's role does not allow this.",
        404: "The namespace, materialized table or run does not exist.",
        409: "The name is taken, or the table's state forbids the operation.",
        429: "Too many Spark jobs are waiting (yours, or everyone's): see Retry-After.",
        503: "No refresh worker is running, or the task queue does not answer.",
    }
    return {
        code: OpenApiResponse(ErrorSerializer, description=descriptions[code]) for code in codes
    }


def _validated(serializer_class: type[serializers.Serializer], request: Request) -> dict[str, Any]:
    serializer = serializer_class(data=request.data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def _detail(
    request: Request, mt: MaterializedTable, *, status_code: int = status.HTTP_200_OK
) -> Response:
    mt = selectors.get_materialized_table(mt.table.namespace.name, mt.table.name)
    serializer = s.MaterializedTableDetailSerializer(mt, context={"request": request})
    return Response(serializer.data, status=status_code)


class SeesByGrants(HoldsAPrivilege):
    """Whoever holds a privilege somewhere; each view then asks catalog.access about the
    table it reads or changes (refresh.checks): read_metadata to read it, manage to change
    it, create in the namespace to make one."""


def _visible(request: Request, namespace: str, name: str) -> MaterializedTable:
    """The table, when the user may see it (read_metadata on it); else answered exactly as
    a missing one."""
    return checks.materialized_table(request.user, namespace, name, READ_METADATA)


def _managed(request: Request, namespace: str, name: str) -> MaterializedTable:
    """The table, when the user may change it (manage); one it may not see is missing."""
    return checks.materialized_table(request.user, namespace, name, MANAGE)


class Pagination(PageNumberPagination):
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500


# -- statements ---------------------------------------------------------------------------


class StatementsView(APIView):
    # Whoever holds a privilege somewhere: the console asks for the viewer role for every
    # statement but GRANT, REVOKE and SHOW GRANTS, which ask what catalog.services.grants
    # asks (a namespace's manager grants on it without a role on the whole catalog).
    permission_classes = [HoldsAPrivilege]

    @extend_schema(
        operation_id="statements_execute",
        request=s.StatementRequestSerializer,
        responses={
            200: s.StatementsResponseSerializer,
            202: s.StatementsResponseSerializer,
            400: s.StatementsResponseSerializer,
            403: s.StatementsResponseSerializer,
            404: s.StatementsResponseSerializer,
            409: s.StatementsResponseSerializer,
            429: s.StatementsResponseSerializer,
            503: s.StatementsResponseSerializer,
        },
        description=(
            "Run a script of FLIP-435 and Flink 2.x statements (CREATE [OR ALTER] / ALTER"
            " / DROP MATERIALIZED TABLE, DESCRIBE JOB, SHOW MATERIALIZED TABLES, SHOW "
            "CREATE MATERIALIZED TABLE, UPDATE/DELETE/MERGE of a materialized table) and "
            "queries (SELECT, WITH, VALUES, DESCRIBE and SHOW COLUMNS of a table or view, "
            "EXPLAIN; time travel with FOR VERSION / FOR TIMESTAMP AS OF), and GRANT / "
            "REVOKE / SHOW GRANTS in Unity Catalog's grammar (docs/security.md), in "
            "order. The first error stops the script (what ran before it stays done); the"
            " answer's status is that error's, with its line and column in the script. A "
            "statement that needs a worker's Spark (CREATE, ALTER ... AS, a data change, a "
            "query) and the rest of the script run as a job: 202 with the results so far and "
            "`job`, whose URL gives the remaining results as they come; a query's result "
            "names its rows' URL (`query.rows_url`, also GET /api/jobs/<id>/rows). 503 when "
            "no worker is running, 429 (Retry-After) when too many jobs or queries are "
            'waiting. With `"dry_run": '
            "true`, a plan: 200 with what each statement would do (`plan`: create, alter "
            "and its changes, nothing, refused with the error's line and column), every "
            "statement planned, nothing changed and no Spark job started."
        ),
        tags=["statements"],
    )
    def post(self, request: Request) -> Response:
        data = _validated(s.StatementRequestSerializer, request)
        if data["dry_run"]:
            results = console.plan(
                data["sql"], namespace=data["namespace"] or None, actor=request.user
            )
            refused = sum(1 for result in results if not result.ok)
            body = {"results": [r.as_dict() for r in results], "dry_run": True}
            return Response({**body, "refused": refused}, status=status.HTTP_200_OK)
        return statements_response(data["sql"], data["namespace"] or None, request.user)


def statements_response(sql: str, namespace: str | None, user: Any) -> Response:
    """POST /api/statements/'s answer to a script: its results, the failing statement's
    status (with Retry-After on a 429), or 202 with the job running the rest."""
    results, job = console.run(sql, namespace=namespace, actor=user)
    status_code, body = console.answer(results)
    if job is None:
        response = Response(body, status=status_code)
        retry = (body.get("error") or {}).get("retry_after")
        if status_code == status.HTTP_429_TOO_MANY_REQUESTS and retry:
            response["Retry-After"] = str(retry)
        return response
    body["job"] = SparkJobSerializer(job).data
    response = Response(body, status=status.HTTP_202_ACCEPTED)
    response["Location"] = body["job"]["url"]
    return response


# -- materialized tables ------------------------------------------------------------------


class MaterializedTableListView(generics.ListAPIView):
    serializer_class = s.MaterializedTableSummarySerializer
    pagination_class = Pagination
    permission_classes = [SeesByGrants]

    def get_queryset(self) -> Any:
        # Every table of the namespace: read_metadata on the namespace (its own or above).
        checks.namespace(self.request.user, self.kwargs["namespace"], READ_METADATA)
        namespace = catalog_selectors.get_namespace(self.kwargs["namespace"])
        # Each table's last run and data time in the list's query, its last run's values in
        # one more: a page of tables is two queries, not two a table.
        return selectors.TablePages(namespace.name, s.RUN_DATA_FIELDS)

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """A page of plain values (s.summary_data: what the summary serializer writes)."""
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response([s.summary_data(mt) for mt in page])

    @extend_schema(
        operation_id="materialized_tables_list",
        parameters=[_NAMESPACE],
        responses={200: s.MaterializedTableSummarySerializer(many=True), **_errors(404)},
        tags=_TAGS,
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    @extend_schema(
        operation_id="materialized_tables_create",
        parameters=[_NAMESPACE],
        request=s.MaterializedTableCreateSerializer,
        responses={
            201: s.MaterializedTableDetailSerializer,
            202: JobAcceptedSerializer,
            **_errors(400, 403, 404, 409, 429, 503),
        },
        description=(
            "CREATE MATERIALIZED TABLE: Spark derives the schema (on a refresh worker), the "
            f"table is created, scheduled and its first refresh queued. {ACCEPTED}"
        ),
        tags=_TAGS,
    )
    def post(self, request: Request, namespace: str) -> Response:
        checks.namespace(request.user, namespace, CREATE)
        data = _validated(s.MaterializedTableCreateSerializer, request)
        freshness = s.parse_freshness(data["freshness"])
        arguments = {
            "namespace": namespace,
            "name": data["name"],
            "query": data["query"],
            "freshness_value": freshness.value,
            "freshness_unit": freshness.unit.value,
            "refresh_mode": data["refresh_mode"] or None,
            "primary_key": list(data["primary_key"]),
            "constraint_name": data["constraint_name"],
            "partitioned_by": list(data["partitioned_by"]),
            "options": dict(data["options"]),
            "comment": data["comment"],
            "expectations": [dict(row) for row in data["expectations"]],
        }
        return respond(
            jobs.attempt(
                "create_materialized_table",
                arguments,
                actor=request.user,
                summary=f"Create materialized table {namespace}.{data['name']}",
            )
        )


class MaterializedTableDetailView(APIView):
    permission_classes = [SeesByGrants]

    @extend_schema(
        operation_id="materialized_tables_retrieve",
        parameters=_MT_PARAMS,
        responses={200: s.MaterializedTableDetailSerializer, **_errors(404)},
        tags=_TAGS,
    )
    def get(self, request: Request, namespace: str, name: str) -> Response:
        return _detail(request, _visible(request, namespace, name))

    @extend_schema(
        operation_id="materialized_tables_update",
        parameters=_MT_PARAMS,
        request=s.MaterializedTableUpdateSerializer,
        responses={200: s.MaterializedTableDetailSerializer, **_errors(400, 403, 404, 409)},
        description=(
            "ALTER ... SET REFRESH_MODE, SET FRESHNESS, SET (options), RESET (keys): any of "
            "them, applied in that order, all or none."
        ),
        tags=_TAGS,
    )
    def patch(self, request: Request, namespace: str, name: str) -> Response:
        data = _validated(s.MaterializedTableUpdateSerializer, request)
        mt = _managed(request, namespace, name)
        freshness = s.parse_freshness(data["freshness"]) if "freshness" in data else None
        with transaction.atomic():
            if "refresh_mode" in data:
                mt = services.set_refresh_mode(
                    mt, refresh_mode=RefreshMode(data["refresh_mode"]), actor=request.user
                )
            if freshness is not None:
                mt = services.set_freshness(mt, freshness=freshness, actor=request.user)
            if data.get("options"):
                mt = services.set_options(mt, options=data["options"], actor=request.user)
            if data.get("reset_options"):
                mt = services.reset_options(mt, keys=data["reset_options"], actor=request.user)
        return _detail(request, mt)

    @extend_schema(
        operation_id="materialized_tables_destroy",
        parameters=_MT_PARAMS,
        responses={204: None, **_errors(403, 404, 409)},
        description="DROP MATERIALIZED TABLE: its schedule, queued runs and data go.",
        tags=_TAGS,
    )
    def delete(self, request: Request, namespace: str, name: str) -> Response:
        mt = _managed(request, namespace, name)
        services.drop_materialized_table(mt, actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class SuspendView(APIView):
    permission_classes = [SeesByGrants]

    @extend_schema(
        operation_id="materialized_tables_suspend",
        parameters=_MT_PARAMS,
        request=None,
        responses={200: s.MaterializedTableDetailSerializer, **_errors(403, 404, 409)},
        tags=_TAGS,
    )
    def post(self, request: Request, namespace: str, name: str) -> Response:
        mt = _managed(request, namespace, name)
        return _detail(request, table_state.suspend(mt, actor=request.user))


class ResumeView(APIView):
    permission_classes = [SeesByGrants]

    @extend_schema(
        operation_id="materialized_tables_resume",
        parameters=_MT_PARAMS,
        request=s.ResumeSerializer,
        responses={200: s.MaterializedTableDetailSerializer, **_errors(400, 403, 404, 409)},
        tags=_TAGS,
    )
    def post(self, request: Request, namespace: str, name: str) -> Response:
        data = _validated(s.ResumeSerializer, request)
        mt = _managed(request, namespace, name)
        return _detail(request, services.resume(mt, options=data["options"], actor=request.user))


class RefreshView(APIView):
    permission_classes = [SeesByGrants]

    @extend_schema(
        operation_id="materialized_tables_refresh",
        parameters=_MT_PARAMS,
        request=s.RefreshRequestSerializer,
        responses={202: s.RefreshAcceptedSerializer, **_errors(400, 403, 404, 409, 503)},
        description=(
            "Flink's SQL Gateway refresh, for external schedulers: a periodic run refreshes "
            "the partition its scheduleTime implies (scheduleTime - freshness, formatted by "
            "the table's partition.fields.<column>.date-formatter options); otherwise the "
            "given partition, or the whole table. Answers the queued run; jobId is its id."
        ),
        tags=_TAGS,
    )
    def post(self, request: Request, namespace: str, name: str) -> Response:
        data = _validated(s.RefreshRequestSerializer, request)
        mt = _managed(request, namespace, name)
        # Checked here too so that the error names this request's field (the service's
        # own check, shared with RESUME WITH, says "options").
        config = check_run_options(data["config"], field="config")
        text = data["scheduleTime"]
        moment = parse_schedule_time(text, data["scheduleTimeFormat"]) if text else None
        partition = data["partition"]
        if data["isPeriodic"] and not partition:
            partition = scheduled_partition(moment, mt.freshness, mt.options, table=str(mt))
        if moment is not None and timezone.is_naive(moment):
            moment = timezone.make_aware(moment, timezone.get_default_timezone())
        run = refresh_runs.request_refresh(
            mt,
            trigger=RefreshRun.Trigger.API,
            partition=partition or {},
            schedule_time=moment,
            options=config,
            force=data["force"],
            full=data["full"],
            actor=request.user,
        )
        run = selectors.get_run(run.pk)
        return Response(
            {"jobId": run.pk, "run": s.RefreshRunSerializer(run).data},
            status=status.HTTP_202_ACCEPTED,
        )


class RunListView(generics.ListAPIView):
    serializer_class = s.RefreshRunSerializer
    pagination_class = Pagination
    permission_classes = [SeesByGrants]

    def get_queryset(self) -> Any:
        mt = _visible(self.request, self.kwargs["namespace"], self.kwargs["name"])
        return selectors.RunPages(mt, s.RUN_DATA_FIELDS)

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """A page of plain values (s.run_data: what RefreshRunSerializer writes)."""
        runs = self.get_queryset()
        page = self.paginate_queryset(runs)
        table = runs.mt.table
        return self.get_paginated_response(
            [s.run_data(row, namespace=table.namespace.name, name=table.name) for row in page]
        )

    @extend_schema(
        operation_id="materialized_tables_runs_list",
        parameters=_MT_PARAMS,
        responses={200: s.RefreshRunSerializer(many=True), **_errors(404)},
        tags=_TAGS,
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)


class RunDetailView(APIView):
    permission_classes = [SeesByGrants]

    @extend_schema(
        operation_id="refresh_runs_retrieve",
        parameters=[_RUN],
        responses={200: s.RefreshRunSerializer, **_errors(404)},
        tags=_TAGS,
    )
    def get(self, request: Request, run_id: int) -> Response:
        return Response(s.RefreshRunSerializer(checks.run(request.user, run_id)).data)


class RunCancelView(APIView):
    permission_classes = [SeesByGrants]

    @extend_schema(
        operation_id="refresh_runs_cancel",
        parameters=[_RUN],
        request=None,
        responses={200: s.RefreshRunSerializer, **_errors(403, 404, 409)},
        description=(
            "Stop a refresh run: a QUEUED run is CANCELLED at once; a RUNNING one is asked "
            "to stop (cancel_requested_at), and its worker cancels its Spark jobs within "
            "about a second and ends it CANCELLED with the table unchanged, unless its "
            "commit had already landed (then it SUCCEEDED). 409 for a finished run and for "
            "a continuous table's runs (SUSPEND stops its stream)."
        ),
        tags=_TAGS,
    )
    def post(self, request: Request, run_id: int) -> Response:
        run = checks.run(request.user, run_id)
        # One's own run, or one of a table one manages (its table dropped: the catalog).
        if run.requested_by_id != request.user.pk:
            if run.materialized_table is not None:
                checks.table(request.user, run.materialized_table, MANAGE)
            elif not access.may(checks.principal(request.user), MANAGE, access.CATALOG):
                raise Forbidden(
                    f"Forbidden: {request.user.username} lacks the {MANAGE} privilege on "
                    "the catalog (the run's table was dropped)"
                )
        run = refresh_runs.cancel_run(run, actor=request.user)
        return Response(s.RefreshRunSerializer(selectors.get_run(run.pk)).data)


# -- definition versions ------------------------------------------------------------------


class VersionListView(APIView):
    permission_classes = [SeesByGrants]

    @extend_schema(
        operation_id="materialized_tables_versions_list",
        parameters=_MT_PARAMS,
        responses={200: s.MaterializedTableVersionsSerializer, **_errors(404)},
        description="The table's definition versions and its version log, newest first.",
        tags=_TAGS,
    )
    def get(self, request: Request, namespace: str, name: str) -> Response:
        mt = _visible(request, namespace, name)
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
                "versions": s.MaterializedTableVersionSerializer(
                    versions, many=True, context=context
                ).data,
                "log": s.VersionLogEntrySerializer(log, many=True).data,
            }
        )


class DefinitionView(APIView):
    permission_classes = [SeesByGrants]

    @extend_schema(
        operation_id="materialized_tables_definition_update",
        parameters=_MT_PARAMS,
        request=s.DefinitionRequestSerializer,
        responses={
            200: s.MaterializedTableDetailSerializer,
            202: JobAcceptedSerializer,
            **_errors(400, 403, 404, 409, 429, 503),
        },
        description=(
            "ALTER MATERIALIZED TABLE ... AS <query>: a new definition version. Spark "
            "derives the schema (on a refresh worker) and the definition is checked; then a "
            "rebuild run (trigger REBUILD, `pending_change.run_id` in the answer) replaces "
            "the table's schema and rows in one commit. Readers see the old definition "
            "with its rows until then; a rebuild that fails changes nothing (the version "
            "log says why). An SQL error answers 400 with its line and column in the "
            f"query. {ACCEPTED}"
        ),
        tags=_TAGS,
    )
    def post(self, request: Request, namespace: str, name: str) -> Response:
        data = _validated(s.DefinitionRequestSerializer, request)
        _managed(request, namespace, name)
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
        parameters=_MT_PARAMS,
        request=s.DefinitionRollbackSerializer,
        responses={
            200: s.MaterializedTableDetailSerializer,
            202: JobAcceptedSerializer,
            **_errors(400, 403, 404, 409, 429, 503),
        },
        description=(
            "Make an earlier definition version current again, by a rebuild run as ALTER "
            f"... AS does (one commit of the schema and rows). {ACCEPTED}"
        ),
        tags=_TAGS,
    )
    def post(self, request: Request, namespace: str, name: str) -> Response:
        data = _validated(s.DefinitionRollbackSerializer, request)
        _managed(request, namespace, name)
        return respond(
            jobs.attempt(
                "rollback_definition",
                {"namespace": namespace, "name": name, "version_id": data["version_id"]},
                actor=request.user,
                summary=f"Roll {namespace}.{name} back to definition version {data['version_id']}",
            )
        )


class VerifyView(APIView):
    permission_classes = [SeesByGrants]

    @extend_schema(
        operation_id="materialized_tables_verify",
        parameters=_MT_PARAMS,
        request=s.VerifyRequestSerializer,
        responses={
            200: s.VerificationsSerializer,
            202: JobAcceptedSerializer,
            **_errors(400, 403, 404, 409, 429, 503),
        },
        description=(
            "Recompute the query with Spark over the source snapshots each of the newest "
            "`snapshots` snapshots records in its refresh state (time travel) and compare "
            "with the table at that snapshot, as multisets of rows: EXACT, DIFFERS (rows "
            "missing and extra, with a sample) or UNVERIFIABLE (why). Each verdict is kept "
            f"with the table's history (GET .../verifications/). 409: no snapshot records a "
            f"refresh state yet. {ACCEPTED}"
        ),
        tags=_TAGS,
    )
    def post(self, request: Request, namespace: str, name: str) -> Response:
        data = _validated(s.VerifyRequestSerializer, request)
        _managed(request, namespace, name)
        return respond(
            jobs.attempt(
                "verify_materialized_table",
                {"namespace": namespace, "name": name, "snapshots": data["snapshots"]},
                actor=request.user,
                summary=f"Verify {namespace}.{name} ({data['snapshots']} snapshots)",
            )
        )


class VerificationListView(generics.ListAPIView):
    serializer_class = s.VerificationSerializer
    pagination_class = Pagination
    permission_classes = [SeesByGrants]

    def get_queryset(self) -> Any:
        # A verdict shows sample rows: read_data on the table.
        mt = checks.materialized_table(
            self.request.user, self.kwargs["namespace"], self.kwargs["name"], READ_DATA
        )
        return selectors.verifications(mt)

    @extend_schema(
        operation_id="materialized_tables_verifications_list",
        parameters=_MT_PARAMS,
        responses={200: s.VerificationSerializer(many=True), **_errors(404)},
        description="The table's verifications, newest first (the newest 200 are kept).",
        tags=_TAGS,
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)


# -- lineage ------------------------------------------------------------------------------


class LineageView(APIView):
    # Whoever holds a privilege somewhere: the graph is of what the principal may see.
    permission_classes = [HoldsAPrivilege]

    @extend_schema(
        operation_id="lineage_retrieve",
        parameters=[
            OpenApiParameter(
                "namespace",
                OpenApiTypes.STR,
                OpenApiParameter.QUERY,
                required=True,
                description='The namespace of the object, levels joined by "."',
            ),
            OpenApiParameter(
                "name",
                OpenApiTypes.STR,
                OpenApiParameter.QUERY,
                required=True,
                description="A table, view or materialized table.",
            ),
            OpenApiParameter(
                "depth",
                OpenApiTypes.INT,
                OpenApiParameter.QUERY,
                description=f"Levels to follow each way (1-{lineage.MAX_DEPTH}, default "
                f"{lineage.MAX_DEPTH}).",
            ),
        ],
        responses={200: s.LineageSerializer, **_errors(400, 404)},
        description=(
            "What an object reads (upstream, through views' dependencies and materialized "
            "tables' sources) and what reads it (downstream), transitively, as nodes and "
            f"edges (source read by target); at most {lineage.MAX_LIMIT} nodes, and at most "
            f"{lineage.FANOUT} readers and {lineage.FANOUT} sources of each object: a node "
            "whose others were left out counts them (`more_readers`, `more_sources`) and links "
            "the page that lists its readers (`readers_url`). Only what the "
            "user may see (read_metadata): an object hidden from them is missing (404), and "
            "the graph leaves out the nodes hidden from them, with their edges, and counts "
            "only what they may see."
        ),
        tags=["lineage"],
    )
    def get(self, request: Request) -> Response:
        params = request.query_params
        missing = [key for key in ("namespace", "name") if not params.get(key, "").strip()]
        if missing:
            raise InvalidInput(
                f"Give the object's {' and '.join(missing)}: ?namespace=<ns>&name=<name>",
                field=missing[0],
            )
        depth_text = params.get("depth", "").strip()
        depth = whole_number(depth_text, digits=3)
        if depth_text and not (depth is not None and 1 <= depth <= lineage.MAX_DEPTH):
            raise InvalidInput(
                f"depth is a whole number from 1 to {lineage.MAX_DEPTH}", field="depth"
            )
        graph = lineage.lineage(
            params["namespace"].strip(),
            params["name"].strip(),
            depth=int(depth_text) if depth_text else lineage.MAX_DEPTH,
            principal=access.principal_of(request),
        )
        return Response(graph)

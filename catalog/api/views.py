"""The management API: namespaces and views. Each view validates the request's shape, calls
one service function (which raises `CatalogError` for the catalog's rules; see errors.py),
and serializes the result.

Namespaces, views and tables are shown and changed by grants (catalog.access, through
catalog.checks): lists hold what the principal may see, an object it may not see answers
as a missing one, and a change it may not make is a 403 naming the privilege."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from django.db.models import F
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.authtoken.serializers import AuthTokenSerializer
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.pagination import PageNumberPagination
from rest_framework.parsers import MultiPartParser
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog import (
    access,
    checks,
    jobs,
    previews,
    redaction,
    selectors,
    services,
    throttle,
    uploads,
)
from catalog.api import serializers as s
from catalog.api.jobs import ACCEPTED, respond
from catalog.api.permissions import HoldsAPrivilege, SeesTheAudit
from catalog.core import metadata_io
from catalog.core.access import CREATE, MANAGE, READ_DATA, READ_METADATA, WRITE_DATA
from catalog.core.errors import InvalidInput, NoSuchVersion
from catalog.models import CatalogEvent, Namespace, Table, View
from catalog.services.kernel import TABLE, VIEW

_NAMESPACE = OpenApiParameter(
    "namespace",
    OpenApiTypes.STR,
    OpenApiParameter.PATH,
    description='The namespace, levels joined by "." (e.g. "sales.eu").',
)
_VIEW = OpenApiParameter("name", OpenApiTypes.STR, OpenApiParameter.PATH, description="View name.")
_VERSION = OpenApiParameter(
    "version_id", OpenApiTypes.INT, OpenApiParameter.PATH, description="Version id."
)
_VIEW_PARAMS = [_NAMESPACE, _VIEW]
_TABLE = OpenApiParameter(
    "name", OpenApiTypes.STR, OpenApiParameter.PATH, description="Table name."
)


class CatalogPagination(PageNumberPagination):
    """Every list: `?page=` (from 1), `?page_size=` up to 500; the body is
    `{count, next, previous, results}`."""

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500


def _errors(*codes: int) -> dict[int, OpenApiResponse]:
    descriptions = {
        400: "Invalid input: a field of the wrong type, or a value the catalog refuses.",
        403: "Your role does not allow this (changes need the editor role).",
        404: "The namespace, view or version does not exist.",
        409: "The name is taken, the namespace is not empty, or another writer won.",
        429: "Too many Spark jobs are waiting (yours, or everyone's): see Retry-After.",
        503: "No refresh worker is running to do what needs Spark.",
    }
    return {
        code: OpenApiResponse(
            s.ErrorSerializer if code != 400 else OpenApiTypes.OBJECT,
            description=descriptions[code],
        )
        for code in codes
    }


def _validated(serializer_class: type[serializers.Serializer], request: Request) -> dict[str, Any]:
    serializer = serializer_class(data=request.data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


_PREVIEW_PARAMS = [
    OpenApiParameter(
        "columns",
        OpenApiTypes.STR,
        many=True,
        description="A column to show; repeat for several (all columns when absent).",
    ),
    OpenApiParameter(
        "filter",
        OpenApiTypes.STR,
        description="A row filter in pyiceberg's expression language, e.g. "
        "`region = 'eu' and amount > 10` (never run as SQL text).",
    ),
    OpenApiParameter("limit", OpenApiTypes.INT, description="Rows to return: 100 by default."),
]
_TIME_TRAVEL_PARAMS = [
    OpenApiParameter("snapshot_id", OpenApiTypes.INT, description="Read at this snapshot."),
    OpenApiParameter(
        "timestamp_ms",
        OpenApiTypes.INT,
        description="Read at the newest snapshot at or before this time (ms since the epoch); "
        "not together with snapshot_id.",
    ),
]


def _limit(request: Request) -> int:
    value = request.query_params.get("limit", "100")
    try:
        limit = int(value)
    except ValueError:
        raise InvalidInput(
            f"limit must be a whole number, not {value[:40]!r}", field="limit"
        ) from None
    if not 1 <= limit <= 1000:
        raise InvalidInput("limit must be between 1 and 1000", field="limit")
    return limit


def _followed(request: Request, namespace: str, name: str, privilege: str = READ_METADATA) -> Table:
    """The table, if the principal holds `privilege` on it, an attached one first followed
    to its newest metadata file (once per request: every read of an attached table looks)."""
    table = checks.obj(request, TABLE, namespace, name, privilege)
    return services.follow_attached(table, actor=request.user)


def _view(request: Request, namespace: str, name: str, privilege: str) -> View:
    """The view, if the principal holds `privilege` on it. Its SQL is its data: what it
    reads, and how, needs read_data; a list shows its name with read_metadata."""
    return checks.obj(request, VIEW, namespace, name, privilege)  # type: ignore[return-value]


class ByGrants:
    """The views of namespaces, views and tables: open to whoever holds a privilege
    somewhere; each handler checks the objects it touches."""

    permission_classes = [HoldsAPrivilege]


def _view_detail(view: View, *, status_code: int = status.HTTP_200_OK) -> Response:
    return Response(s.ViewDetailSerializer(view).data, status=status_code)


# -- auth ---------------------------------------------------------------------------------


class TokenView(ObtainAuthToken):
    """Exchange a username and password for the API token of that user."""

    @staticmethod
    def _account(request: Request) -> str:
        # The body may be any JSON (a list, a string): only an object names an account, and
        # anything else is left to the serializer to refuse with a 400.
        data = request.data
        return str(data.get("username", ""))[:255] if isinstance(data, Mapping) else ""

    @extend_schema(
        operation_id="token_obtain",
        request=AuthTokenSerializer,
        responses={200: s.TokenSerializer, 400: OpenApiTypes.OBJECT, 429: OpenApiTypes.OBJECT},
        tags=["auth"],
    )
    def post(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        # Decided before the serializer runs: it is what checks the password.
        tried = throttle.attempt(request, door="api", account=self._account(request))
        if tried.refused:
            return Response(
                {"error": throttle.message(tried.refused), "type": "Throttled"},
                status=status.HTTP_429_TOO_MANY_REQUESTS,
                headers={"Retry-After": str(tried.refused)},
            )
        try:
            response = super().post(request, *args, **kwargs)
        except serializers.ValidationError:
            # A refused password (or a missing field) is the serializer's ValidationError.
            throttle.failed(tried)
            raise
        throttle.succeeded(tried)
        return response


# -- namespaces ---------------------------------------------------------------------------


class NamespaceListView(ByGrants, generics.ListAPIView):
    serializer_class = s.NamespaceSerializer
    pagination_class = CatalogPagination

    def get_queryset(self) -> Any:
        everything = Namespace.objects.order_by("name")
        principal = access.principal_of(self.request)
        if principal.superuser and not principal.narrowed_superuser():
            return everything
        names = list(everything.values_list("name", flat=True))
        return everything.filter(name__in=access.visible_namespace_names(principal, names))

    @extend_schema(operation_id="namespaces_list", tags=["namespaces"])
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    @extend_schema(
        operation_id="namespaces_create",
        request=s.NamespaceCreateSerializer,
        responses={201: s.NamespaceSerializer, **_errors(400, 409)},
        tags=["namespaces"],
    )
    def post(self, request: Request) -> Response:
        data = _validated(s.NamespaceCreateSerializer, request)
        checks.create_namespace(request, data["name"], data["properties"])
        namespace = services.create_namespace(
            name=data["name"], properties=data["properties"], actor=request.user
        )
        return Response(s.NamespaceSerializer(namespace).data, status=status.HTTP_201_CREATED)


class NamespaceDetailView(ByGrants, APIView):
    @extend_schema(
        operation_id="namespaces_retrieve",
        parameters=[_NAMESPACE],
        responses={200: s.NamespaceSerializer, **_errors(404)},
        tags=["namespaces"],
    )
    def get(self, request: Request, namespace: str) -> Response:
        checks.namespace(request, namespace)
        return Response(s.NamespaceSerializer(selectors.get_namespace(namespace)).data)

    @extend_schema(
        operation_id="namespaces_destroy",
        parameters=[_NAMESPACE],
        responses={204: None, **_errors(404, 409)},
        tags=["namespaces"],
    )
    def delete(self, request: Request, namespace: str) -> Response:
        checks.namespace(request, namespace, MANAGE)
        services.drop_namespace(name=namespace, actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class NamespacePropertiesView(ByGrants, APIView):
    @extend_schema(
        operation_id="namespaces_properties_update",
        parameters=[_NAMESPACE],
        request=s.PropertiesUpdateSerializer,
        responses={200: s.NamespaceSerializer, **_errors(400, 404)},
        tags=["namespaces"],
    )
    def post(self, request: Request, namespace: str) -> Response:
        checks.namespace(request, namespace, MANAGE)
        data = _validated(s.PropertiesUpdateSerializer, request)
        result = services.update_namespace_properties(
            name=namespace, updates=data["updates"], removals=data["removals"], actor=request.user
        )
        return Response(s.NamespaceSerializer(result).data)


# -- views --------------------------------------------------------------------------------


class ViewListView(ByGrants, generics.ListAPIView):
    serializer_class = s.ViewSummarySerializer
    pagination_class = CatalogPagination

    def get_queryset(self) -> Any:
        checks.namespace(self.request, self.kwargs["namespace"])
        ns = selectors.get_namespace(self.kwargs["namespace"])
        views = View.objects.filter(namespace=ns).select_related("namespace").order_by("name")
        return access.visible_objects(access.principal_of(self.request), views)

    @extend_schema(
        operation_id="views_list",
        parameters=[_NAMESPACE],
        responses={200: s.ViewSummarySerializer(many=True), **_errors(404)},
        tags=["views"],
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    @extend_schema(
        operation_id="views_create",
        parameters=[_NAMESPACE],
        request=s.ViewCreateSerializer,
        responses={
            201: s.ViewDetailSerializer,
            202: s.JobAcceptedSerializer,
            **_errors(400, 404, 409, 429, 503),
        },
        description="A column type sqlglot cannot derive is asked of a worker's Spark when "
        f"one runs. {ACCEPTED}",
        tags=["views"],
    )
    def post(self, request: Request, namespace: str) -> Response:
        checks.namespace(request, namespace, CREATE)
        data = _validated(s.ViewCreateSerializer, request)
        return respond(
            jobs.attempt(
                "create_view",
                {"namespace": namespace, **data},
                actor=request.user,
                summary=f"Create view {namespace}.{data['name']} (Spark types its columns)",
            )
        )


class ViewRegisterView(ByGrants, APIView):
    @extend_schema(
        operation_id="views_register",
        parameters=[_NAMESPACE],
        request=s.RegisterSerializer,
        responses={201: s.ViewDetailSerializer, **_errors(400, 404, 409)},
        tags=["views"],
    )
    def post(self, request: Request, namespace: str) -> Response:
        checks.namespace(request, namespace, CREATE)
        data = _validated(s.RegisterSerializer, request)
        view = services.register_view(namespace=namespace, actor=request.user, **data)
        return _view_detail(view, status_code=status.HTTP_201_CREATED)


class ViewDetailView(ByGrants, APIView):
    @extend_schema(
        operation_id="views_retrieve",
        parameters=_VIEW_PARAMS,
        responses={200: s.ViewDetailSerializer, **_errors(404)},
        tags=["views"],
    )
    def get(self, request: Request, namespace: str, name: str) -> Response:
        return _view_detail(_view(request, namespace, name, READ_DATA))

    @extend_schema(
        operation_id="views_replace",
        parameters=_VIEW_PARAMS,
        request=s.ViewReplaceSerializer,
        responses={
            200: s.ViewDetailSerializer,
            202: s.JobAcceptedSerializer,
            **_errors(400, 404, 409, 429, 503),
        },
        description=ACCEPTED,
        tags=["views"],
    )
    def put(self, request: Request, namespace: str, name: str) -> Response:
        _view(request, namespace, name, MANAGE)
        data = _validated(s.ViewReplaceSerializer, request)
        return respond(
            jobs.attempt(
                "replace_view",
                {"namespace": namespace, "name": name, **data},
                actor=request.user,
                summary=f"Replace view {namespace}.{name} (Spark types its columns)",
            )
        )

    @extend_schema(
        operation_id="views_destroy",
        parameters=_VIEW_PARAMS,
        responses={204: None, **_errors(404)},
        tags=["views"],
    )
    def delete(self, request: Request, namespace: str, name: str) -> Response:
        _view(request, namespace, name, MANAGE)
        services.drop_view(namespace=namespace, name=name, actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ViewPreviewView(ByGrants, APIView):
    @extend_schema(
        operation_id="views_preview",
        parameters=[*_VIEW_PARAMS, *_PREVIEW_PARAMS],
        description="The first rows of the view's query as Spark gives them: a refresh "
        "worker runs it as a job. The same request by the same user while the job runs, "
        f"or for a minute after, answers that job (then its rows). {ACCEPTED}",
        responses={
            200: OpenApiTypes.OBJECT,
            202: s.JobAcceptedSerializer,
            **_errors(400, 404, 429, 503),
        },
        tags=["views"],
    )
    def get(self, request: Request, namespace: str, name: str) -> Response:
        params = request.query_params
        view = _view(request, namespace, name, READ_DATA)
        arguments = {
            "namespace": namespace,
            "name": name,
            "columns": params.getlist("columns") or None,
            "row_filter": params.get("filter") or None,
            "limit": _limit(request),
            # The view as it is now: a new version is another preview.
            "version": view.metadata_location,
        }
        return respond(
            jobs.attempt(
                "preview_view",
                arguments,
                actor=request.user,
                summary=f"Preview of view {namespace}.{name}",
                reuse=True,
            )
        )


class ViewVersionListView(ByGrants, APIView):
    @extend_schema(
        operation_id="views_versions_list",
        parameters=_VIEW_PARAMS,
        responses={200: s.VersionSerializer(many=True), **_errors(404)},
        tags=["views"],
    )
    def get(self, request: Request, namespace: str, name: str) -> Response:
        view = _view(request, namespace, name, READ_DATA)
        return Response(s.VersionSerializer(view.versions.with_sql(), many=True).data)


class ViewVersionDetailView(ByGrants, APIView):
    @extend_schema(
        operation_id="views_versions_retrieve",
        parameters=[*_VIEW_PARAMS, _VERSION],
        responses={200: s.VersionSerializer, **_errors(404)},
        tags=["views"],
    )
    def get(self, request: Request, namespace: str, name: str, version_id: int) -> Response:
        view = _view(request, namespace, name, READ_DATA)
        version = view.versions.with_sql().filter(version_id=version_id).first()
        if version is None:
            raise NoSuchVersion(
                f"View {view} has no retained version {version_id}", field="version_id"
            )
        return Response(s.VersionSerializer(version).data)


class ViewLogView(ByGrants, APIView):
    @extend_schema(
        operation_id="views_log_list",
        parameters=_VIEW_PARAMS,
        responses={200: s.LogEntrySerializer(many=True), **_errors(404)},
        tags=["views"],
    )
    def get(self, request: Request, namespace: str, name: str) -> Response:
        view = _view(request, namespace, name, READ_DATA)
        return Response(s.LogEntrySerializer(view.log_entries.all(), many=True).data)


class ViewMetadataView(ByGrants, APIView):
    @extend_schema(
        operation_id="views_metadata_retrieve",
        parameters=_VIEW_PARAMS,
        description="The view's current metadata file, as stored (View Spec JSON).",
        responses={200: OpenApiTypes.OBJECT, **_errors(400, 404)},
        tags=["views"],
    )
    def get(self, request: Request, namespace: str, name: str) -> Response:
        view = _view(request, namespace, name, READ_DATA)
        return Response(metadata_io.read_json(view.metadata_location))


class ViewRollbackView(ByGrants, APIView):
    @extend_schema(
        operation_id="views_rollback",
        parameters=_VIEW_PARAMS,
        request=s.RollbackSerializer,
        responses={200: s.ViewDetailSerializer, **_errors(400, 404, 409)},
        tags=["views"],
    )
    def post(self, request: Request, namespace: str, name: str) -> Response:
        _view(request, namespace, name, MANAGE)
        data = _validated(s.RollbackSerializer, request)
        view = services.rollback_view(namespace=namespace, name=name, actor=request.user, **data)
        return _view_detail(view)


class ViewPropertiesView(ByGrants, APIView):
    @extend_schema(
        operation_id="views_properties_update",
        parameters=_VIEW_PARAMS,
        request=s.PropertiesUpdateSerializer,
        responses={200: s.ViewDetailSerializer, **_errors(400, 404, 409)},
        tags=["views"],
    )
    def post(self, request: Request, namespace: str, name: str) -> Response:
        _view(request, namespace, name, MANAGE)
        data = _validated(s.PropertiesUpdateSerializer, request)
        view = services.update_view_properties(
            namespace=namespace,
            name=name,
            updates=data["updates"],
            removals=data["removals"],
            actor=request.user,
        )
        return _view_detail(view)


class ViewRepresentationView(ByGrants, APIView):
    @extend_schema(
        operation_id="views_representations_create",
        parameters=_VIEW_PARAMS,
        request=s.RepresentationCreateSerializer,
        responses={200: s.ViewDetailSerializer, **_errors(400, 404, 409)},
        description="A new current version: the current one plus SQL for one more dialect.",
        tags=["views"],
    )
    def post(self, request: Request, namespace: str, name: str) -> Response:
        _view(request, namespace, name, MANAGE)
        data = _validated(s.RepresentationCreateSerializer, request)
        view = services.add_view_representation(
            namespace=namespace, name=name, actor=request.user, **data
        )
        return _view_detail(view)


class ViewRenameView(ByGrants, APIView):
    @extend_schema(
        operation_id="views_rename",
        parameters=_VIEW_PARAMS,
        request=s.RenameSerializer,
        responses={200: s.ViewDetailSerializer, **_errors(400, 404, 409)},
        tags=["views"],
    )
    def post(self, request: Request, namespace: str, name: str) -> Response:
        data = _validated(s.RenameSerializer, request)
        checks.rename(request, VIEW, namespace, name, data["namespace"])
        view = services.rename_view(
            namespace=namespace,
            name=name,
            new_namespace=data["namespace"],
            new_name=data["name"],
            actor=request.user,
        )
        return _view_detail(view)


class DroppedListView(ByGrants, APIView):
    @extend_schema(
        operation_id="namespaces_dropped_list",
        parameters=[_NAMESPACE],
        responses={200: s.DroppedSerializer(many=True), **_errors(404)},
        description=(
            "Tables and views dropped from the namespace with their files kept (Iceberg's "
            "drop without purge), newest first: each can be restored. A purged one, or one "
            "in the catalog again, is not listed."
        ),
        tags=["namespaces"],
    )
    def get(self, request: Request, namespace: str) -> Response:
        checks.namespace(request, namespace, READ_METADATA)
        selectors.get_namespace(namespace)
        return Response(s.DroppedSerializer(selectors.dropped(namespace), many=True).data)


class DroppedRestoreView(ByGrants, APIView):
    @extend_schema(
        operation_id="namespaces_dropped_restore",
        parameters=[
            _NAMESPACE,
            OpenApiParameter("uuid", OpenApiTypes.STR, OpenApiParameter.PATH),
        ],
        request=s.RestoreSerializer,
        responses={201: OpenApiTypes.OBJECT, **_errors(400, 403, 404, 409)},
        description=(
            "Bring back a dropped table or view (Snowflake's UNDROP): its metadata file of "
            "the drop is registered again, under its old name or `name`. 409 when the name "
            "is taken or the object is in the catalog again."
        ),
        tags=["namespaces"],
    )
    def post(self, request: Request, namespace: str, uuid: str) -> Response:
        checks.namespace(request, namespace, CREATE)
        data = _validated(s.RestoreSerializer, request)
        obj = services.restore_dropped(
            namespace=namespace, uuid=uuid, name=data.get("name"), actor=request.user
        )
        return Response(
            {"kind": obj.kind, "namespace": obj.namespace.name, "name": obj.name},
            status=status.HTTP_201_CREATED,
        )


# -- tables -------------------------------------------------------------------------------


class TableListView(ByGrants, generics.ListAPIView):
    """A namespace's tables (materialized tables' data tables included, marked)."""

    serializer_class = s.TableSummarySerializer
    pagination_class = CatalogPagination

    def get_queryset(self) -> Any:
        checks.namespace(self.request, self.kwargs["namespace"])
        ns = selectors.get_namespace(self.kwargs["namespace"])
        tables = (
            Table.objects.filter(namespace=ns)
            .select_related("namespace")
            .annotate(materialized_id=F("materialized__id"))
            .order_by("name")
        )
        return access.visible_objects(access.principal_of(self.request), tables)

    @extend_schema(
        operation_id="tables_list",
        parameters=[_NAMESPACE],
        responses={200: s.TableSummarySerializer(many=True), **_errors(404)},
        tags=["tables"],
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)


class TableDetailView(ByGrants, APIView):
    @extend_schema(
        operation_id="tables_retrieve",
        parameters=[_NAMESPACE, _TABLE],
        description=(
            "The table as the catalog mirrors its current metadata file: schema fields, "
            "current snapshot, properties, location and partition spec. Engines load and "
            "change tables through the Iceberg REST protocol at /iceberg."
        ),
        responses={200: s.TableDetailSerializer, **_errors(404)},
        tags=["tables"],
    )
    def get(self, request: Request, namespace: str, name: str) -> Response:
        table = _followed(request, namespace, name)
        data = s.TableDetailSerializer(table).data
        # Properties the user may not see (a materialized table's query, to one who may not
        # read its sources) are left out (catalog.redaction).
        data["properties"] = redaction.properties(
            access.principal_of(request), table.pk, data["properties"]
        )
        return Response(data)


class TablePreviewView(ByGrants, APIView):
    @extend_schema(
        operation_id="tables_preview",
        parameters=[_NAMESPACE, _TABLE, *_PREVIEW_PARAMS, *_TIME_TRAVEL_PARAMS],
        description=(
            "The first rows of the table, with a column choice, a row filter, and time travel "
            "by snapshot id or timestamp (ClickHouse's rules and words), and what pruning "
            "did: data files in the snapshot, scanned, skipped by partition, skipped by "
            "column statistics, delete files applied. Read by pyiceberg; a table with "
            "equality deletes is read by a refresh worker's Spark (then no pruning figures), "
            f"as a job. {ACCEPTED}"
        ),
        responses={
            200: OpenApiTypes.OBJECT,
            202: s.JobAcceptedSerializer,
            **_errors(400, 404, 429, 503),
        },
        tags=["tables"],
    )
    def get(self, request: Request, namespace: str, name: str) -> Response:
        params = request.query_params
        table = _followed(request, namespace, name, READ_DATA)
        arguments = {
            "namespace": namespace,
            "name": name,
            "columns": params.getlist("columns") or None,
            "row_filter": params.get("filter") or None,
            "snapshot_id": params.get("snapshot_id"),
            "timestamp_ms": params.get("timestamp_ms"),
            "limit": _limit(request),
            "version": table.metadata_location,
        }
        return respond(
            jobs.attempt(
                "preview_table",
                arguments,
                actor=request.user,
                summary=f"Preview of table {namespace}.{name}",
                reuse=True,
            )
        )


class TableFilesView(ByGrants, APIView):
    @extend_schema(
        operation_id="tables_files",
        parameters=[
            _NAMESPACE,
            _TABLE,
            _TIME_TRAVEL_PARAMS[0],
            OpenApiParameter(
                "limit", OpenApiTypes.INT, description="Files listed: 200 by default."
            ),
        ],
        description="The data and delete files of the current snapshot (or `snapshot_id`), "
        "with sizes and record counts, and totals per kind over all of them.",
        responses={200: OpenApiTypes.OBJECT, **_errors(400, 404)},
        tags=["tables"],
    )
    def get(self, request: Request, namespace: str, name: str) -> Response:
        listing = previews.files_of(
            _followed(request, namespace, name, READ_DATA),
            snapshot_id=request.query_params.get("snapshot_id"),
            limit=_limit(request) if "limit" in request.query_params else 200,
        )
        return Response(
            {
                "snapshot_id": listing.snapshot_id,
                "files": [
                    {**dataclasses.asdict(f), "partition": dict(f.partition)} for f in listing.files
                ],
                "totals": {kind: dataclasses.asdict(t) for kind, t in listing.totals.items()},
                "truncated": listing.truncated,
            }
        )


class TableAttachView(ByGrants, APIView):
    @extend_schema(
        operation_id="tables_attach",
        parameters=[_NAMESPACE],
        request=s.AttachSerializer,
        description=(
            "Attach, read-only, an Iceberg table another system writes, from its folder. The "
            "metadata file is chosen by ClickHouse's rules: `metadata_file_path` wins; else "
            "the files with `table_uuid`; else every metadata file; the newest by version "
            "in the name or by `last-updated-ms`. Writes to it are refused; a newer "
            "metadata file is picked up on every read."
        ),
        responses={201: s.TableDetailSerializer, **_errors(400, 404, 409)},
        tags=["tables"],
    )
    def post(self, request: Request, namespace: str) -> Response:
        checks.namespace(request, namespace, CREATE)
        data = _validated(s.AttachSerializer, request)
        table = services.attach_table(namespace=namespace, actor=request.user, **data)
        return Response(s.TableDetailSerializer(table).data, status=status.HTTP_201_CREATED)


class TableUploadView(ByGrants, APIView):
    parser_classes = [MultiPartParser]

    @extend_schema(
        operation_id="tables_upload",
        parameters=[_NAMESPACE],
        request={"multipart/form-data": s.TableUploadSerializer},
        description=(
            "A file becomes a table. `mode=create` makes a table with the file's columns "
            "(types inferred from its first rows) and its rows, in one commit; `mode=append` "
            "adds the rows to an existing table with the same columns (types it can hold). "
            "`dry_run=true` answers the columns, types and first rows and writes nothing. "
            "The file is streamed to disk and read in batches; a bad file is a 400 naming "
            "the row (`row`, from 1, the header not counted) and column (`column_name`) at "
            "fault, and nothing is created or changed."
        ),
        responses={
            200: OpenApiResponse(
                s.UploadResultSerializer,
                description="Appended (or, with dry_run, an UploadPreview: what would be).",
            ),
            201: s.UploadResultSerializer,
            **_errors(400, 403, 404, 409),
            413: OpenApiResponse(
                s.ErrorSerializer, description="The file is over UPLOAD_MAX_BYTES."
            ),
        },
        tags=["tables"],
    )
    def post(self, request: Request, namespace: str) -> Response:
        request.FILES  # noqa: B018 - reads the upload, which may be refused for its size
        refused = uploads.refusal(request._request)
        if refused is not None:
            raise refused
        data = _validated(s.TableUploadSerializer, request)
        if data["mode"] == "append":
            checks.obj(request, TABLE, namespace, data["table"], WRITE_DATA)
        else:
            checks.namespace(request, namespace, CREATE)
        upload = data["file"]
        arguments = {
            "namespace": namespace,
            "name": data["table"],
            "path": upload.temporary_file_path(),
            "filename": upload.name,
            "format": data["format"],
            "mode": data["mode"],
        }
        if data["dry_run"]:
            preview = services.inspect_upload(**arguments)
            body = preview.as_dict()
            return Response(
                {
                    "dry_run": True,
                    "namespace": namespace,
                    "table": data["table"],
                    "mode": data["mode"],
                    "format": body["format"],
                    "columns": body["columns"],
                    "preview_rows": body["rows"],
                }
            )
        done = services.upload_table(**arguments, actor=request.user)
        table = done.table
        body = {
            "namespace": table.namespace.name,
            "table": table.name,
            "mode": done.mode,
            "format": done.format,
            "rows_written": done.rows,
            "columns": [{"name": n, "type": t} for n, t in done.columns],
            "snapshot_id": done.snapshot_id,
            "url": reverse(
                "api:table-detail", kwargs={"namespace": table.namespace.name, "name": table.name}
            ),
        }
        created = done.mode == "create"
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class TableDetachView(ByGrants, APIView):
    @extend_schema(
        operation_id="tables_detach",
        parameters=[_NAMESPACE, _TABLE],
        request=None,
        description="Forget an attached table. Its folder and files are not touched.",
        responses={204: None, **_errors(400, 404)},
        tags=["tables"],
    )
    def post(self, request: Request, namespace: str, name: str) -> Response:
        checks.obj(request, TABLE, namespace, name, MANAGE)
        services.detach_table(namespace=namespace, name=name, actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


# -- the root -----------------------------------------------------------------------------


class ApiRootView(APIView):
    """What /api/ offers, for a newcomer who starts there."""

    permission_classes = [AllowAny]

    @extend_schema(operation_id="api_root", responses={200: s.ApiRootSerializer}, tags=["root"])
    def get(self, request: Request) -> Response:
        def url(name: str) -> str:
            return request.build_absolute_uri(reverse(f"api:{name}"))

        ns = url("namespace-list") + "{namespace}/"
        endpoints = {
            "namespaces": url("namespace-list"),
            "namespace": ns,
            "views": ns + "views/",
            "view": ns + "views/{name}/",
            "tables": ns + "tables/",
            "table": ns + "tables/{name}/",
            "table_maintenance": ns + "tables/{name}/maintenance",
            "attach_table": ns + "tables/attach",
            "upload_table": ns + "tables/upload",
            "materialized_tables": ns + "materialized-tables/",
            "statements": url("statements"),
            "jobs": url("job-list"),
            "lineage": url("lineage"),
            "monitoring_tables": url("monitoring-tables"),
            "monitoring_history": url("monitoring-history"),
            "history": url("history"),
            "grants": url("grant-list"),
            "completions": url("completions"),
            "token": url("token"),
        }
        return Response(
            {
                "name": "Lakeview API",
                "docs": url("docs"),
                "schema": url("schema"),
                "endpoints": endpoints,
            }
        )


# -- history ------------------------------------------------------------------------------


class HistoryView(generics.ListAPIView):
    """What was done to the catalog, newest first: the catalog events of the audit, so for
    those who see the audit (superusers and those who manage the whole catalog)."""

    permission_classes = [SeesTheAudit]
    serializer_class = s.CatalogEventSerializer
    pagination_class = CatalogPagination
    queryset = CatalogEvent.objects.select_related("actor")

    @extend_schema(operation_id="history_list", tags=["history"])
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

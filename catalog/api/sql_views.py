"""The API of views: list, create (Spark types the columns, as a job), register, show,
replace, drop, preview (a job), versions, the version log, the metadata file, roll back,
properties, a dialect's SQL, rename. A view's SQL is its data: reading it needs read_data."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog import access, access_events, checks, jobs, selectors, services
from catalog.api import serializers as s
from catalog.api.jobs import ACCEPTED, respond
from catalog.api.shared import (
    NAMESPACE_PARAM,
    PREVIEW_PARAMS,
    ByGrants,
    CatalogPagination,
    error_responses,
    row_limit,
    validated,
)
from catalog.core import metadata_io
from catalog.core.access import CREATE, MANAGE, READ_DATA
from catalog.core.errors import NoSuchVersion
from catalog.models import View
from catalog.services.kernel import VIEW

_VIEW = OpenApiParameter("name", OpenApiTypes.STR, OpenApiParameter.PATH, description="View name.")
_VERSION = OpenApiParameter(
    "version_id", OpenApiTypes.INT, OpenApiParameter.PATH, description="Version id."
)
_VIEW_PARAMS = [NAMESPACE_PARAM, _VIEW]


def _view(request: Request, namespace: str, name: str, privilege: str) -> View:
    """The view, if the principal holds `privilege` on it. Its SQL is its data: what it
    reads, and how, needs read_data; a list shows its name with read_metadata."""
    return checks.obj(request, VIEW, namespace, name, privilege)  # type: ignore[return-value]


def _view_detail(view: View, *, status_code: int = status.HTTP_200_OK) -> Response:
    return Response(s.ViewDetailSerializer(view).data, status=status_code)


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
        parameters=[NAMESPACE_PARAM],
        responses={200: s.ViewSummarySerializer(many=True), **error_responses(404)},
        tags=["views"],
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    @extend_schema(
        operation_id="views_create",
        parameters=[NAMESPACE_PARAM],
        request=s.ViewCreateSerializer,
        responses={
            201: s.ViewDetailSerializer,
            202: s.JobAcceptedSerializer,
            **error_responses(400, 404, 409, 429, 503),
        },
        description="A column type sqlglot cannot derive is asked of a worker's Spark when "
        f"one runs. {ACCEPTED}",
        tags=["views"],
    )
    def post(self, request: Request, namespace: str) -> Response:
        checks.namespace(request, namespace, CREATE)
        data = validated(s.ViewCreateSerializer, request)
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
        parameters=[NAMESPACE_PARAM],
        request=s.RegisterSerializer,
        responses={201: s.ViewDetailSerializer, **error_responses(400, 404, 409)},
        tags=["views"],
    )
    def post(self, request: Request, namespace: str) -> Response:
        checks.namespace(request, namespace, CREATE)
        data = validated(s.RegisterSerializer, request)
        view = services.register_view(namespace=namespace, actor=request.user, **data)
        return _view_detail(view, status_code=status.HTTP_201_CREATED)


class ViewDetailView(ByGrants, APIView):
    @extend_schema(
        operation_id="views_retrieve",
        parameters=_VIEW_PARAMS,
        responses={200: s.ViewDetailSerializer, **error_responses(404)},
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
            **error_responses(400, 404, 409, 429, 503),
        },
        description=ACCEPTED,
        tags=["views"],
    )
    def put(self, request: Request, namespace: str, name: str) -> Response:
        _view(request, namespace, name, MANAGE)
        data = validated(s.ViewReplaceSerializer, request)
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
        responses={204: None, **error_responses(404)},
        tags=["views"],
    )
    def delete(self, request: Request, namespace: str, name: str) -> Response:
        _view(request, namespace, name, MANAGE)
        services.drop_view(namespace=namespace, name=name, actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ViewPreviewView(ByGrants, APIView):
    @extend_schema(
        operation_id="views_preview",
        parameters=[*_VIEW_PARAMS, *PREVIEW_PARAMS],
        description="The first rows of the view's query as Spark gives them: a refresh "
        "worker runs it as a job. The same request by the same user while the job runs, "
        f"or for a minute after, answers that job (then its rows). {ACCEPTED}",
        responses={
            200: OpenApiTypes.OBJECT,
            202: s.JobAcceptedSerializer,
            **error_responses(400, 404, 429, 503),
        },
        tags=["views"],
    )
    def get(self, request: Request, namespace: str, name: str) -> Response:
        params = request.query_params
        view = _view(request, namespace, name, READ_DATA)
        access_events.read(request, "preview", "api", view)
        arguments = {
            "namespace": namespace,
            "name": name,
            "columns": params.getlist("columns") or None,
            "row_filter": params.get("filter") or None,
            "limit": row_limit(request),
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
        responses={200: s.VersionSerializer(many=True), **error_responses(404)},
        tags=["views"],
    )
    def get(self, request: Request, namespace: str, name: str) -> Response:
        view = _view(request, namespace, name, READ_DATA)
        return Response(s.VersionSerializer(view.versions.with_sql(), many=True).data)


class ViewVersionDetailView(ByGrants, APIView):
    @extend_schema(
        operation_id="views_versions_retrieve",
        parameters=[*_VIEW_PARAMS, _VERSION],
        responses={200: s.VersionSerializer, **error_responses(404)},
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
        responses={200: s.LogEntrySerializer(many=True), **error_responses(404)},
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
        responses={200: OpenApiTypes.OBJECT, **error_responses(400, 404)},
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
        responses={200: s.ViewDetailSerializer, **error_responses(400, 404, 409)},
        tags=["views"],
    )
    def post(self, request: Request, namespace: str, name: str) -> Response:
        _view(request, namespace, name, MANAGE)
        data = validated(s.RollbackSerializer, request)
        view = services.rollback_view(namespace=namespace, name=name, actor=request.user, **data)
        return _view_detail(view)


class ViewPropertiesView(ByGrants, APIView):
    @extend_schema(
        operation_id="views_properties_update",
        parameters=_VIEW_PARAMS,
        request=s.PropertiesUpdateSerializer,
        responses={200: s.ViewDetailSerializer, **error_responses(400, 404, 409)},
        tags=["views"],
    )
    def post(self, request: Request, namespace: str, name: str) -> Response:
        _view(request, namespace, name, MANAGE)
        data = validated(s.PropertiesUpdateSerializer, request)
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
        responses={200: s.ViewDetailSerializer, **error_responses(400, 404, 409)},
        description="A new current version: the current one plus SQL for one more dialect.",
        tags=["views"],
    )
    def post(self, request: Request, namespace: str, name: str) -> Response:
        _view(request, namespace, name, MANAGE)
        data = validated(s.RepresentationCreateSerializer, request)
        view = services.add_view_representation(
            namespace=namespace, name=name, actor=request.user, **data
        )
        return _view_detail(view)


class ViewRenameView(ByGrants, APIView):
    @extend_schema(
        operation_id="views_rename",
        parameters=_VIEW_PARAMS,
        request=s.RenameSerializer,
        responses={200: s.ViewDetailSerializer, **error_responses(400, 404, 409)},
        tags=["views"],
    )
    def post(self, request: Request, namespace: str, name: str) -> Response:
        data = validated(s.RenameSerializer, request)
        checks.rename(request, VIEW, namespace, name, data["namespace"])
        view = services.rename_view(
            namespace=namespace,
            name=name,
            new_namespace=data["namespace"],
            new_name=data["name"],
            actor=request.user,
        )
        return _view_detail(view)

"""The API of namespaces: list, create, show, drop and change their properties; what was
dropped from one with its files kept, and bringing it back (UNDROP)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog import access, checks, selectors, services
from catalog.api import serializers as s
from catalog.api.shared import (
    NAMESPACE_PARAM,
    ByGrants,
    CatalogPagination,
    error_responses,
    validated,
)
from catalog.core.access import CREATE, MANAGE, READ_METADATA
from catalog.models import Namespace


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
        responses={201: s.NamespaceSerializer, **error_responses(400, 409)},
        tags=["namespaces"],
    )
    def post(self, request: Request) -> Response:
        data = validated(s.NamespaceCreateSerializer, request)
        checks.create_namespace(request, data["name"], data["properties"])
        namespace = services.create_namespace(
            name=data["name"], properties=data["properties"], actor=request.user
        )
        return Response(s.NamespaceSerializer(namespace).data, status=status.HTTP_201_CREATED)


class NamespaceDetailView(ByGrants, APIView):
    @extend_schema(
        operation_id="namespaces_retrieve",
        parameters=[NAMESPACE_PARAM],
        responses={200: s.NamespaceSerializer, **error_responses(404)},
        tags=["namespaces"],
    )
    def get(self, request: Request, namespace: str) -> Response:
        checks.namespace(request, namespace)
        return Response(s.NamespaceSerializer(selectors.get_namespace(namespace)).data)

    @extend_schema(
        operation_id="namespaces_destroy",
        parameters=[NAMESPACE_PARAM],
        responses={204: None, **error_responses(404, 409)},
        tags=["namespaces"],
    )
    def delete(self, request: Request, namespace: str) -> Response:
        checks.namespace(request, namespace, MANAGE)
        services.drop_namespace(name=namespace, actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class NamespacePropertiesView(ByGrants, APIView):
    @extend_schema(
        operation_id="namespaces_properties_update",
        parameters=[NAMESPACE_PARAM],
        request=s.PropertiesUpdateSerializer,
        responses={200: s.NamespaceSerializer, **error_responses(400, 404)},
        tags=["namespaces"],
    )
    def post(self, request: Request, namespace: str) -> Response:
        checks.namespace(request, namespace, MANAGE)
        data = validated(s.PropertiesUpdateSerializer, request)
        result = services.update_namespace_properties(
            name=namespace, updates=data["updates"], removals=data["removals"], actor=request.user
        )
        return Response(s.NamespaceSerializer(result).data)


class DroppedListView(ByGrants, APIView):
    @extend_schema(
        operation_id="namespaces_dropped_list",
        parameters=[NAMESPACE_PARAM],
        responses={200: s.DroppedSerializer(many=True), **error_responses(404)},
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
            NAMESPACE_PARAM,
            OpenApiParameter("uuid", OpenApiTypes.STR, OpenApiParameter.PATH),
        ],
        request=s.RestoreSerializer,
        responses={201: OpenApiTypes.OBJECT, **error_responses(400, 403, 404, 409)},
        description=(
            "Bring back a dropped table or view (Snowflake's UNDROP): its metadata file of "
            "the drop is registered again, under its old name or `name`. 409 when the name "
            "is taken or the object is in the catalog again."
        ),
        tags=["namespaces"],
    )
    def post(self, request: Request, namespace: str, uuid: str) -> Response:
        checks.namespace(request, namespace, CREATE)
        data = validated(s.RestoreSerializer, request)
        obj = services.restore_dropped(
            namespace=namespace, uuid=uuid, name=data.get("name"), actor=request.user
        )
        return Response(
            {"kind": obj.kind, "namespace": obj.namespace.name, "name": obj.name},
            status=status.HTTP_201_CREATED,
        )

"""GET/POST/DELETE /api/grants/: list, grant and revoke privileges; POST
/api/grants/owner: transfer an owner. Thin: catalog.services.grants decides and records."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.generics import ListAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog import access
from catalog.api import serializers as s
from catalog.api.permissions import HoldsAPrivilege
from catalog.api.shared import CatalogPagination, error_responses, validated
from catalog.core.access import PRIVILEGES
from catalog.models import Grant
from catalog.services import grants

_PRIVILEGES = "; ".join(f"`{name}`: {meaning}" for name, meaning in PRIVILEGES.items())
_FILTERS = [
    OpenApiParameter("principal_type", OpenApiTypes.STR, enum=["user", "group", "client"]),
    OpenApiParameter("principal", OpenApiTypes.STR, description="A username, group or client id."),
    OpenApiParameter("securable_type", OpenApiTypes.STR, enum=["catalog", "namespace", "object"]),
    OpenApiParameter(
        "namespace",
        OpenApiTypes.STR,
        description="Grants on this namespace and on objects directly in it.",
    ),
    OpenApiParameter("name", OpenApiTypes.STR, description="With namespace: one object's."),
    OpenApiParameter("privilege", OpenApiTypes.STR),
]
_REVOKE = [
    OpenApiParameter("privilege", OpenApiTypes.STR, required=True),
    OpenApiParameter(
        "principal_type", OpenApiTypes.STR, enum=["user", "group", "client"], required=True
    ),
    OpenApiParameter("principal", OpenApiTypes.STR, required=True),
    OpenApiParameter(
        "securable_type", OpenApiTypes.STR, enum=["catalog", "namespace", "object"], required=True
    ),
    OpenApiParameter("namespace", OpenApiTypes.STR),
    OpenApiParameter("name", OpenApiTypes.STR),
]
_PRINCIPAL_FIELDS = {
    "user": "user__username",
    "group": "group__name",
    "client": "client__client_id",
}

_RELATED = ("user", "group", "client", "namespace", "object__namespace", "granted_by")


class GrantListView(ListAPIView):
    """Grants are held on the catalog, a namespace (and so on everything under it) or one
    object, by a user, a group or an engine credential (which they narrow)."""

    permission_classes = [HoldsAPrivilege]
    serializer_class = s.GrantSerializer
    pagination_class = CatalogPagination

    def get_queryset(self) -> Any:
        rows = Grant.objects.select_related(*_RELATED).order_by("id")
        params = self.request.query_params
        kind = params.get("principal_type")
        if kind in _PRINCIPAL_FIELDS:
            rows = rows.filter(**{f"{kind}__isnull": False})
            if params.get("principal"):
                rows = rows.filter(**{_PRINCIPAL_FIELDS[kind]: params["principal"]})
        securable = params.get("securable_type")
        if securable == "catalog":
            rows = rows.filter(namespace__isnull=True, object__isnull=True)
        elif securable == "namespace":
            rows = rows.filter(namespace__isnull=False)
        elif securable == "object":
            rows = rows.filter(object__isnull=False)
        if params.get("namespace"):
            if params.get("name"):
                rows = rows.filter(
                    object__namespace__name=params["namespace"], object__name=params["name"]
                )
            else:
                rows = rows.filter(namespace__name=params["namespace"]) | rows.filter(
                    object__namespace__name=params["namespace"]
                )
        if params.get("privilege"):
            rows = rows.filter(privilege=params["privilege"])
        return access.visible_grants(access.principal_of(self.request), rows)

    @extend_schema(
        operation_id="grants_list",
        parameters=_FILTERS,
        description="The grants you may see: your own, your groups' and your credentials', "
        "and every grant on what you manage.",
        tags=["grants"],
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    @extend_schema(
        operation_id="grants_create",
        request=s.GrantRequestSerializer,
        responses={
            201: s.GrantSerializer,
            200: OpenApiResponse(s.GrantSerializer, description="Held already: unchanged."),
            **error_responses(400, 403, 404),
        },
        description="Grant a privilege. Needs manage on the securable (its owner holds it); "
        "a grant to an engine credential narrows it to what its grants allow of its "
        f"user's privileges, and is its user's to make. Privileges: {_PRIVILEGES}.",
        tags=["grants"],
    )
    def post(self, request: Request) -> Response:
        data = validated(s.GrantRequestSerializer, request)
        grant, created = grants.grant(actor=request.user, **data)
        grant = (
            self.get_queryset()
            .model.objects.select_related(
                "user", "group", "client", "namespace", "object__namespace", "granted_by"
            )
            .get(pk=grant.pk)
        )
        return Response(
            s.GrantSerializer(grant).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )

    @extend_schema(
        operation_id="grants_destroy",
        parameters=_REVOKE,
        responses={204: None, **error_responses(400, 403, 404)},
        description="Revoke a grant made on exactly this securable (one inherited from a "
        "namespace above is revoked there), named by the query's parameters or by a JSON "
        "body with the same fields as a grant's. It takes effect at the principal's next "
        "request.",
        tags=["grants"],
    )
    def delete(self, request: Request) -> Response:
        fields = request.data if request.data else request.query_params.dict()
        serializer = s.GrantRequestSerializer(data=fields)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        grants.revoke(actor=request.user, **data)
        return Response(status=status.HTTP_204_NO_CONTENT)


class OwnerView(APIView):
    permission_classes = [HoldsAPrivilege]

    @extend_schema(
        operation_id="grants_owner_transfer",
        request=s.OwnerTransferSerializer,
        responses={200: s.OwnerSerializer, **error_responses(400, 403, 404)},
        description="Make a user the owner of a namespace or an object (an administrator's "
        "to do). The owner holds every privilege on it, and on everything under a namespace.",
        tags=["grants"],
    )
    def post(self, request: Request) -> Response:
        data = validated(s.OwnerTransferSerializer, request)
        target = grants.transfer_owner(actor=request.user, **data)
        return Response(
            {"securable_type": target.type, "securable": target.label, "owner": data["owner"]}
        )

"""Row filters and column masks of a table: GET .../policies lists them; PUT and DELETE
.../row-filter and .../columns/{column}/mask set and drop them. Thin: catalog.services.policies
checks, writes and records; catalog.policies reads."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog import checks, policies, services
from catalog.api.shared import NAMESPACE_PARAM, TABLE_PARAM, ByGrants, error_responses, validated
from catalog.core.access import READ_METADATA
from catalog.services.kernel import TABLE

COLUMN_PARAM = OpenApiParameter(
    "column", OpenApiTypes.STR, OpenApiParameter.PATH, description="A column of the table."
)
_SEMANTICS = (
    "A policy applies to every reader (owners, managers and superusers included) but the "
    "members of its exempt groups. `current_user()` and `is_member('group')` mean the "
    "reader. Setting one needs `manage` on the table and replaces the one there was; the "
    "expression is Spark SQL over the table's columns (a 400 names its line and column)."
)


class PolicySerializer(serializers.Serializer):
    """A row filter, or (with `column`) a column mask, as kept."""

    column = serializers.CharField(required=False)
    expression = serializers.CharField()
    exempt_groups = serializers.ListField(child=serializers.CharField())
    created_at = serializers.DateTimeField()
    created_by = serializers.CharField()
    updated_at = serializers.DateTimeField()
    updated_by = serializers.CharField()


class PoliciesSerializer(serializers.Serializer):
    table = serializers.CharField()
    row_filter = PolicySerializer(allow_null=True)
    masks = PolicySerializer(many=True)


class SetPolicySerializer(serializers.Serializer):
    expression = serializers.CharField(
        trim_whitespace=False,
        help_text="Spark SQL: a boolean over the table's columns (a row filter), or the "
        "value readers see in the column's place (a mask).",
    )
    exempt_groups = serializers.ListField(
        child=serializers.CharField(), required=False, default=list
    )


def _set(request: Request, setter: Any, **where: str) -> Response:
    """Set a policy from the request's body with `setter` (a service), and answer it."""
    data = validated(SetPolicySerializer, request)
    policy = setter(
        **where,
        expression=data["expression"],
        exempt_groups=data["exempt_groups"],
        actor=request.user,
    )
    return Response(policies.described(policy).as_dict())


class TablePoliciesView(ByGrants, APIView):
    @extend_schema(
        operation_id="tables_policies",
        parameters=[NAMESPACE_PARAM, TABLE_PARAM],
        description="The table's row filter (null when none) and column masks, with their "
        f"exempt groups and who set them when. {_SEMANTICS}",
        responses={200: PoliciesSerializer, **error_responses(404)},
        tags=["policies"],
    )
    def get(self, request: Request, namespace: str, name: str) -> Response:
        table = checks.obj(request, TABLE, namespace, name, READ_METADATA)
        shown = policies.shown(table)
        row_filter = shown["row_filter"]
        return Response(
            {
                "table": str(table),
                "row_filter": row_filter.as_dict() if row_filter is not None else None,
                "masks": [mask.as_dict() for mask in shown["masks"]],
            }
        )


class RowFilterView(ByGrants, APIView):
    @extend_schema(
        operation_id="tables_row_filter_set",
        parameters=[NAMESPACE_PARAM, TABLE_PARAM],
        request=SetPolicySerializer,
        description=f"Set the table's row filter: readers see the rows where it is TRUE. "
        f"{_SEMANTICS}",
        responses={200: PolicySerializer, **error_responses(400, 403, 404)},
        tags=["policies"],
    )
    def put(self, request: Request, namespace: str, name: str) -> Response:
        return _set(request, services.set_row_filter, namespace=namespace, name=name)

    @extend_schema(
        operation_id="tables_row_filter_drop",
        parameters=[NAMESPACE_PARAM, TABLE_PARAM],
        description="Drop the table's row filter (404 when it has none).",
        responses={204: None, **error_responses(403, 404)},
        tags=["policies"],
    )
    def delete(self, request: Request, namespace: str, name: str) -> Response:
        services.drop_row_filter(namespace=namespace, name=name, actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ColumnMaskView(ByGrants, APIView):
    @extend_schema(
        operation_id="tables_column_mask_set",
        parameters=[NAMESPACE_PARAM, TABLE_PARAM, COLUMN_PARAM],
        request=SetPolicySerializer,
        description="Set a column's mask: readers see the expression's value in the "
        f"column's place; it may read the table's other columns. {_SEMANTICS}",
        responses={200: PolicySerializer, **error_responses(400, 403, 404)},
        tags=["policies"],
    )
    def put(self, request: Request, namespace: str, name: str, column: str) -> Response:
        return _set(
            request, services.set_column_mask, namespace=namespace, name=name, column=column
        )

    @extend_schema(
        operation_id="tables_column_mask_drop",
        parameters=[NAMESPACE_PARAM, TABLE_PARAM, COLUMN_PARAM],
        description="Drop a column's mask (404 when it has none).",
        responses={204: None, **error_responses(403, 404)},
        tags=["policies"],
    )
    def delete(self, request: Request, namespace: str, name: str, column: str) -> Response:
        services.drop_column_mask(namespace=namespace, name=name, column=column, actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)

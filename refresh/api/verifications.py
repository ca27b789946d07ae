"""Verification in the API: a verify asked for (a Spark job recomputing the newest
snapshots), and a table's verdicts."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import generics
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog import jobs
from catalog.api.jobs import ACCEPTED, respond
from catalog.api.serializers import JobAcceptedSerializer
from catalog.core.access import READ_DATA
from refresh import checks, selectors
from refresh.api.common import (
    MT_PARAMS,
    TAGS,
    Pagination,
    SeesByGrants,
    error_responses,
    managed_table,
    validated,
)
from refresh.api.serializers.verifications import (
    VerificationSerializer,
    VerificationsSerializer,
    VerifyRequestSerializer,
)


class VerifyView(APIView):
    permission_classes = [SeesByGrants]

    @extend_schema(
        operation_id="materialized_tables_verify",
        parameters=MT_PARAMS,
        request=VerifyRequestSerializer,
        responses={
            200: VerificationsSerializer,
            202: JobAcceptedSerializer,
            **error_responses(400, 403, 404, 409, 429, 503),
        },
        description=(
            "Recompute the query with Spark over the source snapshots each of the newest "
            "`snapshots` snapshots records in its refresh state (time travel) and compare "
            "with the table at that snapshot, as multisets of rows: EXACT, DIFFERS (rows "
            "missing and extra, with a sample) or UNVERIFIABLE (why). Each verdict is kept "
            f"with the table's history (GET .../verifications/). 409: no snapshot records a "
            f"refresh state yet. {ACCEPTED}"
        ),
        tags=TAGS,
    )
    def post(self, request: Request, namespace: str, name: str) -> Response:
        data = validated(VerifyRequestSerializer, request)
        managed_table(request, namespace, name)
        return respond(
            jobs.attempt(
                "verify_materialized_table",
                {"namespace": namespace, "name": name, "snapshots": data["snapshots"]},
                actor=request.user,
                summary=f"Verify {namespace}.{name} ({data['snapshots']} snapshots)",
            )
        )


class VerificationListView(generics.ListAPIView):
    serializer_class = VerificationSerializer
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
        parameters=MT_PARAMS,
        responses={200: VerificationSerializer(many=True), **error_responses(404)},
        description="The table's verifications, newest first (the newest 200 are kept).",
        tags=TAGS,
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

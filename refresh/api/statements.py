"""POST /api/statements/: a script of FLIP-435 and Flink statements, queries and grants, run
in order by the console (refresh.console); one needing a worker's Spark goes on as a job."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog.api.permissions import HoldsAPrivilege
from catalog.api.serializers import SparkJobSerializer
from refresh import console, console_plan
from refresh.api.common import validated
from refresh.api.serializers.statements import (
    StatementRequestSerializer,
    StatementsResponseSerializer,
)


class StatementsView(APIView):
    # Whoever holds a privilege somewhere: the console asks for the viewer role for every
    # statement but GRANT, REVOKE and SHOW GRANTS, which ask what catalog.services.grants
    # asks (a namespace's manager grants on it without a role on the whole catalog).
    permission_classes = [HoldsAPrivilege]

    @extend_schema(
        operation_id="statements_execute",
        request=StatementRequestSerializer,
        responses={
            200: StatementsResponseSerializer,
            202: StatementsResponseSerializer,
            400: StatementsResponseSerializer,
            403: StatementsResponseSerializer,
            404: StatementsResponseSerializer,
            409: StatementsResponseSerializer,
            429: StatementsResponseSerializer,
            503: StatementsResponseSerializer,
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
        data = validated(StatementRequestSerializer, request)
        if data["dry_run"]:
            results = console_plan.plan(
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

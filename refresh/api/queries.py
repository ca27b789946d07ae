"""Queries over the API: a user's history (GET /api/queries/), a query's kept rows in pages
(through its own URL or its job's: GET /api/jobs/<id>/rows), its result as CSV or Parquet
(streamed), and running it again. Users see their own queries; superusers see everyone's.
A query itself is run by POST /api/statements/ (refresh.api.statements.StatementsView)."""

from __future__ import annotations

from typing import Any

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog import access_events, job_news
from catalog import selectors as catalog_selectors
from catalog.api.permissions import HoldsAPrivilege
from catalog.core.errors import InvalidInput
from catalog.core.inputs import whole_number
from refresh import queries
from refresh.api.common import Pagination
from refresh.api.serializers.queries import QueryRowsSerializer, QuerySerializer
from refresh.api.serializers.statements import StatementsResponseSerializer
from refresh.api.statements import statements_response

_QUERY = OpenApiParameter("query_id", OpenApiTypes.INT, OpenApiParameter.PATH)
_JOB = OpenApiParameter("job_id", OpenApiTypes.INT, OpenApiParameter.PATH)
_PAGE = [
    OpenApiParameter(
        "offset", OpenApiTypes.INT, description="The first row to give (0-based; default 0)."
    ),
    OpenApiParameter(
        "limit",
        OpenApiTypes.INT,
        description=f"At most this many rows (default 100, at most {queries.MAX_PAGE_ROWS}).",
    ),
]
_WAIT = OpenApiParameter(
    "wait",
    OpenApiTypes.NUMBER,
    description="Seconds (at most 5) to wait for the first rows or the end when there are "
    "none yet: the answer comes as soon as they are there (default 0: at once).",
)
_TAGS = ["queries"]
ROWS_HELP = (
    "Rows of the query's kept result from `offset`, as JSON values (decimals and 64-bit "
    "edge cases as text where JSON cannot carry them exactly, binary as base64), with the "
    "columns and their Spark types, the state, and `complete`: while the query waits or "
    "runs, `rows` holds what is stored so far (the first page is stored first), so a client "
    "asks this URL again (with `wait`, it is answered as soon as rows are there) until "
    "`complete`. Another user's query is a 404; a query that read a table or view you may "
    "no longer read (read_data) is a 403 naming it, checked on each request."
)


def _page_bounds(request: Request) -> tuple[int, int]:
    values = []
    for name, default in (("offset", 0), ("limit", 100)):
        text = request.query_params.get(name, str(default))
        value = whole_number(text, digits=12)
        if value is None:
            raise InvalidInput(f"{name} must be a whole number, not {text[:40]!r}", field=name)
        values.append(value)
    offset, limit = values
    if limit < 1:
        raise InvalidInput("limit must be 1 or more", field="limit")
    return offset, limit


def _wait(request: Request) -> float:
    text = request.query_params.get("wait", "0")
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= job_news.MAX_WAIT_SECONDS:  # NaN fails too
        raise InvalidInput(
            f"wait must be a number of seconds from 0 to {job_news.MAX_WAIT_SECONDS:g}, "
            f"not {text[:40]!r}",
            field="wait",
        )
    return seconds


def _waited(request: Request, job_id: int | None, look: Any) -> Response:
    """`look()`'s page of rows, once it has rows or is complete or `wait` has passed."""

    def looked() -> tuple[dict[str, Any], bool]:
        page = look()
        return page, bool(page["rows"]) or page["complete"]

    seconds = _wait(request)
    if job_id is None:
        return Response(look())
    return Response(job_news.wait_for_news(job_id, user=request.user, seconds=seconds, look=looked))


class QueryListView(generics.ListAPIView):
    serializer_class = QuerySerializer
    permission_classes = [HoldsAPrivilege]
    pagination_class = Pagination

    def get_queryset(self) -> Any:
        return queries.visible_to(self.request.user)

    @extend_schema(
        operation_id="queries_list",
        responses={200: QuerySerializer(many=True)},
        description="Your query history, newest first (a superuser's: everyone's): each "
        "query's text, namespace, times, duration, rows, outcome, and the links to its "
        "result while it is kept.",
        tags=_TAGS,
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)


class QueryDetailView(APIView):
    permission_classes = [HoldsAPrivilege]

    @extend_schema(
        operation_id="queries_retrieve",
        parameters=[_QUERY],
        responses={200: QuerySerializer},
        tags=_TAGS,
    )
    def get(self, request: Request, query_id: int) -> Response:
        return Response(QuerySerializer(queries.get(query_id, user=request.user)).data)


class QueryRowsView(APIView):
    permission_classes = [HoldsAPrivilege]

    @extend_schema(
        operation_id="queries_rows",
        parameters=[_QUERY, *_PAGE, _WAIT],
        responses={200: QueryRowsSerializer},
        description=ROWS_HELP,
        tags=_TAGS,
    )
    def get(self, request: Request, query_id: int) -> Response:
        offset, limit = _page_bounds(request)
        read = [queries.get(query_id, user=request.user)]
        job_id = read[0].job_id

        def look() -> dict[str, Any]:
            # The first look answers from the row read above; a waiting request reads it
            # again each time the job has news.
            query = read.pop() if read else queries.get(query_id, user=request.user)
            return queries.page(query, user=request.user, offset=offset, limit=limit)

        return _waited(request, job_id, look)


class JobRowsView(APIView):
    """The rows of a job's query, at the job's own URL: a client that ran a query follows
    the job it was given."""

    permission_classes = [HoldsAPrivilege]

    @extend_schema(
        operation_id="jobs_rows",
        parameters=[
            _JOB,
            *_PAGE,
            _WAIT,
            OpenApiParameter(
                "query",
                OpenApiTypes.INT,
                description="Which of the job's queries (a script's); its first by default.",
            ),
        ],
        responses={200: QueryRowsSerializer},
        description=ROWS_HELP + " Before the worker starts the query (a script's statements "
        "before it), `query` is null and `state` is the job's.",
        tags=["jobs"],
    )
    def get(self, request: Request, job_id: int) -> Response:
        offset, limit = _page_bounds(request)
        asked = request.query_params.get("query")

        def look() -> dict[str, Any]:
            job = catalog_selectors.get_spark_job(job_id, user=request.user)
            query = queries.of_job(job, user=request.user, query_id=asked)
            if query is not None:
                return queries.page(query, user=request.user, offset=offset, limit=limit)
            return {
                "query": None,
                "state": job.state,
                "kind": None,
                "columns": [],
                "offset": offset,
                "limit": min(limit, queries.MAX_PAGE_ROWS),
                "rows": [],
                "row_count": 0,
                "complete": job.finished,
                "cut": None,
                "cut_message": None,
                "duration_seconds": None,
                "error": job.error,
            }

        return _waited(request, job_id, look)


class QueryDownloadView(APIView):
    permission_classes = [HoldsAPrivilege]

    @extend_schema(
        operation_id="queries_download",
        parameters=[
            _QUERY,
            OpenApiParameter(
                "fmt", OpenApiTypes.STR, OpenApiParameter.PATH, enum=["csv", "parquet"]
            ),
        ],
        responses={
            (200, "text/csv"): OpenApiTypes.BINARY,
            (200, "application/vnd.apache.parquet"): OpenApiTypes.BINARY,
        },
        description="The kept result as one CSV or Parquet file (result.csv, result.parquet), "
        "streamed: a finished query whose result is still kept; 404 once pruned; 403 when "
        "you may no longer read a table or view the query read.",
        tags=_TAGS,
    )
    def get(self, request: Request, query_id: str, fmt: str) -> StreamingHttpResponse:
        query = queries.get(query_id, user=request.user)
        chunks, content_type, name = queries.download(query, user=request.user, fmt=fmt)
        access_events.read(request, "download", "api", object_type="query", name=str(query.pk))
        response = StreamingHttpResponse(chunks, content_type=content_type)
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        return response


class QueryRunView(APIView):
    permission_classes = [HoldsAPrivilege]

    @extend_schema(
        operation_id="queries_run",
        parameters=[_QUERY],
        request=None,
        responses={202: StatementsResponseSerializer},
        description="Run the query again, in its namespace: answered as POST /api/statements/ "
        "answers its text (202 with the new job and query); 403 when you may no longer read "
        "a table or view it read.",
        tags=_TAGS,
    )
    def post(self, request: Request, query_id: int) -> Response:
        query = queries.get(query_id, user=request.user)
        if query.reads is not None:  # else the worker's check is the first
            queries.may_still_read(query, user=request.user)
        return statements_response(query.sql, query.namespace or None, request.user)

"""Spark jobs over the API: a request that needs a worker's Spark answers 202 with its job
(`respond`), and the job's URL gives its state and, once finished, the answer the request
would have given. Users see their own jobs; operators see everyone's."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, status
from rest_framework.pagination import PageNumberPagination
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog import access, jobs, selectors, workers
from catalog.api import serializers as s
from catalog.jobs import Outcome
from catalog.models import SparkJob

_JOB = OpenApiParameter("job_id", OpenApiTypes.INT, OpenApiParameter.PATH, description="Job id.")
_TAGS = ["jobs"]
#: What a 202 says, for the OpenAPI description of endpoints that may answer one.
ACCEPTED = (
    "202: the operation needs a worker's Spark and runs as a job: `job.url` gives its "
    "state and, once finished, the answer (`status`, `result`) or the `error`. 503 when no "
    "worker is running, 429 (Retry-After) when too many jobs are waiting."
)


def respond(outcome: Outcome) -> Response:
    """The operation's own answer, or 202 with its job (a finished job reused from a moment
    ago gives its answer at once)."""
    job = outcome.job
    if job is None:
        return Response(outcome.body, status=outcome.status or status.HTTP_200_OK)
    if job.state == SparkJob.State.SUCCEEDED and job.result is not None:
        return Response(job.result, status=job.status or status.HTTP_200_OK)
    if job.state == SparkJob.State.FAILED:
        return Response(failure_body(job), status=job.status or 500)
    body = {"job": s.SparkJobSerializer(job).data}
    response = Response(body, status=status.HTTP_202_ACCEPTED)
    response["Location"] = body["job"]["url"]
    return response


def failure_body(job: SparkJob) -> dict[str, Any]:
    """A failed job's answer in the API's error format (a console script: its results)."""
    if job.result is not None:
        return job.result
    error = job.error or {}
    body: dict[str, Any] = {
        "error": error.get("message", "The job failed"),
        "type": error.get("type", "Error"),
    }
    for key in ("field", "line", "column"):
        if error.get(key) is not None:
            body[key] = error[key]
    return body


class _AnyRole(BasePermission):
    """Jobs are their requester's (a preview, a console query of one who reads only a
    namespace): whoever holds a privilege somewhere may follow and cancel their own."""

    message = "You hold no privilege in this catalog: ask its administrators for a grant."

    def has_permission(self, request: Request, view: Any) -> bool:
        return access.principal_of(request).holds_anything()


class _Pages(PageNumberPagination):
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500


class JobListView(generics.ListAPIView):
    serializer_class = s.SparkJobSerializer
    permission_classes = [_AnyRole]
    pagination_class = _Pages

    def get_queryset(self) -> Any:
        return selectors.spark_jobs_of(self.request.user)

    @extend_schema(
        operation_id="jobs_list",
        responses={200: s.SparkJobSerializer(many=True)},
        description="Your Spark jobs, newest first (an operator's: everyone's).",
        tags=_TAGS,
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        context = {"request": request, "withheld": jobs.withheld(page, request.user)}
        data = s.SparkJobSerializer(page, many=True, context=context).data
        return self.get_paginated_response(data)


class JobDetailView(APIView):
    permission_classes = [_AnyRole]

    @extend_schema(
        operation_id="jobs_retrieve",
        parameters=[_JOB],
        responses={200: s.SparkJobSerializer},
        tags=_TAGS,
    )
    def get(self, request: Request, job_id: int) -> Response:
        job = selectors.get_spark_job(job_id, user=request.user)
        context = {"withheld": jobs.withheld([job], request.user)}
        return Response(s.SparkJobSerializer(job, context=context).data)


class JobCancelView(APIView):
    permission_classes = [_AnyRole]

    @extend_schema(
        operation_id="jobs_cancel",
        parameters=[_JOB],
        request=None,
        responses={200: s.SparkJobSerializer},
        description="A waiting job is cancelled at once; a running one's Spark jobs are "
        "cancelled within seconds. A finished job answers 409.",
        tags=_TAGS,
    )
    def post(self, request: Request, job_id: int) -> Response:
        job = selectors.get_spark_job(job_id, user=request.user)
        return Response(s.SparkJobSerializer(jobs.cancel(job, actor=request.user)).data)


class WorkerListView(APIView):
    permission_classes = [_AnyRole]

    @extend_schema(
        operation_id="workers_list",
        responses={200: s.WorkerSerializer(many=True)},
        description="The refresh workers as they last said they were alive; `alive` is what "
        "decides between a job (202) and 503.",
        tags=_TAGS,
    )
    def get(self, request: Request) -> Response:
        return Response(s.WorkerSerializer(workers.listed(), many=True).data)

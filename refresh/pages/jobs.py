"""A Spark job's page: what it does, its state while it waits and runs (filled in without a
reload by static/js/jobs.js), and its answer or error; a cancel button while it runs.
Forms whose operation needed a worker's Spark (ALTER ... AS, a rollback, a view whose
column types Spark derives) come here, and go on to the object once the job succeeded."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from catalog.core.errors import CatalogError, NotFound
from catalog.pages.views import catalog_page
from refresh import selectors, spark_jobs
from refresh.models import SparkJob


def _job(request: HttpRequest, job_id: int) -> SparkJob:
    try:
        return selectors.get_spark_job(job_id, user=request.user)
    except NotFound as error:
        raise Http404(error.message) from None


def done_url(job: SparkJob) -> str | None:
    """The page of the object the job made or changed."""
    arguments = job.arguments or {}
    if job.kind in ("create_materialized_table", "alter_query", "rollback_definition"):
        return reverse(
            "refresh:mt-detail",
            kwargs={"namespace": arguments["namespace"], "name": arguments["name"]},
        )
    if job.kind in ("create_view", "replace_view"):
        return reverse(
            "catalog:view-detail",
            kwargs={"namespace": arguments["namespace"], "name": arguments["name"]},
        )
    return None


def job_context(job: SparkJob) -> dict[str, Any]:
    """What the job blocks of every page show (templates/refresh/_job.html)."""
    return {
        "job": job,
        "job_api_url": reverse("api:job-detail", kwargs={"job_id": job.pk}),
        "job_page_url": reverse("refresh:job", kwargs={"job_id": job.pk}),
        "job_cancel_url": reverse("refresh:job-cancel", kwargs={"job_id": job.pk}),
    }


@require_http_methods(["GET", "HEAD"])
@catalog_page()
def job_page(request: HttpRequest, job_id: int) -> HttpResponse:
    job = _job(request, job_id)
    context = {**job_context(job), "done_url": done_url(job), "arguments": job.arguments}
    return render(request, "refresh/job.html", context)


@require_http_methods(["POST"])
def job_cancel(request: HttpRequest, job_id: int) -> HttpResponse:
    """Whoever asked for a job (a viewer's preview too) may cancel it."""
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    job = _job(request, job_id)
    try:
        spark_jobs.cancel(job, actor=request.user)
    except CatalogError as error:
        messages.warning(request, error.message)
    else:
        messages.success(request, f"Job {job.pk} is cancelled.")
    return redirect("refresh:job", job_id=job.pk)

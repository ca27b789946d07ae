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

from catalog import jobs, selectors
from catalog.core.errors import CatalogError, NotFound
from catalog.models import SparkJob
from catalog.pages.access import catalog_page


def _job(request: HttpRequest, job_id: int) -> SparkJob:
    try:
        return selectors.get_spark_job(job_id, user=request.user)
    except NotFound as error:
        raise Http404(error.message) from None


def done_url(job: SparkJob) -> str | None:
    """The page of the object the job made or changed (its kind's `done_page`)."""
    page = jobs.DONE_PAGES.get(job.kind)
    arguments = job.arguments or {}
    if page is None or "namespace" not in arguments or "name" not in arguments:
        return None
    return reverse(page, kwargs={"namespace": arguments["namespace"], "name": arguments["name"]})


def job_context(job: SparkJob) -> dict[str, Any]:
    """What the job blocks of every page show (templates/catalog/_job.html)."""
    return {
        "job": job,
        "job_api_url": reverse("api:job-detail", kwargs={"job_id": job.pk}),
        "job_page_url": reverse("catalog:job", kwargs={"job_id": job.pk}),
        "job_cancel_url": reverse("catalog:job-cancel", kwargs={"job_id": job.pk}),
    }


@require_http_methods(["GET", "HEAD"])
@catalog_page()
def job_page(request: HttpRequest, job_id: int) -> HttpResponse:
    job = _job(request, job_id)
    context = {**job_context(job), "done_url": done_url(job), "arguments": job.arguments}
    # An answer showing an object the user may no longer read is left out, and says why.
    context["withheld"] = jobs.withheld([job], request.user).get(job.pk)
    status = 403 if context["withheld"] else 200
    return render(request, "catalog/job.html", context, status=status)


@require_http_methods(["POST"])
def job_cancel(request: HttpRequest, job_id: int) -> HttpResponse:
    """Whoever asked for a job (a viewer's preview too) may cancel it."""
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    job = _job(request, job_id)
    try:
        jobs.cancel(job, actor=request.user)
    except CatalogError as error:
        messages.warning(request, error.message)
    else:
        messages.success(request, f"Job {job.pk} is cancelled.")
    return redirect("catalog:job", job_id=job.pk)

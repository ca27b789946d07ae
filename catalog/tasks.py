"""Celery tasks of the catalog: thin wrappers that call one function each."""

from __future__ import annotations

from celery import shared_task

from catalog.iceberg_rest import idempotency
from catalog.services.credentials import delete_expired_tokens


@shared_task(name="catalog.purge_expired_tokens")
def purge_expired_tokens() -> int:
    """Expired bearer tokens are useless, and so are Idempotency-Keys past their lifetime
    (which would otherwise grow their table with every mutation); celery-beat runs this
    hourly (settings). How many tokens were deleted."""
    idempotency.delete_expired()
    return delete_expired_tokens()


@shared_task(name="catalog.run_spark_job")
def run_spark_job(job_id: int, hops: int = 0) -> str:
    """A Spark job a web request asked for (catalog.jobs): claim it and run it (`hops`:
    how many busy workers handed it on already)."""
    from catalog import jobs

    return jobs.run(job_id, hops=hops)


@shared_task(name="catalog.fail_abandoned_jobs")
def fail_abandoned_jobs() -> int:
    """Jobs whose worker died or that no worker took (celery-beat, every 15 s: settings)."""
    from catalog import jobs

    return jobs.fail_abandoned()


@shared_task(name="catalog.prune_spark_jobs")
def prune_spark_jobs() -> int:
    """Finished Spark jobs older than JOBS_KEEP_DAYS (celery-beat, hourly)."""
    from catalog import jobs

    return jobs.prune()


@shared_task(name="catalog.fold_commit_events")
def fold_commit_events() -> int:
    """Old successful commit events folded per object and hour (celery-beat,
    HISTORY_FOLD_EVERY_SECONDS)."""
    from catalog import history

    return history.fold_commits(periodic=True)


@shared_task(name="catalog.prune_audit")
def prune_audit() -> int:
    """Catalog events and grant changes older than AUDIT_KEEP_DAYS (celery-beat, hourly)."""
    from catalog import audit

    return audit.prune()

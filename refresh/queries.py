"""Queries from the console and POST /api/statements/: their history rows, their run on a
worker, and their kept results.

A query (a SELECT, DESCRIBE, SHOW COLUMNS or EXPLAIN) needs a worker's Spark, so a web
request meets it as NeedsWorker and makes it (with the rest of its script) a Spark job of
kind "query" (refresh.console); the Query row is written then, QUEUED. On the worker,
`run` parses, analyzes and checks it through the sandbox (refresh.spark.query), asks
`catalog.roles.may_read` whether its user may read what the analyzed plan reads, fetches
its first QUERY_RESULT_MAX_ROWS + 1 rows, keeps what fits both bounds
(refresh.core.results), and stores them as Parquet parts, the first page first: the row
lists each part once it is whole, so a reader (`page`) has rows a moment after Spark
answers. A query past QUERY_TIMEOUT_SECONDS has its Spark jobs cancelled (the job's Spark
job group, as a cancel does) and fails with StatementTimeout.

Results are read by the user who ran the query and by superusers only (`visible_to`), and
only while they may still read every table and view the query read (`may_still_read`, on
each request: the row keeps what the analyzed plan read); celery-beat prunes them
(`prune`): after QUERY_RESULT_KEEP_HOURS, beyond each user's newest QUERY_RESULTS_PER_USER,
and folders no row names (a worker killed while writing)."""

from __future__ import annotations

import logging
import re
import secrets
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db.models import Q, QuerySet
from django.urls import reverse
from django.utils import timezone

from catalog import access, access_events, policies
from catalog.core.access import READ_METADATA
from catalog.core.errors import (
    CatalogError,
    Forbidden,
    InvalidInput,
    NotFound,
    StatementTimeout,
    TooManyJobs,
    http_status,
)
from catalog.models import SparkJob
from catalog.roles import may_read, refused_reads
from refresh import analysis
from refresh.core import plain_reads, results
from refresh.core import statements as st
from refresh.models import Query

logger = logging.getLogger(__name__)

#: The job kind of a console script whose part run by a worker holds a query.
JOB_KIND = "query"
#: The most rows one page of a result gives.
MAX_PAGE_ROWS = 1000
#: A result folder no row names is deleted once this old (a worker stopped mid-write).
ORPHAN_AFTER_SECONDS = 3600
#: A plain read with a filter is read in process only from a table of at most this many
#: bytes of data files: a filter that prunes nothing reads them all, one by one, on one
#: thread that no cancel stops, where Spark reads them in parallel and can be stopped.
PLAIN_READ_MAX_BYTES = 256 * 1024 * 1024
_FOLDER = re.compile(r"^[0-9a-f]{32}$")


# -- the request side ---------------------------------------------------------------------


def check_bound(user: Any) -> None:
    """TooManyJobs (429) when the user has QUERIES_PER_USER queries waiting or running."""
    if not getattr(user, "pk", None):
        return
    running = SparkJob.objects.filter(
        requested_by=user, kind=JOB_KIND, state__in=SparkJob.ACTIVE
    ).count()
    if running >= settings.QUERIES_PER_USER:
        raise TooManyJobs(
            f"You have {running} queries waiting or running, the most one user may have "
            f"at a time (QUERIES_PER_USER = {settings.QUERIES_PER_USER}); wait for one to "
            "finish or cancel one",
            retry_after=settings.JOBS_RETRY_AFTER_SECONDS,
        )


def record_queued(
    statement: st.Query, *, job: SparkJob, index: int, namespace: str | None, actor: Any
) -> Query:
    """The history row of a query a web request handed to a job, before a worker takes it."""
    return _created(statement, job=job, index=index, namespace=namespace, actor=actor)


def _created(
    statement: st.Query, *, job: Any, index: int, namespace: str | None, actor: Any, **fields: Any
) -> Query:
    """A new history row of `statement` (the `index`th of `job`'s script) with `fields`."""
    return Query.objects.create(
        requested_by=actor,
        job=job,
        statement_index=index,
        kind=statement.kind,
        sql=statement.sql,
        namespace=namespace or "",
        **fields,
    )


# -- the worker side ----------------------------------------------------------------------


def run(
    statement: st.Query,
    *,
    namespace: str | None,
    actor: Any,
    job: SparkJob | None = None,
    index: int = 0,
) -> Query:
    """Run a query on this worker and keep its result (see the module). In a web request:
    NeedsWorker, before anything is written."""
    analysis.need_spark("Spark runs the query")
    clock = {"started": time.perf_counter()}
    query = _start(statement, namespace=namespace, actor=actor, job=job, index=index)
    deadline = None
    try:
        try:
            clock["claimed"] = time.perf_counter()
            plain = _plain_read(statement, namespace=namespace, actor=actor)
            if plain is not None:
                columns, table, reads = plain
                clock["plain"] = time.perf_counter()
            else:
                # Spark reads every table through the reader's row filters and masks.
                readers = policies.for_principal(access.Principal(actor))
                sql = statement.positioned or statement.sql
                prepared = analysis.prepare_query(sql, namespace=namespace, policies=readers)
                # The statement's time runs from here, where its Spark jobs read: a
                # worker's first query starts Spark (tens of seconds on a busy machine)
                # while it is analyzed, and that is not the query's time.
                deadline = _deadline(job)
                clock["prepared"] = time.perf_counter()
                check_reads(actor, prepared)
                columns, reads = prepared.columns, prepared.reads
                # Spark's reading has the last word (a VALUES statement stays VALUES).
                query.kind = statement.kind if prepared.kind == "SELECT" else prepared.kind
            query.columns = [{"name": name, "type": kind} for name, kind in columns]
            query.reads = [list(read) for read in reads]
            Query.objects.filter(pk=query.pk).update(
                columns=query.columns, kind=query.kind, reads=query.reads
            )
            clock["allowed"] = time.perf_counter()
            access_events.query_ran(actor, reads, query)
            if plain is None:
                table = analysis.fetch_query(prepared, max_rows=settings.QUERY_RESULT_MAX_ROWS)
                clock["fetched"] = time.perf_counter()
        finally:
            if deadline is not None:
                deadline.stop()
        bounded = results.bound(
            table,
            max_rows=settings.QUERY_RESULT_MAX_ROWS,
            max_bytes=settings.QUERY_RESULT_MAX_BYTES,
        )
        _store(query, bounded.table, clock)
    except Exception as error:
        raise _failed(query, error, job=job, deadline=deadline) from error
    now = timezone.now()
    query.state, query.finished_at, query.cut = Query.State.SUCCEEDED, now, bounded.cut
    query.result_bytes = bounded.table.nbytes
    query.expires_at = now + timedelta(hours=settings.QUERY_RESULT_KEEP_HOURS)
    Query.objects.filter(pk=query.pk).update(
        state=query.state,
        finished_at=now,
        cut=query.cut,
        result_bytes=query.result_bytes,
        expires_at=query.expires_at,
    )
    _announce(query)
    _keep_newest_results(query.requested_by_id)
    clock["finished"] = time.perf_counter()
    _log_phases(query, clock)
    return query


def _announce(query: Query) -> None:
    """Wake the requests waiting for the query's rows at its job's URL or its own."""
    from catalog import job_news

    if query.job_id is not None:
        job_news.announce(query.job_id)


def _log_phases(query: Query, clock: dict[str, float]) -> None:
    """Where a query's time went on the worker, one line (bench/query.py reads it): Spark's
    phases (prepared, fetched) or the in-process reader's (plain)."""
    order = ["started", "claimed", "plain", "prepared", "allowed", "fetched", "first_rows",
             "finished"]  # fmt: skip
    order = [name for name in order if name in clock]
    phases = [
        f"{name}={clock[name] - clock[before]:.3f}"
        for before, name in zip(order, order[1:], strict=False)
    ]
    logger.info("Query %s phases: %s", query.pk, " ".join(phases))


def _unseen(actor: Any, reads: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """The reads the actor may not even see (read_metadata), in the statement's order."""
    hidden = set(refused_reads(access.for_user(actor), reads, READ_METADATA))
    return [read for read in reads if ".".join(read) in hidden]


def check_reads(actor: Any, prepared: Any) -> None:
    """What Spark's analyzed plan reads, asked of the actor's grants (catalog.roles.may_read):
    a table or view it may not see fails the query exactly as one that is not there does
    (Spark's words, line and column); one it sees but may not read is a 403 naming it."""
    from refresh.spark.query import not_found

    hidden = _unseen(actor, prepared.reads)
    if hidden:
        access_events.query_refused(actor, prepared.reads, f"hidden: {'.'.join(hidden[0])}", 404)
        raise not_found(prepared, hidden[0])
    _may_read(actor, prepared.reads)


def _may_read(actor: Any, reads: list[tuple[str, ...]]) -> None:
    """may_read, its refusal recorded as an access event."""
    try:
        may_read(actor, reads)
    except Forbidden as error:
        access_events.query_refused(actor, reads, error.message, 403)
        raise


def _start(
    statement: st.Query, *, namespace: str | None, actor: Any, job: SparkJob | None, index: int
) -> Query:
    """The query's row, RUNNING: the one its web request wrote, or a new one (a query later
    in a script the worker runs)."""
    now = timezone.now()
    fields = {
        "state": Query.State.RUNNING,
        "started_at": now,
        "result_folder": secrets.token_hex(16),
        "expires_at": now + timedelta(hours=settings.QUERY_RESULT_KEEP_HOURS),
    }
    if job is not None:
        queued = Query.objects.filter(job=job, statement_index=index, state=Query.State.QUEUED)
        if queued.update(**fields):
            return Query.objects.get(job=job, statement_index=index)
    return _created(statement, job=job, index=index, namespace=namespace, actor=actor, **fields)


def _plain_read(
    statement: st.Query, *, namespace: str | None, actor: Any
) -> tuple[list[tuple[str, str]], Any, list[tuple[str, ...]]] | None:
    """A plain read of one table (refresh.core.plain_reads) answered by the in-process
    reader the previews use, without Spark: its columns (name, Spark type), rows (at most
    QUERY_RESULT_MAX_ROWS + 1, as Spark's fetch gives them) and reads (the table); None when
    the query is not one,
    or the reader cannot answer it exactly (more rows than it reads at once, equality
    deletes, an attached table, a name or a literal it reads otherwise than Spark)."""
    from catalog import previews
    from catalog import selectors as catalog_selectors
    from catalog.core import preview as core
    from catalog.models import Attachment

    if not settings.QUERY_PLAIN_READS or statement.kind != "SELECT":
        return None
    read = plain_reads.recognize(statement.sql)
    if read is None:
        return None
    named = _table_of(read.table, namespace)
    if named is None:
        return None
    try:
        table = catalog_selectors.get_table(*named)
    except CatalogError:
        return None  # a view, or nothing: Spark says which
    if Attachment.objects.filter(table=table).exists():
        return None  # its writer may have moved on: Spark's load follows it
    reads = [(*named[0].split("."), named[1])]
    if _unseen(actor, reads):
        return None  # Spark's analysis says it is not there, in Spark's words
    _may_read(actor, reads)
    if policies.applies(access.Principal(actor), table) is not None:
        return None  # Spark reads it through the reader's row filter and masks
    state = previews.load(table)
    snapshot = state.metadata.current_snapshot()
    size = snapshot.summary.get("total-files-size") if snapshot and snapshot.summary else None
    if read.condition is not None and not (size and int(size) <= PLAIN_READ_MAX_BYTES):
        return None  # a filter may scan every file: Spark reads in parallel, and stops
    schema = state.metadata.schema()
    types = {field.name: str(field.field_type) for field in schema.fields}
    names = list(read.columns) if read.columns is not None else list(types)
    kinds = [plain_reads.spark_type(types[name]) if name in types else None for name in names]
    if any(kind is None for kind in kinds):
        return None
    row_filter = None
    if read.condition is not None:
        row_filter = plain_reads.row_filter(read.condition, types)
        if row_filter is None:
            return None
    max_rows = settings.QUERY_RESULT_MAX_ROWS
    wanted = min(read.limit, max_rows) if read.limit is not None else max_rows
    limit = min(wanted, core.MAX_LIMIT)
    try:
        found = core.preview(
            state.metadata,
            state.metadata_location,
            io=state.io,
            table_path=table.location,
            columns=names,
            row_filter=row_filter,
            limit=limit,
        )
    except (CatalogError, core.NeedsSpark):
        return None
    if found.arrow is None or (found.truncated and limit < wanted):
        return None  # no snapshot, or more rows than one read gives: Spark reads them
    rows = found.arrow
    if read.limit is not None:
        rows = rows.slice(0, read.limit)  # the statement's own LIMIT is no cut
    return list(zip(names, kinds, strict=True)), results.plain_types(rows), reads


def _table_of(parts: tuple[str, ...], namespace: str | None) -> tuple[str, str] | None:
    """(namespace, name) of a table as Spark resolves the name in the console's namespace
    (the catalog's name may lead); None when it is not plainly one."""
    if len(parts) == 3 and parts[0] == settings.CATALOG_NAME:
        return parts[1], parts[2]
    if len(parts) == 2 and parts[0] != settings.CATALOG_NAME:
        return parts[0], parts[1]
    if len(parts) == 1 and namespace:
        return namespace, parts[0]
    return None


def _deadline(job: SparkJob | None) -> Any:
    """A watch that cancels the job's Spark jobs once the query has run
    QUERY_TIMEOUT_SECONDS (none without a job, or with a limit of 0)."""
    from catalog import jobs
    from catalog.watch import Watch

    if job is None or settings.QUERY_TIMEOUT_SECONDS <= 0:
        return None
    watch = Watch(
        f"query-deadline-{job.pk}",
        beat=lambda: None,
        cancel=lambda: jobs.cancel_spark(job),
        limit=float(settings.QUERY_TIMEOUT_SECONDS),
        what=f"a query of Spark job {job.pk}",
    )
    watch.start()
    return watch


def _failed(query: Query, error: Exception, *, job: SparkJob | None, deadline: Any) -> Exception:
    """Record why the query ended early; the error its job reports."""
    cancelled = job is not None and (
        SparkJob.objects.filter(pk=job.pk, cancel_requested_at__isnull=False).exists()
    )
    if cancelled:
        state, raised = Query.State.CANCELLED, error
        body = {"message": "Cancelled while running", "type": "Cancelled"}
    else:
        state, raised = Query.State.FAILED, error
        if deadline is not None and deadline.ended_by == "timeout":
            raised = StatementTimeout(
                f"The query ran longer than {settings.QUERY_TIMEOUT_SECONDS} s, the most a "
                "query may run (QUERY_TIMEOUT_SECONDS), and was stopped",
                field="sql",
            )
        body = _error_body(raised)
    Query.objects.filter(pk=query.pk).update(state=state, finished_at=timezone.now(), error=body)
    _delete_result(query.result_folder)
    Query.objects.filter(pk=query.pk).update(result_folder="", parts=[], row_count=0)
    query.refresh_from_db()
    _announce(query)
    raised.query = summary(query)  # type: ignore[attr-defined] - the console shows it
    return raised


def _error_body(error: Exception) -> dict[str, Any]:
    if isinstance(error, CatalogError):
        body: dict[str, Any] = {
            "message": error.message,
            "type": type(error).__name__,
            "status": http_status(error),
        }
        for key in ("line", "column"):
            if getattr(error, key, None) is not None:
                body[key] = getattr(error, key)
        return body
    message = str(error).strip().splitlines()[0][:1000] if str(error).strip() else ""
    return {"message": message or type(error).__name__, "type": type(error).__name__}


def _store(query: Query, table: Any, clock: dict[str, float]) -> None:
    """The result's parts, the first page first, each listed on the row once whole."""
    folder = _folder(query.result_folder)
    stored: list[int] = []
    for index, part in enumerate(results.split(table)):
        results.write_part(folder, index, part)
        stored.append(part.num_rows)
        Query.objects.filter(pk=query.pk).update(parts=list(stored), row_count=sum(stored))
        if "first_rows" not in clock:
            clock["first_rows"] = time.perf_counter()
            _announce(query)
    query.parts, query.row_count = stored, sum(stored)


def _folder(name: str) -> Path:
    if not _FOLDER.match(name or ""):
        raise ValueError(f"Not a result folder name: {name!r}")
    return Path(settings.QUERY_RESULTS_DIR) / name


def _delete_result(name: str) -> None:
    """Delete a result's folder: its own parts one by one, then the folder if empty."""
    if not _FOLDER.match(name or ""):
        return
    folder = Path(settings.QUERY_RESULTS_DIR) / name
    if not folder.is_dir():
        return
    for path in folder.iterdir():
        if path.name.startswith("part-") and path.suffix in (".parquet", ".tmp"):
            path.unlink(missing_ok=True)
    try:
        folder.rmdir()
    except OSError:  # something else is in it: left for an operator
        logger.warning("Result folder %s was not empty; left in place", folder)


# -- reads --------------------------------------------------------------------------------


def history_of(user: Any, *, limit: int = 20) -> list[Query]:
    """The user's own newest queries (a superuser's too: the console shows one's own)."""
    return list(
        Query.objects.select_related("job")
        .filter(requested_by_id=getattr(user, "pk", None) or 0)
        .order_by("-created_at", "-id")[:limit]
    )


def visible_to(user: Any) -> QuerySet[Query]:
    """The queries a user may see: their own (a superuser's: everyone's), newest first."""
    found = Query.objects.select_related("requested_by", "job")
    if getattr(user, "is_superuser", False):
        return found
    return found.filter(requested_by_id=getattr(user, "pk", None) or 0)


def get(query_id: Any, *, user: Any) -> Query:
    """A query the user may see, or NotFound (another user's query is not there)."""
    try:
        pk = int(str(query_id))
    except ValueError:
        pk = 0
    found = visible_to(user).filter(pk=pk).first() if 0 < pk < 2**63 else None
    if found is None:
        raise NotFound(f"Query does not exist: {query_id}", field="query_id")
    return found


def of_job(job: SparkJob, *, user: Any, query_id: Any = None) -> Query | None:
    """The job's query (`query_id`, else its first), if it has one the user may see."""
    found = visible_to(user).filter(job=job).order_by("statement_index", "id")
    if query_id not in (None, ""):
        return get(query_id, user=user) if found.filter(pk=_pk(query_id)).exists() else None
    return found.first()


def _pk(value: Any) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


def state_of(query: Query) -> tuple[str, dict[str, Any] | None]:
    """The query's state and error, as its job decides for a query the job ended before it
    finished (cancelled while waiting, its worker gone)."""
    job = query.job
    if query.state in Query.ACTIVE and (job is None or job.finished):
        if job is not None and job.state == SparkJob.State.CANCELLED:
            return Query.State.CANCELLED, job.error or {"message": "Cancelled"}
        if job is not None and job.state == SparkJob.State.SUCCEEDED:
            return Query.State.FAILED, {"message": "Not run: the script stopped before it"}
        return Query.State.FAILED, (job.error if job is not None else None) or {
            "message": "The job running the query ended before it"
        }
    return query.state, query.error


def may_still_read(query: Query, *, user: Any) -> None:
    """Forbidden unless `user` may read, now, everything the query read: a kept result
    shows its sources' rows, so reading it (a page of rows, a download) or running it again
    asks the same decision as the query did (`may_read`), on each request, and a revoked
    grant takes effect on the next one. A row whose reads were not recorded is read by
    superusers only."""
    if query.reads is None:
        if getattr(user, "is_superuser", False):
            return
        raise Forbidden(
            f"Query {query.pk} does not record what it read; run it again to read its result"
        )
    may_read(user, [tuple(read) for read in query.reads])
    since = query.started_at or query.created_at
    policies.check_unchanged(access.Principal(user), query.reads, since, f"query {query.pk}")


def kept(query: Query) -> bool:
    """Whether the query's result can still be read (stored, not pruned)."""
    return bool(query.result_folder) and bool(query.parts)


def page(query: Query, *, user: Any, offset: int, limit: int) -> dict[str, Any]:
    """Rows `offset`... of the kept result (at most `limit`, MAX_PAGE_ROWS), with what the
    query is doing: rows appear as soon as the first part is stored. Forbidden unless
    `user` may still read what the query read (`may_still_read`)."""
    if offset < 0 or limit < 1:
        raise InvalidInput("offset must be 0 or more and limit 1 or more", field="offset")
    limit = min(limit, MAX_PAGE_ROWS)
    state, error = state_of(query)
    rows: list[list[Any]] = []
    if kept(query):
        may_still_read(query, user=user)
        table = results.read_rows(_folder(query.result_folder), query.parts, offset, limit)
        rows = results.json_rows(table) if table is not None else []
    elif state == Query.State.SUCCEEDED:
        error = gone(query)
    return {
        "query": query.pk,
        "state": state,
        "kind": query.kind,
        "columns": query.columns,
        "offset": offset,
        "limit": limit,
        "rows": rows,
        "row_count": query.row_count,
        "complete": state not in Query.ACTIVE,
        "cut": query.cut or None,
        "cut_message": cut_message(query),
        "duration_seconds": query.duration_seconds,
        "error": error,
    }


def summary(query: Query) -> dict[str, Any]:
    """What a statement's result says of its query: where its rows and downloads are."""
    where = {"query_id": query.pk}
    return {
        "id": query.pk,
        "kind": query.kind,
        "state": query.state,
        "columns": query.columns,
        "row_count": query.row_count,
        "cut": query.cut or None,
        "cut_message": cut_message(query),
        "duration_seconds": query.duration_seconds,
        "job": query.job_id,
        "job_cancel_url": (
            reverse("api:job-cancel", kwargs={"job_id": query.job_id}) if query.job_id else None
        ),
        "url": reverse("api:query-detail", kwargs=where),
        "page_url": reverse("refresh:query", kwargs=where),
        "rows_url": reverse("api:query-rows", kwargs=where),
        "csv_url": reverse("api:query-download", kwargs={**where, "fmt": "csv"}),
        "parquet_url": reverse("api:query-download", kwargs={**where, "fmt": "parquet"}),
    }


def gone(query: Query) -> dict[str, str]:
    """Why a query that succeeded has no result to read any more (its error, of type
    "Gone"): its hours ran out, or (still within them) prune kept only its user's newest
    QUERY_RESULTS_PER_USER results, which is the one way a result goes early."""
    if query.expires_at is not None and query.expires_at > timezone.now():
        newest = settings.QUERY_RESULTS_PER_USER
        message = (
            f"The result is gone: only your newest {newest} result{'s' if newest != 1 else ''} "
            "are kept (QUERY_RESULTS_PER_USER), and newer ones took its place; run the query "
            "again"
        )
    else:
        message = (
            f"The result was kept until {query.expires_at:%Y-%m-%d %H:%M} UTC and is gone; "
            "run the query again"
        )
    return {"message": message, "type": "Gone"}


def cut_message(query: Query) -> str | None:
    if query.cut == results.CUT_ROWS:
        return f"Cut at {query.row_count:,} rows (QUERY_RESULT_MAX_ROWS): the query gives more"
    if query.cut == results.CUT_BYTES:
        return (
            f"Cut at {query.row_count:,} rows, {settings.QUERY_RESULT_MAX_BYTES:,} bytes "
            "(QUERY_RESULT_MAX_BYTES): the query gives more"
        )
    return None


def download(query: Query, *, user: Any, fmt: str) -> tuple[Iterator[bytes], str, str]:
    """The kept result as a stream of bytes, its content type and file name; Forbidden
    unless `user` may still read what the query read."""
    state, _ = state_of(query)
    if state != Query.State.SUCCEEDED:
        raise InvalidInput(f"Query {query.pk} is {state}: only a finished result downloads")
    if not kept(query):
        raise NotFound(
            f"The result of query {query.pk} is no longer kept; run the query again",
            field="query_id",
        )
    may_still_read(query, user=user)
    folder = _folder(query.result_folder)
    name = f"query-{query.pk}"
    if fmt == "csv":
        return results.csv_chunks(folder, query.parts), "text/csv; charset=utf-8", f"{name}.csv"
    if fmt == "parquet":
        chunks = results.parquet_chunks(folder, query.parts)
        return chunks, "application/vnd.apache.parquet", f"{name}.parquet"
    raise InvalidInput("format must be csv or parquet", field="format")


# -- housekeeping (celery-beat) -----------------------------------------------------------


def prune() -> int:
    """Delete expired results, results beyond each user's newest QUERY_RESULTS_PER_USER,
    result folders no row names, and history older than QUERY_HISTORY_KEEP_DAYS; settle
    queries whose job ended before them. How many results and rows it removed."""
    now = timezone.now()
    removed = 0
    for query in Query.objects.filter(expires_at__lt=now).exclude(result_folder=""):
        removed += _forget_result(query)
    for user_id in (
        Query.objects.exclude(result_folder="").values_list("requested_by_id", flat=True).distinct()
    ):
        removed += _keep_newest_results(user_id)
    removed += _delete_orphans()
    old = now - timedelta(days=settings.QUERY_HISTORY_KEEP_DAYS)
    for query in Query.objects.filter(created_at__lt=old).exclude(state__in=Query.ACTIVE):
        _forget_result(query)
        query.delete()
        removed += 1
    stale = Query.objects.filter(state__in=Query.ACTIVE).filter(
        Q(job__isnull=True) | Q(job__state__in=SparkJob.FINISHED)
    )
    for query in stale.select_related("job"):
        state, error = state_of(query)
        Query.objects.filter(pk=query.pk, state__in=Query.ACTIVE).update(
            state=state, error=error, finished_at=now
        )
        _forget_result(query)
    return removed


def _keep_newest_results(user_id: int) -> int:
    kept_ids = list(
        Query.objects.filter(requested_by_id=user_id)
        .exclude(result_folder="")
        .order_by("-created_at", "-id")
        .values_list("pk", flat=True)[: settings.QUERY_RESULTS_PER_USER]
    )
    older = (
        Query.objects.filter(requested_by_id=user_id, state=Query.State.SUCCEEDED)
        .exclude(result_folder="")
        .exclude(pk__in=kept_ids)
    )
    return sum(_forget_result(query) for query in older)


def _forget_result(query: Query) -> int:
    if not query.result_folder:
        return 0
    _delete_result(query.result_folder)
    Query.objects.filter(pk=query.pk).update(result_folder="")
    return 1


def _delete_orphans() -> int:
    root = Path(settings.QUERY_RESULTS_DIR)
    if not root.is_dir():
        return 0
    named = set(Query.objects.exclude(result_folder="").values_list("result_folder", flat=True))
    removed = 0
    for folder in root.iterdir():
        if not _FOLDER.match(folder.name) or folder.name in named or not folder.is_dir():
            continue
        if time.time() - folder.stat().st_mtime < ORPHAN_AFTER_SECONDS:
            continue  # a result being written whose row is not committed yet
        _delete_result(folder.name)
        removed += 1
    return removed

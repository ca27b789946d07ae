"""Spark-backed operations as jobs: no web request waits on Spark.

An operation that needs Spark (deriving a new materialized table's schema, ALTER ... AS, a
console data change, a view's preview, a table preview that meets equality deletes, a
view's column types) is first attempted in the request: everything before Spark (parsing,
names, options) runs there and fails there with its 4xx. When it reaches Spark it raises
`NeedsWorker` (catalog.core.errors) before writing anything, and `attempt` makes it a
`SparkJob` instead: the request answers 202 with the job, a worker runs the same operation
with its Spark (`run`, inside the `Executor` the refresh app registers), and the job's
page and API URL show its state and its result, which is the answer the request would
have given. The operation of a kind is KINDS' (the `kind` decorator's, run by
catalog.tasks.run_spark_job), or the one its app's own task imports and hands `run` (the
console's: refresh.tasks.run_console_job runs refresh.console.run_job).

- **Fail fast.** With no worker alive (catalog.workers), the answer is an immediate 503.
- **Bounded.** At most `JOBS_PER_USER` jobs waiting or running per user and
  `JOBS_QUEUED_MAX` waiting in all; beyond, 429 with Retry-After.
- **Never behind a refresh.** A worker keeps `WORKER_INTERACTIVE_THREADS` of its threads
  for jobs: refresh runs take the others (refresh.runner).
- **Cancel.** A waiting job is cancelled at once; a running one has its Spark jobs
  cancelled (a Spark job group per job) between heartbeats.
- **History.** Jobs are rows (who asked what, when, with what result), kept
  `JOBS_KEEP_DAYS` days; a job whose worker went silent is failed with the reason.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from django.db.models import Max, Q
from django.utils import timezone

from catalog import access, job_news, workers
from catalog.core.access import CREATE, MANAGE, READ_DATA
from catalog.core.errors import (
    CatalogError,
    CommitConflict,
    NeedsWorker,
    TooManyJobs,
    Unavailable,
    http_status,
)
from catalog.models import CatalogObject, GrantChange, SparkJob
from catalog.roles import EDITOR, VIEWER, refused_reads
from catalog.watch import Watch, warehouse_floor
from infra import broker, runs

logger = logging.getLogger(__name__)

#: operation(arguments, actor, job) -> (HTTP status, JSON body). `job` is None when the
#: operation is attempted in the request; a long one reports progress through it.
Operation = Callable[[dict[str, Any], Any, "SparkJob | None"], tuple[int, dict[str, Any]]]
#: kind -> the operation `RUN_TASK` runs for it (the `kind` decorator's). A kind whose app
#: runs its jobs with a task of its own (the console's: refresh.tasks.run_console_job)
#: is only declared (`declare`): that task hands `run` the operation, imported.
KINDS: dict[str, Operation] = {}
#: The task that runs the jobs of the kinds in KINDS (catalog.tasks.run_spark_job).
RUN_TASK = "catalog.run_spark_job"
#: kind -> the URL name of the page of the object it makes or changes (its `namespace` and
#: `name` arguments fill it in): where a job's page goes once the job succeeded.
DONE_PAGES: dict[str, str] = {}


#: kind -> the role its requester must still hold when a worker runs it (roles.EDITOR or
#: roles.VIEWER): a job may wait minutes for a worker, and a user demoted, deactivated or
#: deleted meanwhile must not have a change made for them.
ROLES: dict[str, str] = {}


#: Kinds whose answer is a script's printed output (the console's): what each statement
#: showed was checked against the grants when it ran, statement by statement, so a revoke
#: since then withholds the whole answer (`withheld`).
SCRIPTS: set[str] = set()


def kind(
    name: str, *, done_page: str | None = None, role: str = EDITOR, script: bool = False
) -> Callable[[Operation], Operation]:
    def register(operation: Operation) -> Operation:
        KINDS[name] = operation
        declare(name, done_page=done_page, role=role, script=script)
        return operation

    return register


def declare(
    name: str, *, done_page: str | None = None, role: str = EDITOR, script: bool = False
) -> None:
    """A kind's rules (its role, done page, whether its answer is a script's), for a kind
    whose jobs a task of its app's own runs (`submit(..., task=...)`, `run(operation=...)`)."""
    ROLES[name] = role
    if done_page:
        DONE_PAGES[name] = done_page
    if script:
        SCRIPTS.add(name)


def _role_lost(job: SparkJob) -> str | None:
    """Why the job's requester may no longer have it run (None: they may)."""
    role = ROLES.get(job.kind, EDITOR)
    if job.requested_by is not None and _still_may(
        access.Principal(job.requested_by), role, job.arguments or {}
    ):
        return None
    who = job.requested_by.get_username() if job.requested_by else "a deleted user"
    return f"Not run: {who} no longer has the {role} role this job needs"


def _still_may(who: access.Principal, role: str, arguments: dict[str, Any]) -> bool:
    """Whether the requester still holds what the job needs on the object its arguments
    name (catalog.access): read_data for a viewer's kind (a preview), manage for an
    editor's, create in the namespace for an object still to be made. A kind that names no
    object (a console script, whose statements each check their own) needs a grant
    somewhere, or manage on the catalog for an editor's."""
    namespace, name = arguments.get("namespace"), arguments.get("name")
    if not isinstance(namespace, str) or not isinstance(name, str):
        if role == VIEWER:
            return who.holds_anything()
        return access.may(who, MANAGE, access.CATALOG)
    found = (
        CatalogObject.objects.select_related("namespace")
        .filter(namespace__name=namespace, name=name)
        .first()
    )
    if found is None:
        if role == VIEWER:
            return who.sees_namespace(namespace)
        return access.may(who, CREATE, access.namespace(namespace))
    return access.may(who, READ_DATA if role == VIEWER else MANAGE, access.of_object(found))


def withheld(found: Iterable[SparkJob], user: Any) -> dict[int, str]:
    """Why `user` may not see each finished job's answer now, by job id (a job not listed
    shows its answer). A job's answer shows the object its arguments name (a preview's
    rows, a view's or materialized table's detail, a verification's sample rows), so it is
    shown only while the user may still read that object (read_data; an object no longer
    there, by its namespace's grants), asked each time it is shown: a revoke takes effect
    on the next request. One query for all the jobs' objects (none for a reader of the
    whole catalog). A query's rows are refresh.queries' own (`may_still_read`)."""
    found = list(found)
    named: dict[int, tuple[str, ...]] = {}
    for job in found:
        arguments = job.arguments or {}
        namespace, name = arguments.get("namespace"), arguments.get("name")
        if job.result is not None and isinstance(namespace, str) and isinstance(name, str):
            named[job.pk] = (*namespace.split("."), name)
    reasons = _scripts_withheld([job for job in found if job.kind in SCRIPTS], user)
    if not named:
        return reasons
    refused = set(refused_reads(access.for_user(user), named.values()))
    reasons.update(
        (pk, f"Reading {'.'.join(parts)} needs the read_data privilege")
        for pk, parts in named.items()
        if ".".join(parts) in refused
    )
    return reasons


def _scripts_withheld(scripts: list[SparkJob], user: Any) -> dict[int, str]:
    """A console script's answer (what SHOW CREATE, SHOW GRANTS, DESCRIBE... printed) is
    withheld once a privilege of the user's, or of one of their groups, was revoked, or an
    object of theirs given to another owner, after the script was sent: what it printed
    was allowed by grants that may be gone. One query, on the grants' own record
    (GrantChange); a query's rows are still asked table by table (refresh.queries)."""
    scripts = [job for job in scripts if job.result is not None]
    who = access.for_user(user)
    if not scripts or (who.superuser and not who.narrowed_superuser()):
        return {}
    name = user.get_username()
    groups = Group.objects.filter(user=user).values("name")
    principal = Q(principal_type="user", principal_name=name) | Q(
        principal_type="group", principal_name__in=groups
    )
    last = (
        GrantChange.objects.filter(occurred_at__gt=min(job.queued_at for job in scripts))
        .filter(
            Q(principal, action=GrantChange.Action.REVOKE)
            | Q(action=GrantChange.Action.TRANSFER, previous_owner=name)
        )
        .aggregate(last=Max("occurred_at"))["last"]
    )
    if last is None:
        return {}
    return {
        job.pk: "Withheld: a privilege of yours was revoked after this script ran; run it "
        "again to see what it shows now"
        for job in scripts
        if job.queued_at < last
    }


# -- where Spark runs --------------------------------------------------------------------


@contextlib.contextmanager
def _no_spark(group: str, description: str) -> Iterator[None]:
    yield


def _cancel_nothing(group: str) -> None:
    return None


@dataclass(frozen=True)
class Executor:
    """Where a worker runs jobs. `running(group, description)` is entered around every job
    (its Spark jobs tagged with `group`, so that `cancel(group)` can stop them; a Spark
    refusal inside comes out as a CatalogError). The refresh app, which owns the workers'
    Spark session, registers one (refresh.apps); without it, a job that needs Spark fails
    with NeedsWorker."""

    running: Callable[[str, str], contextlib.AbstractContextManager[None]] = _no_spark
    cancel: Callable[[str], None] = _cancel_nothing


_executor = Executor()


def use_executor(executor: Executor) -> None:
    global _executor
    _executor = executor


@dataclass(frozen=True)
class Outcome:
    """What a request answers: the operation's own answer, or the job that will give it."""

    status: int | None = None
    body: dict[str, Any] | None = None
    job: SparkJob | None = None


def error_body(error: CatalogError) -> dict[str, Any]:
    body: dict[str, Any] = {
        "message": error.message,
        "type": type(error).__name__,
        "status": http_status(error),
    }
    if error.field:
        body["field"] = error.field
    if getattr(error, "line", None) is not None:
        body["line"] = error.line
        body["column"] = getattr(error, "column", None)
    return body


# -- the request side --------------------------------------------------------------------


#: Operations that always reach Spark: a request for one is admitted (a worker alive, the
#: bounds) before any of its work, so that a flood is refused as cheaply as it can be.
ALWAYS_SPARK = frozenset(
    {
        "preview_view",
        "create_materialized_table",
        "alter_query",
        "rollback_definition",
        "verify_materialized_table",
    }
)


def attempt(
    kind_name: str,
    arguments: dict[str, Any],
    *,
    actor: Any,
    summary: str,
    reuse: bool = False,
) -> Outcome:
    """Run the operation here if it needs no Spark; otherwise the job that runs it (see
    `job_for`)."""
    key = _key(kind_name, arguments, actor) if reuse else ""
    if key:
        known = _reusable(key)
        if known is not None:
            return Outcome(job=known)
    with (
        admitted(actor, summary=summary) if kind_name in ALWAYS_SPARK else contextlib.nullcontext()
    ):
        try:
            status, body = KINDS[kind_name](arguments, actor, None)
        except NeedsWorker:
            # Reuse was looked for above: two same requests racing each get a job, both
            # within the user's bound (`submit`).
            job = submit(kind_name, arguments, actor=actor, summary=summary, key=key)
            return Outcome(job=job)
    return Outcome(status=status, body=body)


def job_for(
    kind_name: str,
    arguments: dict[str, Any],
    *,
    actor: Any,
    summary: str,
    reuse: bool = False,
) -> SparkJob:
    """A new job for the operation; with `reuse`, the same user's job of the same kind and
    arguments instead, while it runs or for `JOBS_REUSE_SECONDS` after it was asked for
    (a preview asked again, a page that fills in its result, get the same answer)."""
    key = _key(kind_name, arguments, actor) if reuse else ""
    if key:
        known = _reusable(key)
        if known is not None:
            return known
    return submit(kind_name, arguments, actor=actor, summary=summary, key=key)


def _key(kind_name: str, arguments: dict[str, Any], actor: Any) -> str:
    text = json.dumps([kind_name, arguments, getattr(actor, "pk", None)], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _reusable(key: str) -> SparkJob | None:
    """The newest of the key's jobs waiting or running, else the newest asked for within
    `JOBS_REUSE_SECONDS`: one query (a key has a few jobs at most, as each request within
    the time reuses the last)."""
    fresh = timezone.now() - timedelta(seconds=settings.JOBS_REUSE_SECONDS)
    found = list(
        SparkJob.objects.filter(key=key)
        .exclude(state=SparkJob.State.CANCELLED)
        .filter(Q(state__in=SparkJob.ACTIVE) | Q(queued_at__gte=fresh))
        .order_by("-queued_at")[:8]
    )
    return next((job for job in found if job.state in SparkJob.ACTIVE), None) or (
        found[0] if found else None
    )


@contextlib.contextmanager
def admitted(actor: Any, *, summary: str) -> Iterator[None]:
    """`admit`, counting as the user's jobs their requests admitted before and still on
    their way to `submit` (in Redis, each for at most `_ADMITTING_SECONDS`). Under a burst,
    every request's first look comes before any of them has inserted its job: without this,
    all of them passed it, each did its whole work (parsing, names, a CREATE's sources), and
    all but the first few were refused only then, queued one by one on the user's lock in
    `submit`. Counting the ones on their way errs only towards refusing (one that fails
    before `submit` was counted); `submit`'s look stays exact."""
    _worker_alive(summary)  # before anything is noted: with no worker, a 503 and no more
    user_id = getattr(actor, "pk", None)
    key, member = f"{settings.WORKERS_KEY}:admitting:{user_id}", uuid.uuid4().hex
    client, on_their_way = None, 0
    if user_id is not None:
        try:
            client = workers.redis_client()
            now = time.time()
            pipe = client.pipeline()
            pipe.zremrangebyscore(key, "-inf", now - _ADMITTING_SECONDS)
            pipe.zadd(key, {member: now})
            pipe.expire(key, _ADMITTING_SECONDS)
            pipe.zcard(key)
            on_their_way = pipe.execute()[-1] - 1
        except Exception:  # noqa: BLE001 - Redis down: the jobs alone (submit's look is exact)
            client, on_their_way = None, 0
    try:
        _within_bounds(actor, on_their_way=on_their_way)
        yield
    finally:
        if client is not None:
            with contextlib.suppress(Exception):
                client.zrem(key, member)


#: How long a request admitted by `admitted` counts as on its way to `submit` at most (a
#: web process killed mid-request leaves its entry; it stops counting after this).
_ADMITTING_SECONDS = 60


def admit(actor: Any, *, summary: str) -> None:
    """Unavailable (503) when no worker is alive, TooManyJobs (429) past the bounds; a
    first look without a lock (`submit` looks again, exactly, before it inserts)."""
    _worker_alive(summary)
    _within_bounds(actor)


def _worker_alive(summary: str) -> None:
    if not workers.alive():
        raise Unavailable(
            f"No refresh worker is running, so this cannot be done now ({summary}): it needs "
            "a worker's Spark. Start a worker (`make run` starts one) and try again."
        )


def _within_bounds(actor: Any, *, on_their_way: int = 0) -> None:
    """TooManyJobs past the user's bound (their active jobs, and `on_their_way` requests of
    theirs about to make one) or the workers' queue."""
    user = actor if getattr(actor, "pk", None) else None
    if user is not None:
        mine = SparkJob.objects.filter(requested_by=user, state__in=SparkJob.ACTIVE).count()
        counted = mine + on_their_way
        if counted >= settings.JOBS_PER_USER:
            what = "waiting, running or being asked for" if on_their_way else "waiting or running"
            raise TooManyJobs(
                f"You have {counted} Spark jobs {what}, the most one user may have "
                f"({settings.JOBS_PER_USER}); wait for one to finish or cancel one "
                "(/api/jobs/)",
                retry_after=settings.JOBS_RETRY_AFTER_SECONDS,
            )
    waiting = SparkJob.objects.filter(state=SparkJob.State.QUEUED).count()
    if waiting >= settings.JOBS_QUEUED_MAX:
        raise TooManyJobs(
            f"The workers have {waiting} Spark jobs waiting, as many as they queue "
            f"({settings.JOBS_QUEUED_MAX}); try again shortly",
            retry_after=settings.JOBS_RETRY_AFTER_SECONDS,
        )


def submit(
    kind_name: str,
    arguments: dict[str, Any],
    *,
    actor: Any,
    summary: str,
    key: str = "",
    bound: Callable[[Any], None] | None = None,
    recorded: Callable[[SparkJob], None] | None = None,
    task: str = RUN_TASK,
) -> SparkJob:
    """A QUEUED job, sent to the workers as `task` (the one that runs its kind); Unavailable
    (503) when no worker is alive, TooManyJobs (429) past the bounds. `bound(user)` is a
    bound of the caller's own (a user's queries at a time), checked with the others while
    the user's submissions wait their turn, so that its count is exact too; `recorded(job)`
    writes the caller's own rows about the job in the job's transaction, before any worker
    may take it."""
    if kind_name not in ROLES:
        raise ValueError(f"Unknown job kind {kind_name!r}")
    user = actor if getattr(actor, "pk", None) else None
    with transaction.atomic():
        if user is not None:
            # One submitter at a time per user: the count `admit` makes is then exact.
            get_user_model().objects.select_for_update().filter(pk=user.pk).first()
        admit(user, summary=summary)
        if bound is not None:
            bound(user)
        job = SparkJob.objects.create(
            kind=kind_name,
            arguments=arguments,
            summary=summary[:500],
            key=key,
            requested_by=user,
        )
        if recorded is not None:
            recorded(job)
    try:  # by name: the task (catalog.tasks, or the kind's app's) sits above this module
        broker.send_task(task, args=[job.pk])
    except Exception as error:  # the broker is down: the job says why it never ran
        _finish(job, SparkJob.State.FAILED, status=503, error={"message": str(error)})
        raise Unavailable(f"The task queue cannot be reached: {error}") from error
    return job


def cancel(job: SparkJob, *, actor: Any = None) -> SparkJob:
    """A waiting job is cancelled now; a running one when its worker next looks (its Spark
    jobs are cancelled). A finished one is a 409."""
    with transaction.atomic():
        job = SparkJob.objects.select_for_update().get(pk=job.pk)
        if job.finished:
            raise CommitConflict(f"Job {job.pk} has finished ({job.state}); nothing to cancel")
        if job.state == SparkJob.State.QUEUED:
            _finish(job, SparkJob.State.CANCELLED, error={"message": "Cancelled before it ran"})
        else:
            runs.request_cancel(SparkJob, pk=job.pk, by=actor)
    job.refresh_from_db()
    return job


# -- the worker side ---------------------------------------------------------------------


def claim(job_id: int) -> SparkJob | None:
    if not runs.claim(SparkJob, pk=job_id, worker=workers.name()):
        return None
    return SparkJob.objects.select_related("requested_by").get(pk=job_id)


def progress(job: SparkJob | None, body: dict[str, Any]) -> None:
    """A running job's partial answer (a console script's statements so far)."""
    if job is not None:
        SparkJob.objects.filter(pk=job.pk, state=SparkJob.State.RUNNING).update(result=body)


def run(
    job_id: int, *, hops: int = 0, operation: Operation | None = None, task: str = RUN_TASK
) -> str:
    """Claim the job and run its operation with this worker's Spark; or, when this worker
    is busy and another idle, put it back on the queue for that one (catalog.workers), as
    `task`, the task running this. `operation`: what the job's kind does, handed by its
    app's own task (None: KINDS' entry for its kind)."""
    if workers.hand_over(hops) and _hand_on(job_id, hops + 1, task):
        return "handed to an idle worker"
    with workers.occupied():  # from the claim on: a job arriving meanwhile goes elsewhere
        job = claim(job_id)
        if job is None:
            return "not claimed"
        return _run(job, operation)


def _hand_on(job_id: int, hops: int, task: str) -> bool:
    return runs.hand_on(
        SparkJob,
        pk=job_id,
        send=lambda: broker.send_task(task, args=[job_id], kwargs={"hops": hops}),
        what=f"Spark job {job_id}",
    )


def _run(job: SparkJob, operation: Operation | None = None) -> str:
    lost = _role_lost(job)
    if lost is not None:
        _finish(
            job, SparkJob.State.FAILED, status=403, error={"message": lost, "type": "Forbidden"}
        )
        return SparkJob.State.FAILED
    operation = operation or KINDS.get(job.kind)
    if operation is None:
        # A kind whose owner runs it through a task of its own (the console's) reached the
        # generic task: a message queued before an upgrade. Said, not a KeyError.
        message = f"A {job.kind} job cannot run through this task (queued before an upgrade?)"
        _finish(job, SparkJob.State.FAILED, status=409,
                error={"message": f"{message}; run it again", "type": "Conflict"})  # fmt: skip
        return SparkJob.State.FAILED
    group = spark_group(job)
    watch = Watch(
        f"job-{job.pk}",
        beat=lambda: runs.beat(SparkJob, pk=job.pk),
        asked=lambda: runs.cancel_asked(SparkJob, pk=job.pk),
        cancel=lambda: _executor.cancel(group),
        limit=float(settings.JOBS_TIMEOUT_SECONDS) or None,
        room=warehouse_floor,
        what=f"Spark job {job.pk}",
    )
    watch.start()
    try:
        with _executor.running(group, job.summary or group):
            status, body = operation(job.arguments, job.requested_by, job)
    except CatalogError as error:
        _end(job, watch, SparkJob.State.FAILED, status=http_status(error), error=error_body(error))
    except Exception as error:  # noqa: BLE001 - recorded on the job, shown to its user
        message = str(error).strip().splitlines()[0][:1000] if str(error).strip() else ""
        _end(
            job,
            watch,
            SparkJob.State.FAILED,
            status=500,
            error={"message": message or type(error).__name__, "type": type(error).__name__},
        )
    else:
        if status >= 400:  # a console script whose statement failed: its answer says which
            _end(job, watch, SparkJob.State.FAILED, status=status, result=body,
                 error=body.get("error"))  # fmt: skip
        else:
            _end(job, watch, SparkJob.State.SUCCEEDED, status=status, result=body)
    return SparkJob.objects.values_list("state", flat=True).get(pk=job.pk)


def spark_group(job: SparkJob) -> str:
    """The Spark job group a job's Spark work runs in."""
    return f"lakeview-job-{job.pk}"


def cancel_spark(job: SparkJob) -> None:
    """Cancel the Spark jobs the job runs now (a statement of it past its own time limit);
    a Spark job the group starts later runs, so a caller that means to stop asks again."""
    _executor.cancel(spark_group(job))


def _end(job: SparkJob, watch: Watch, state: str, **fields: Any) -> None:
    watch.stop()
    if state == SparkJob.State.FAILED and watch.ended_by == "cancel":
        state, fields["error"] = SparkJob.State.CANCELLED, {"message": "Cancelled while running"}
    elif state == SparkJob.State.FAILED and watch.ended_by == "timeout":
        fields["status"] = 504
        fields["error"] = {
            "message": f"Timed out: stopped after {watch.limit:.0f} s, the longest a Spark "
            "job may run (JOBS_TIMEOUT_SECONDS)",
            "type": "Timeout",
        }
    elif state == SparkJob.State.FAILED and watch.ended_by == "disk":
        fields["status"] = 507
        fields["error"] = {
            "message": f"Stopped: {watch.why}; Spark aborted its write",
            "type": "InsufficientStorage",
        }
    _finish(job, state, **fields)


def _finish(job: SparkJob, state: str, **fields: Any) -> None:
    runs.finish(SparkJob, pk=job.pk, state=state, **fields)
    job_news.announce(job.pk)


# -- housekeeping (celery-beat) ----------------------------------------------------------


def fail_abandoned() -> int:
    """Fail running jobs whose worker went silent, and waiting jobs no worker took in
    `JOBS_QUEUED_TIMEOUT_SECONDS`."""
    now = timezone.now()
    silent = timedelta(seconds=settings.MT_ABANDONED_AFTER_SECONDS)
    count = 0
    for job in runs.abandoned(SparkJob, silent_for=silent, now=now):
        _finish(
            job,
            SparkJob.State.FAILED,
            status=503,
            error={
                "message": f"The worker {job.worker or '?'} stopped while running the job "
                f"(no heartbeat since {job.heartbeat_at:%Y-%m-%d %H:%M:%S} UTC)",
                "type": "Unavailable",
            },
        )
        count += 1
    waited = now - timedelta(seconds=settings.JOBS_QUEUED_TIMEOUT_SECONDS)
    for job in SparkJob.objects.filter(state=SparkJob.State.QUEUED, queued_at__lt=waited):
        _finish(
            job,
            SparkJob.State.FAILED,
            status=503,
            error={
                "message": "No worker took the job in "
                f"{settings.JOBS_QUEUED_TIMEOUT_SECONDS} seconds",
                "type": "Unavailable",
            },
        )
        count += 1
    return count


def prune() -> int:
    """Forget finished jobs older than `JOBS_KEEP_DAYS` (previews make many)."""
    before = timezone.now() - timedelta(days=settings.JOBS_KEEP_DAYS)
    deleted, _ = SparkJob.objects.filter(queued_at__lt=before, state__in=SparkJob.FINISHED).delete()
    return deleted

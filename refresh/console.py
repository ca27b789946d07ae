"""Runs a script of materialized-table statements: the SQL console page and
`POST /api/statements/` both call `execute`, which calls the same services as the forms.

Statements run in order; the first error stops the script (what ran before it stays done)
and is reported at its line and column in the script. Names are `[catalog.][namespace.]name`;
an unqualified name resolves in the console's namespace. Each statement asks catalog.access
about what it touches (refresh.checks): a query read_data on every table and view Spark's
analyzed plan reads (refresh.queries), SHOW and DESCRIBE read_metadata, CREATE `create` in
the namespace (and read_data on every source), UPDATE / DELETE / MERGE write_data on the
target, ALTER, DROP, SUSPEND, RESUME and REFRESH manage on the table; what one may not see
answers as missing. GRANT, REVOKE and SHOW GRANTS ask only what catalog.services.grants
asks (refresh.console_grants); row filters and masks (ALTER TABLE ... SET ROW FILTER / SET
MASK, their DROPs) what catalog.services.policies asks, SHOW POLICIES read_metadata on the
table (refresh.console_policies).

The request never waits for Spark: `run` executes statements until one needs a worker's
Spark (CREATE, ALTER ... AS, UPDATE / DELETE / MERGE, a query), and hands it and the rest
of the script to a job (kind "statements", or "query" when a query is among them) that a
worker runs with the same `execute`, its results growing on the job as each statement
finishes. A query keeps its rows apart (refresh.queries): its result says where to read
them.

The request reads its script once (`Script`: tokenized once, each statement parsed at
most once), and its path can be followed by imports, registry-free:
refresh.api.views.StatementsView -> `run` -> `execute` (a query: refresh.queries.run,
NeedsWorker) -> catalog.jobs.submit(..., task=TASK); on a worker, the task
refresh.tasks.run_console_job -> catalog.jobs.run(..., operation=run_job) -> `run_job` ->
`execute` -> refresh.queries.run -> refresh.analysis -> refresh.spark.query. catalog.jobs
keeps the generic machinery (admission, claim, watch, record) and knows nothing of the
console but its kinds' rules (`jobs.declare` below)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from django.conf import settings

from catalog import access, jobs, policies
from catalog.core.access import MANAGE, READ_METADATA
from catalog.core.errors import (
    CatalogError,
    InvalidInput,
    NeedsWorker,
    SqlError,
    http_status,
)
from catalog.roles import VIEWER
from refresh import (
    checks,
    console_grants,
    console_policies,
    definitions,
    pipelines,
    queries,
    rights,
    runs,
    selectors,
    services,
    table_state,
)
from refresh.core import grant_statements
from refresh.core import policy_statements as ps
from refresh.core import statements as st
from refresh.models import MaterializedTable, RefreshRun

#: Statements one script may hold.
MAX_STATEMENTS = 100

#: The task a worker runs a console job with (refresh.tasks.run_console_job).
TASK = "refresh.run_console_job"
#: A console job's kind: "query" when a query is among the statements its worker runs
#: (refresh.queries bounds how many a user runs at a time), else "statements". Each
#: statement checks its own role, so a viewer's suffices; the answer is a script's, withheld
#: after a revoke (catalog.jobs.withheld).
STATEMENTS_KIND = "statements"
jobs.declare(queries.JOB_KIND, role=VIEWER, script=True)
jobs.declare(STATEMENTS_KIND, role=VIEWER, script=True)


@dataclass
class StatementResult:
    """One statement's outcome, as the page shows it and the API returns it."""

    statement: str
    line: int
    column: int
    kind: str = ""
    ok: bool = True
    message: str = ""
    #: "ns.name" of the materialized table the statement was about, for links.
    table: str | None = None
    run_id: int | None = None
    #: The Spark job (catalog.jobs) that runs this statement and the rest of the
    #: script, when the statement needed a worker.
    spark_job: int | None = None
    columns: list[str] = field(default_factory=list)
    rows: list[list[Any]] = field(default_factory=list)
    error: dict[str, Any] | None = None
    #: What the statement does or would do (refresh.pipelines.Plan): create, alter with
    #: the changes, nothing, refused...; set by a dry run and by CREATE [OR ALTER].
    plan: dict[str, Any] | None = None
    #: A query's kept result (refresh.queries.summary): its id, kind, columns, rows kept,
    #: whether it was cut, and the URLs of its rows and downloads.
    query: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class Script:
    """A script read once (st.read_script: tokenized once), each statement parsed on first
    use and kept, error and all: a web request asks which statement needs Spark, then runs
    them, and parses none twice. `sql` is the text, kept for what needs it (a job's
    arguments, a worker reading the script again in its own process)."""

    def __init__(self, sql: str) -> None:
        self.sql = sql
        self.error: SqlError | None = None
        try:
            self.parts = st.read_script(sql)
        except SqlError as error:
            self.parts, self.error = [], error
        self._parsed: dict[int, st.Statement | CatalogError] = {}

    def statement(self, index: int) -> st.Statement:
        """The `index`-th statement parsed (its CatalogError raised, every time asked)."""
        if index not in self._parsed:
            try:
                self._parsed[index] = self.parts[index].parse(threshold=table_state.threshold())
            except CatalogError as error:
                self._parsed[index] = error
        found = self._parsed[index]
        if isinstance(found, CatalogError):
            raise found
        return found


def execute(
    sql: str | Script,
    *,
    namespace: str | None = None,
    actor: Any = None,
    start: int = 0,
    progress: Callable[[StatementResult], None] | None = None,
    defer: Callable[[int, st.Statement], Any] | None = None,
    job: Any = None,
) -> list[StatementResult]:
    """Every statement of `sql` (its text, or the Script a caller read it into) from the
    `start`-th (0-based) in order, stopping at the first error; `progress` hears of each
    result as it comes.

    A statement that needs a worker's Spark (a CREATE's or ALTER ... AS's schema, a data
    change, a query), met where none runs, is handed with the rest of the script to
    `defer(index, statement)`, which makes them a job (catalog.jobs) and returns it: the
    statement's result then says which job runs it, and the script stops here. Without
    `defer`, NeedsWorker propagates. `job`: the Spark job running the script on a worker
    (a query's time limit cancels its Spark jobs)."""
    text = sql.sql if isinstance(sql, Script) else sql
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput("Write at least one statement", field="sql")
    script = sql if isinstance(sql, Script) else Script(text)
    results: list[StatementResult] = []
    if script.error is not None:
        return [failed(text.strip()[:200], 1, 1, script.error)]
    if not script.parts:
        raise InvalidInput("Write at least one statement", field="sql")
    if len(script.parts) > MAX_STATEMENTS:
        raise InvalidInput(
            f"A script runs at most {MAX_STATEMENTS} statements; this one has {len(script.parts)}",
            field="sql",
        )
    for index, part in enumerate(script.parts):
        if index < start:
            continue
        text = part.text
        line, column = part.position()
        try:
            statement = script.statement(index)
            check_viewer(actor, statement)
            try:
                if isinstance(statement, st.Query):
                    result = _query(statement, namespace, actor, job, index)
                else:
                    result = _run(statement, part.padded, namespace=namespace, actor=actor)
            except NeedsWorker:
                if defer is None:
                    raise
                deferred = defer(index, statement)
                result = StatementResult(
                    "", 0, 0, kind=type(statement).__name__, spark_job=deferred.pk,
                    message=f"Running on a refresh worker's Spark as job {deferred.pk}",
                )  # fmt: skip
                if isinstance(statement, st.Query):
                    result.query = queries.summary(queries.of_job(deferred, user=actor))
                result.statement, result.line, result.column = text, line, column
                results.append(result)
                if progress is not None:
                    progress(result)
                break
        except CatalogError as error:
            results.append(failed(text, line, column, error))
            results[-1].query = getattr(error, "query", None)  # a query's own record
            if progress is not None:
                progress(results[-1])
            break
        result.statement, result.line, result.column = text, line, column
        results.append(result)
        if progress is not None:
            progress(result)
    return results


def run(
    sql: str, *, namespace: str | None = None, actor: Any = None
) -> tuple[list[StatementResult], Any]:
    """`execute` for a web request: the results so far, and the job (catalog.models.SparkJob)
    that runs the rest of the script on a worker, or None when nothing needed Spark. The
    script is read once here (`Script`) and handed down read: which statement needs Spark,
    the admission, and running them share its tokens and parses."""
    script = Script(sql) if isinstance(sql, str) else None
    # A script that will need a worker is refused before anything runs when none can take
    # it (503) or its user has too many jobs (429): cheaply, and all or nothing.
    needing = _first_needing_spark(script, namespace) if script is not None else None
    asking = (
        [i for i, part in enumerate(script.parts) if i >= needing and part.query_kind]
        if script is not None and needing is not None
        else []
    )
    with contextlib.ExitStack() as admission:
        if script is not None and needing is not None:
            try:
                admission.enter_context(jobs.admitted(actor, summary="a console script"))
                if asking:
                    queries.check_bound(actor)
            except CatalogError as error:
                part = script.parts[needing]
                return [failed(part.text, *part.position(), error)], None
        started: list[Any] = []

        def defer(index: int, statement: st.Statement) -> Any:
            holds_query = any(i >= index for i in asking)
            if holds_query and index == 0 and script is not None and len(script.parts) == 1:
                summary = "Console query"
            else:
                summary = f"Console script, from statement {index + 1}"

            def recorded(job: Any) -> None:
                # The query's history row, written with its job, before a worker may take it.
                if isinstance(statement, st.Query):
                    queries.record_queued(
                        statement, job=job, index=index, namespace=namespace, actor=actor
                    )

            job = jobs.submit(
                queries.JOB_KIND if holds_query else STATEMENTS_KIND,
                {"sql": sql, "namespace": namespace, "start": index},
                actor=actor,
                summary=summary,
                bound=queries.check_bound if holds_query else None,
                recorded=recorded,
                task=TASK,
            )
            started.append(job)
            return job

        results = execute(script or sql, namespace=namespace, actor=actor, defer=defer)
    return results, started[0] if started else None


def run_job(arguments: dict[str, Any], actor: Any, job: Any) -> tuple[int, dict[str, Any]]:
    """A console job on a worker (refresh.tasks.run_console_job hands it to catalog.jobs.run):
    the rest of the script from statement `start`, read again from its text in this
    process, the results on the job as each statement finishes; the script's answer."""
    done: list[dict[str, Any]] = []

    def heard(result: StatementResult) -> None:
        done.append(result.as_dict())
        jobs.progress(job, {"results": done})

    results = execute(
        arguments["sql"],
        namespace=arguments.get("namespace"),
        actor=actor,
        start=int(arguments.get("start", 0)),
        progress=heard,
        job=job,
    )
    return answer(results)


def _first_needing_spark(script: Script, namespace: str | None) -> int | None:
    """The index of the first statement that needs a worker's Spark, from its keywords
    (st.Located.needs_spark), except a CREATE OR ALTER of an existing table with the same
    query: applying a folder's unchanged definitions needs no worker."""
    for index, part in enumerate(script.parts):
        if part.needs_spark and not _same_query_as_the_table(script, index, namespace):
            return index
    return None


def _same_query_as_the_table(script: Script, index: int, namespace: str | None) -> bool:
    # Only a CREATE OR ALTER can be unchanged; its keywords say so without a parse, which
    # is most of the cost of a console request that ends in a job.
    if script.parts[index].leading_words(3) != ["CREATE", "OR", "ALTER"]:
        return False
    try:
        statement = script.statement(index)  # kept: `execute` does not parse it again
        if not isinstance(statement, st.CreateMaterializedTable) or not statement.or_alter:
            return False
        ns, name = resolve(statement.name, namespace)
        mt = MaterializedTable.objects.filter(table__namespace__name=ns, table__name=name).first()
        return mt is not None and (pipelines.difference(mt, statement, namespace=ns).query is None)
    except CatalogError:
        return False


def answer(results: list[StatementResult]) -> tuple[int, dict[str, Any]]:
    """The HTTP status and body of a script's results: the failed statement's status."""
    body: dict[str, Any] = {"results": [result.as_dict() for result in results]}
    last = results[-1] if results else None
    if last is not None and not last.ok:
        body["error"] = last.error or {"message": last.message, "type": "InvalidInput"}
        return int(body["error"].get("status") or 400), body
    return 200, body


def failed(
    text: str, line: int, column: int, error: CatalogError, *, refused: bool = False
) -> StatementResult:
    where = {"line": getattr(error, "line", None), "column": getattr(error, "column", None)}
    body = {
        "message": error.message,
        "type": type(error).__name__,
        "field": error.field,
        "status": http_status(error),
    }
    body.update({k: v for k, v in where.items() if v is not None})
    if getattr(error, "retry_after", None):
        body["retry_after"] = error.retry_after
    result = StatementResult(
        text, line, column, ok=False, message=error.message, error=body, kind="error"
    )
    if refused:
        result.plan = {"action": "refused", "table": None, "changes": [], "error": body}
    return result


def resolve(name: st.Name, namespace: str | None) -> tuple[str, str]:
    return pipelines.resolve(name, namespace)


#: The statements that ask only catalog.services.grants.
GRANT_STATEMENTS = (
    grant_statements.GrantPrivileges,
    grant_statements.RevokePrivileges,
    grant_statements.ShowGrants,
)

#: The row-filter and mask statements (refresh.console_policies runs them).
POLICY_STATEMENTS = (
    ps.SetRowFilter,
    ps.DropRowFilter,
    ps.SetColumnMask,
    ps.DropColumnMask,
    ps.ShowPolicies,
)


def check_viewer(actor: Any, statement: st.Statement) -> None:
    """Every statement but the grant statements (which ask what catalog.services.grants
    asks) needs a privilege somewhere; each then asks about what it touches."""
    if not isinstance(statement, GRANT_STATEMENTS):
        checks.holds_anything(actor)


def in_script(error: SqlError, text: str, part: str) -> SqlError:
    """An error placed in `part` (a query inside the statement), moved to the script."""
    offset = text.find(part)
    if offset < 0 or error.line is None:
        return error
    line, column = st.position(text, offset)
    moved_column = error.column + column - 1 if error.line == 1 and error.column else error.column
    # A source one may not read stays a 403, not a 400.
    kind = rights.SourceNotReadable if isinstance(error, rights.SourceNotReadable) else SqlError
    return kind(
        error.base_message, line=error.line + line - 1, column=moved_column, field=error.field
    )


def _query(
    statement: st.Query, namespace: str | None, actor: Any, job: Any, index: int
) -> StatementResult:
    """A query, on a worker (NeedsWorker in a web request, before anything is written)."""
    query = queries.run(statement, namespace=namespace, actor=actor, job=job, index=index)
    result = StatementResult("", 0, 0, kind=type(statement).__name__)
    result.query = queries.summary(query)
    result.columns = [column["name"] for column in query.columns]
    rows = f"{query.row_count:,} row{'' if query.row_count == 1 else 's'}"
    result.message = f"{query.kind}: {rows} in {query.duration_seconds or 0:.2f} s"
    if query.cut:
        result.message += f"; {queries.cut_message(query)}"
    return result


def _run(
    statement: st.Statement, text: str, *, namespace: str | None, actor: Any
) -> StatementResult:
    result = StatementResult("", 0, 0, kind=type(statement).__name__)
    if isinstance(statement, GRANT_STATEMENTS):
        return console_grants.run(statement, namespace=namespace, actor=actor, result=result)
    if isinstance(statement, POLICY_STATEMENTS):
        return console_policies.run(statement, namespace=namespace, actor=actor, result=result)
    if isinstance(statement, st.ShowMaterializedTables):
        return _show(statement, namespace, result, actor)
    if isinstance(statement, st.DescribeJob):
        return _describe(checks.run(actor, statement.job_id), result)
    if isinstance(statement, st.ShowCreateMaterializedTable):
        ns, name = resolve(statement.name, namespace)
        mt = checks.materialized_table(actor, ns, name, READ_METADATA)
        result.table, result.columns = f"{ns}.{name}", ["statement"]
        # The definition only to those who may read every source (refresh.rights).
        hidden = rights.definition_hidden(access.for_user(actor), mt.sources)
        result.rows = [[rights.DEFINITION_HIDDEN if hidden else pipelines.show_create(mt)]]
        result.message = f"The statement that defines {ns}.{name} as it is"
        return result
    if isinstance(statement, st.CreateMaterializedTable):
        what = "CREATE OR ALTER" if statement.or_alter else "CREATE"
        ns, name = resolve(statement.name, namespace)
        existing = pipelines.existing_for(actor, ns, name, or_alter=statement.or_alter)
        if existing is not None:
            return _create_or_alter(existing, statement, text, ns, actor, result)
        try:
            mt = services.create_materialized_table(
                namespace=ns,
                name=name,
                query=statement.query,
                freshness=statement.freshness,
                refresh_mode=statement.refresh_mode,
                primary_key=statement.primary_key,
                constraint_name=statement.constraint_name,
                partitioned_by=statement.partitioned_by,
                options=statement.options,
                comment=statement.comment,
                columns=statement.columns,
                distribution=(
                    (statement.distribution.columns, statement.distribution.buckets)
                    if statement.distribution
                    else None
                ),
                expectations=statement.expectations,
                statement=what,
                actor=actor,
            )
        except SqlError as error:
            if error.field != "query":
                raise
            raise in_script(error, text, statement.query) from None
        run = mt.runs.order_by("id").first()
        result.table, result.run_id = f"{ns}.{name}", run.pk if run else None
        result.message = (
            f"Materialized table {ns}.{name} created ({mt.refresh_mode}, {mt.freshness}); "
            f"its first refresh is job {result.run_id}"
        )
        result.plan = pipelines.Plan("create", result.table, [result.message]).as_dict()
        return result
    if isinstance(statement, st.DataChange):
        return _data_change(statement, text, namespace, actor, result)
    ns, name = resolve(statement.name, namespace)
    if isinstance(statement, st.DropMaterializedTable):
        try:
            mt = checks.materialized_table(actor, ns, name, MANAGE)
        except selectors.NoSuchMaterializedTable:
            if statement.if_exists:
                result.message = f"Materialized table {ns}.{name} does not exist; nothing dropped"
                return result
            raise
        services.drop_materialized_table(mt, actor=actor)
        result.message = f"Materialized table {ns}.{name} dropped with its data"
        return result
    mt = checks.materialized_table(actor, ns, name, MANAGE)
    result.table = f"{ns}.{name}"
    if isinstance(statement, st.Suspend):
        table_state.suspend(mt, actor=actor)
        result.message = f"{ns}.{name} suspended: its schedule is paused"
    elif isinstance(statement, st.Resume):
        services.resume(mt, actor=actor, options=statement.options)
        result.message = f"{ns}.{name} resumed"
    elif isinstance(statement, st.Refresh):
        run = runs.request_refresh(
            mt, trigger=RefreshRun.Trigger.MANUAL, partition=statement.partition, actor=actor
        )
        result.run_id = run.pk
        where = f" of partition {statement.partition}" if statement.partition else ""
        result.message = f"Refresh{where} queued as job {run.pk}"
    elif isinstance(statement, st.SetFreshness):
        mt = services.set_freshness(mt, freshness=statement.freshness, actor=actor)
        result.message = f"{ns}.{name}: FRESHNESS = {mt.freshness}, {mt.refresh_mode} mode"
    elif isinstance(statement, st.SetRefreshMode):
        mt = services.set_refresh_mode(mt, refresh_mode=statement.refresh_mode, actor=actor)
        result.message = f"{ns}.{name}: REFRESH_MODE = {mt.refresh_mode}"
    elif isinstance(statement, st.AlterQuery):
        try:
            run = definitions.alter_query(mt, query=statement.query, actor=actor)
        except SqlError as error:
            if error.field != "query":
                raise
            raise in_script(error, text, statement.query) from None
        result.run_id = run.pk
        result.message = (
            f"{ns}.{name}: definition version {run.definition_version} is being built by job "
            f"{run.pk}; readers see version {mt.current_version} until it commits"
        )
    elif isinstance(statement, st.SetOptions):
        services.set_options(mt, options=statement.options, actor=actor)
        result.message = f"{ns}.{name}: options set ({', '.join(statement.options)})"
    elif isinstance(statement, st.ResetOptions):
        services.reset_options(mt, keys=statement.keys, actor=actor)
        result.message = f"{ns}.{name}: options reset ({', '.join(statement.keys)})"
    return result


def _create_or_alter(
    mt: MaterializedTable,
    statement: st.CreateMaterializedTable,
    text: str,
    namespace: str,
    actor: Any,
    result: StatementResult,
) -> StatementResult:
    """CREATE OR ALTER on a table that exists: only what differs changes (refresh.pipelines);
    the same definition changes nothing, and says so."""
    qualified = str(mt)
    result.table = qualified
    try:
        diff = pipelines.difference(mt, statement, namespace=namespace, actor=actor)
        if diff.empty():
            result.message = f"{qualified}: nothing to do, the definition is the table's"
            result.plan = pipelines.Plan("nothing", qualified, []).as_dict()
            return result
        # A new query is checked by Spark first (definitions.check_query), before anything is
        # written: in a web request that is NeedsWorker, and the statement becomes a job.
        changes = diff.describe(mt)
        mt, run = pipelines.apply_difference(mt, diff, statement, actor=actor)
    except SqlError as error:
        if error.field != "query":
            raise
        raise in_script(error, text, statement.query) from None
    result.run_id = run.pk if run is not None else None
    result.plan = pipelines.Plan("alter", qualified, changes).as_dict()
    result.message = f"{qualified} altered: " + "; ".join(changes)
    if run is not None:
        result.message += f" (the rebuild is job {run.pk})"
    return result


def _show(
    statement: st.ShowMaterializedTables,
    namespace: str | None,
    result: StatementResult,
    actor: Any,
) -> StatementResult:
    parts = list(statement.namespace)
    if parts and parts[0] == settings.CATALOG_NAME and len(parts) > 1:
        parts = parts[1:]
    ns = ".".join(parts) or namespace
    result.columns = ["name", "state", "refresh_mode", "freshness", "last_refresh", "lag_seconds"]
    for mt in checks.visible(actor, selectors.materialized_tables(ns)):
        last = selectors.last_refresh(mt)
        lag = selectors.lag(mt)
        result.rows.append(
            [
                str(mt.table),
                mt.state,
                mt.refresh_mode,
                str(mt.freshness),
                f"{last.state} at {last.finished_at:%Y-%m-%d %H:%M:%S}" if last else "",
                round(lag.total_seconds(), 1) if lag is not None else None,
            ]
        )
    result.message = f"{len(result.rows)} materialized tables" + (f" in {ns}" if ns else "")
    return result


def _describe(run: RefreshRun, result: StatementResult) -> StatementResult:
    result.columns = ["field", "value"]
    fields = [
        ("job_id", run.pk),
        ("table", run.table_name),
        ("trigger", run.trigger),
        ("action", run.action),
        ("state", run.state),
        ("schedule_time", run.schedule_time),
        ("partition", run.partition or ""),
        ("queued_at", run.queued_at),
        ("started_at", run.started_at),
        ("finished_at", run.finished_at),
        ("rows_written", run.rows_written),
        ("bytes_written", run.bytes_written),
        ("snapshot_id", run.snapshot_id),
        ("source_snapshots", run.source_snapshots),
        ("error", run.error),
        ("requested_by", run.requested_by.get_username() if run.requested_by else ""),
    ]
    result.rows = [[key, "" if value is None else str(value)] for key, value in fields]
    result.run_id, result.table = run.pk, run.table_name
    result.message = f"Job {run.pk}: {run.state}"
    return result


def _data_change(
    statement: st.DataChange, text: str, namespace: str | None, actor: Any, result: StatementResult
) -> StatementResult:
    from refresh import analysis

    ns, name = resolve(statement.target, namespace)
    mt: MaterializedTable = checks.data_change_target(actor, ns, name)
    try:
        analysis.run_data_change(
            statement.sql,
            namespace=namespace or ns,
            target=[*ns.split("."), name],
            changed_by=getattr(actor, "username", "") or "",
            # What Spark's plan reads (a MERGE's source): as a query's reads are asked.
            may_read=lambda prepared: queries.check_reads(actor, prepared),
            policies=policies.for_principal(access.Principal(actor)),
        )
    except SqlError as error:
        raise in_script(error, text, statement.sql) from None
    services.record_data_change(mt, kind=statement.kind, actor=actor)
    result.table = f"{ns}.{name}"
    result.message = (
        f"{statement.kind} ran on {ns}.{name}; the next full refresh overwrites such changes"
    )
    return result

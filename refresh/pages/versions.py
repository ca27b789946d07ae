"""A materialized table's definition versions on its page: the versions and their log, the
diff of two, ALTER ... AS from the page (the error's position in the query) and a rollback
to an earlier version."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from catalog import access, jobs
from catalog.core.access import MANAGE, READ_DATA
from catalog.core.errors import CatalogError, http_status
from catalog.pages.access import catalog_page
from catalog.pages.diff import side_by_side
from refresh import definitions as refresh_definitions
from refresh import rights, selectors
from refresh.models import (
    MaterializedTable,
    MaterializedTableVersion,
    MaterializedTableVersionLogEntry,
)
from refresh.pages.common import back_to_table, table_for
from refresh.pages.forms import AlterQueryForm, VersionDiffForm


def _versions(request: HttpRequest, mt: MaterializedTable) -> list[MaterializedTableVersion]:
    """The table's definitions, newest first, each knowing the one before it and whether
    its query is hidden from the user (refresh.rights: one who may not read every source
    of a version does not see its text)."""
    versions = selectors.definition_versions(mt)
    hidden = rights.hidden_definitions(access.principal_of(request), [v.sources for v in versions])
    for index, version in enumerate(versions):
        version.hidden = hidden[index]
        version.is_current = version.version_id == mt.current_version
        older = versions[index + 1] if index + 1 < len(versions) else None
        version.previous_id = older.version_id if older is not None else None
    return versions


def _version_log(mt: MaterializedTable) -> list[Any]:
    """Each version asked to become current and whether it did, newest first; the newest
    applied entry is in force (a pending or failed one never was)."""
    entries = selectors.version_log(mt)
    applied = [e for e in entries if e.outcome == MaterializedTableVersionLogEntry.Outcome.APPLIED]
    for entry in entries:
        entry.is_current = bool(applied) and entry is applied[0]
        entry.previous_id = None
    for index, entry in enumerate(applied):
        before = applied[index + 1] if index + 1 < len(applied) else None
        if before is not None and before.version_id != entry.version_id:
            entry.previous_id = before.version_id
    return entries


def _diff_initial(
    mt: MaterializedTable, versions: list[MaterializedTableVersion], log: list[Any]
) -> dict[str, int]:
    """Compare the version in force with the one before it (in the log, else by id)."""
    ids = {v.version_id for v in versions}
    right = mt.current_version
    left = next((e.version_id for e in log if e.version_id != right and e.version_id in ids), None)
    if left is None:
        left = next((v.version_id for v in versions if v.version_id != right), right)
    return {"left": left, "right": right}


def definition_versions(request: HttpRequest, mt: MaterializedTable) -> dict[str, Any]:
    versions = _versions(request, mt)
    log = _version_log(mt)
    return {
        "query_hidden": rights.definition_hidden(access.principal_of(request), mt.sources),
        "hidden_note": rights.DEFINITION_HIDDEN,
        "versions": versions,
        "version_log": log,
        "diff_form": VersionDiffForm(
            initial=_diff_initial(mt, versions, log),
            version_ids=sorted(v.version_id for v in versions),
        ),
    }


@require_http_methods(["GET", "HEAD"])
@catalog_page()
def mt_diff(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    """Two definition versions side by side (?left=1&right=2; by default the one in force
    and the one before it)."""
    mt = table_for(request, namespace, name, READ_DATA)
    versions = _versions(request, mt)
    by_id = {v.version_id: v for v in versions}
    initial = _diff_initial(mt, versions, _version_log(mt))
    data = {**initial, **{k: request.GET[k] for k in ("left", "right") if k in request.GET}}
    form = VersionDiffForm(data, initial=initial, version_ids=sorted(by_id))
    context: dict[str, Any] = {
        "mt": mt,
        "namespace": mt.table.namespace,
        "table": mt.table,
        "form": form,
        "rows": None,
    }
    if not form.is_valid():
        return render(request, "refresh/mt_diff.html", context, status=400)
    left, right = by_id[form.cleaned_data["left"]], by_id[form.cleaned_data["right"]]
    if left.hidden or right.hidden:
        context.update(hidden_note=rights.DEFINITION_HIDDEN)
        return render(request, "refresh/mt_diff.html", context)
    context.update(left=left, right=right, rows=side_by_side(left.query, right.query))
    return render(request, "refresh/mt_diff.html", context)


def _error_position(query: str, error: CatalogError) -> dict[str, Any] | None:
    """The line an SQL error points at, with a caret under its column."""
    line, column = getattr(error, "line", None), getattr(error, "column", None)
    lines = query.splitlines()
    if not isinstance(line, int) or not 1 <= line <= len(lines):
        return None
    column = column if isinstance(column, int) and column >= 1 else 1
    return {
        "line": line,
        "column": column,
        "text": lines[line - 1],
        "caret": " " * (column - 1) + "^",
    }


def _say_rebuilding(request: HttpRequest, mt: MaterializedTable) -> None:
    pending = refresh_definitions.pending_change(mt)
    if pending is not None:
        messages.success(
            request,
            f"Version {pending.version_id} of {mt} is being built by job {pending.run_id}; "
            f"readers see version {mt.current_version} until its rows are committed.",
        )


@require_http_methods(["GET", "HEAD", "POST"])
@catalog_page(editors_only=True)
def mt_alter(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    """ALTER MATERIALIZED TABLE ... AS <query>: a new definition version and a rebuild."""
    mt = table_for(request, namespace, name, MANAGE)
    position = None
    status = 200
    if request.method == "POST":
        form = AlterQueryForm(request.POST, current=mt.query)
        if form.is_valid():
            query = form.cleaned_data["query"].strip()
            try:
                outcome = jobs.attempt(
                    "alter_query",
                    {"namespace": namespace, "name": name, "query": query},
                    actor=request.user,
                    summary=f"ALTER MATERIALIZED TABLE {mt} AS <query>",
                )
                if outcome.job is not None:
                    # Spark derives the new schema on a worker: the job's page follows it
                    # and goes on to the table when it is done.
                    return redirect("catalog:job", job_id=outcome.job.pk)
            except CatalogError as error:
                form.add_catalog_error(error)
                position = _error_position(query, error)
                status = http_status(error)
            else:
                _say_rebuilding(request, mt)
                return back_to_table(mt)
    else:
        hidden = rights.definition_hidden(access.principal_of(request), mt.sources)
        form = AlterQueryForm(initial={"query": "" if hidden else mt.query}, current=mt.query)
    context = {
        "mt": mt,
        "namespace": mt.table.namespace,
        "table": mt.table,
        "form": form,
        "position": position,
    }
    if form.errors and status < 400:
        status = 400
    return render(request, "refresh/mt_alter.html", context, status=status)


@require_http_methods(["GET", "HEAD", "POST"])
@catalog_page(editors_only=True)
def mt_rollback(request: HttpRequest, namespace: str, name: str, version_id: int) -> HttpResponse:
    """Make an earlier definition current again, after a confirmation."""
    mt = table_for(request, namespace, name, MANAGE)
    version = mt.versions.select_related("created_by").filter(version_id=version_id).first()
    if version is None:
        raise Http404(f"Materialized table {mt} has no definition version {version_id}")
    error_message = None
    if request.method == "POST":
        try:
            outcome = jobs.attempt(
                "rollback_definition",
                {"namespace": namespace, "name": name, "version_id": version_id},
                actor=request.user,
                summary=f"Roll {mt} back to definition version {version_id}",
            )
            if outcome.job is not None:
                return redirect("catalog:job", job_id=outcome.job.pk)
        except CatalogError as error:
            error_message = error.message
        else:
            _say_rebuilding(request, mt)
            return back_to_table(mt)
    current = mt.versions.filter(version_id=mt.current_version).first()
    shown = [version, *([current] if current is not None else [])]
    principal = access.principal_of(request)
    hidden = any(rights.hidden_definitions(principal, [v.sources for v in shown]))
    context = {
        "mt": mt,
        "namespace": mt.table.namespace,
        "table": mt.table,
        "version": version,
        "is_current": version_id == mt.current_version,
        "rows": side_by_side(current.query, version.query)
        if current is not None and not hidden
        else None,
        "query_hidden": hidden,
        "hidden_note": rights.DEFINITION_HIDDEN,
        "current": current,
        "error": error_message,
    }
    return render(
        request, "refresh/mt_rollback.html", context, status=400 if error_message else 200
    )

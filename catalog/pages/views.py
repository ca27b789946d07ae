"""The catalog's web pages. Reads go through the ORM; every change calls a service function
and shows its `CatalogError` on the form that caused it."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any
from urllib.parse import quote

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Count, Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import RFC3986_SUBDELIMS
from django.views.decorators.http import require_http_methods, require_POST

from catalog import access, checks, selectors, services
from catalog.core.access import CREATE, MANAGE, READ_DATA, READ_METADATA
from catalog.core.errors import CatalogError, CommitConflict, NeedsWorker
from catalog.core.inputs import whole_number
from catalog.models import (
    CatalogEvent,
    CatalogObject,
    Namespace,
    View,
    ViewSchemaField,
    ViewVersion,
    ViewVersionLogEntry,
)
from catalog.pages import access as page_access
from catalog.pages import permissions, view_facts
from catalog.pages.access import catalog_page
from catalog.pages.diff import side_by_side
from catalog.pages.formatting import time_of
from catalog.pages.forms import (
    DiffForm,
    NamespaceForm,
    PropertyForm,
    ViewCreateForm,
    ViewReplaceForm,
    view_dialects,
)
from catalog.pages.view_preview import preview_context
from catalog.prepared import Prepared

HISTORY_LENGTH = 20


# -- helpers --------------------------------------------------------------------------------


def _spark_job(kind: str, arguments: dict[str, Any], request: HttpRequest, summary: str) -> Any:
    """The job that does what needed a worker's Spark (catalog.jobs): the page never
    waits for it."""
    from catalog import jobs

    if kind == "create_view":
        summary = f"{summary}{arguments['name']} (Spark types its columns)"
    return jobs.submit(kind, arguments, actor=request.user, summary=summary)


# The view page's reads, built and compiled once (catalog.prepared): building them took
# longer than running them.
_VIEW = Prepared(
    lambda namespace, name: View.objects.select_related("namespace")
    .filter(namespace__name=namespace, name=name)
    .order_by()[:1],
    namespace="lakeview sample namespace",
    name="lakeview sample name",
)
_VERSION_LOG = Prepared(
    lambda view_id: ViewVersionLogEntry.objects.filter(view_id=view_id).order_by("position"),
    view_id=7_654_321,
)
_EVENTS = Prepared(
    # CatalogEvent.objects.for_object(view), by the view's uuid.
    lambda object_uuid: CatalogEvent.objects.filter(object_uuid=object_uuid).select_related(
        "actor"
    ),
    object_uuid=uuid.UUID("1a4e5c1e-0000-4000-8000-1a4e5c1e0001"),
)
_FIELDS = Prepared(
    lambda view_id, schema_id: ViewSchemaField.objects.filter(
        view_id=view_id, schema_id=schema_id
    ).order_by("position"),
    view_id=7_654_321,
    schema_id=7_654_322,
)


def _get_view(request: HttpRequest, namespace: str, name: str, privilege: str) -> View:
    """The view, when the user may see it (else the missing view's 404) and holds
    `privilege` on it (else 403). Its SQL is its data: the page needs read_data."""
    found = _VIEW.objects(namespace=namespace, name=name)
    missing = f"View does not exist: {namespace}.{name}"
    if not found:
        raise Http404(missing)
    page_access.check(request, found[0], privilege, missing=missing)
    return found[0]


def _versions(view: View) -> list[ViewVersion]:
    """Retained versions, newest first, each with `created` (a datetime) and `is_current`."""
    versions = list(view.versions.with_sql().order_by("-version_id"))
    for version in versions:
        version.created = time_of(version.timestamp_ms)
        version.is_current = version.version_id == view.current_version_id
    return versions


def _version_log(view: View) -> list[Any]:
    """The version log, newest first. An entry is a rollback when its version appeared
    earlier in the log."""
    seen: set[int] = set()
    entries = _VERSION_LOG.objects(view_id=view.pk)
    for entry in entries:
        entry.created = time_of(entry.timestamp_ms)
        entry.is_rollback = entry.version_id in seen
        entry.is_current = False
        seen.add(entry.version_id)
    if entries:
        entries[-1].is_current = True
    return entries[::-1]


def _previous_version_id(
    view: View, versions: list[ViewVersion], log: list[Any] | None = None
) -> int:
    """The version that was current before the current one, if still retained; else the
    newest other retained version; else the current one. `log`: the version log newest
    first, when the caller has read it (`_version_log`)."""
    retained = {v.version_id for v in versions}
    for entry in view.log_entries.order_by("-position") if log is None else log:
        if entry.version_id != view.current_version_id and entry.version_id in retained:
            return entry.version_id
    others = [v for v in sorted(retained, reverse=True) if v != view.current_version_id]
    return others[0] if others else view.current_version_id


def _original(version: ViewVersion | None) -> Any:
    if version is None:
        return None
    representations = list(version.representations.all())
    return next((r for r in representations if r.is_original), None) or (
        representations[0] if representations else None
    )


def _diff_form(
    view: View, versions: list[ViewVersion], data: Any = None, log: list[Any] | None = None
) -> DiffForm:
    current = next((v for v in versions if v.is_current), None)
    original = _original(current)
    dialects = view_dialects(sorted({r.dialect for v in versions for r in v.representations.all()}))
    initial = {
        "left": _previous_version_id(view, versions, log),
        "right": view.current_version_id,
        "dialect": original.dialect if original else dialects[0],
    }
    if data is not None:
        data = {
            **initial,
            **{key: data[key] for key in ("left", "right", "dialect") if key in data},
        }
    return DiffForm(
        data,
        initial=initial,
        version_ids=[v.version_id for v in versions],
        dialects=dialects,
    )


def _view_page(
    request: HttpRequest,
    view: View,
    *,
    property_form: PropertyForm | None = None,
    extra_context: dict[str, Any] | None = None,
) -> HttpResponse:
    versions = _versions(view)
    current = next((v for v in versions if v.is_current), None)
    version_log = _version_log(view)
    context = {
        "view": view,
        "namespace": view.namespace,
        "current": current,
        "representations": list(current.representations.all()) if current else [],
        "fields": _FIELDS.objects(view_id=view.pk, schema_id=current.schema_id) if current else [],
        "versions": versions,
        "version_log": version_log,
        "properties": sorted(view.properties.items()),
        "events": _EVENTS.objects(object_uuid=view.uuid, limit=HISTORY_LENGTH),
        "diff_form": _diff_form(view, versions, log=version_log),
        "property_form": property_form or PropertyForm(),
        "can_edit": page_access.holds(request, view, MANAGE),
        "permissions_url": permissions.later(view.namespace.name, view.name, kind="view"),
        **view_facts.page_facts(view, current, versions),
        **(extra_context or {}),
    }
    return render(request, "catalog/view_detail.html", context)


# -- namespaces -----------------------------------------------------------------------------


PAGE_SIZE = 50


def _page(request: HttpRequest, items: Any, parameter: str = "page") -> Any:
    """One page of `items` (Django's Paginator, PAGE_SIZE a page), from `?<parameter>=`; a
    number out of range gives the last page. `page.parameter` names the query parameter
    for the links (templates/catalog/_pagination.html)."""
    page = Paginator(items, PAGE_SIZE).get_page(request.GET.get(parameter))
    page.parameter = parameter
    page.other_parameters = request.GET.copy()
    page.other_parameters.pop(parameter, None)
    return page


#: A search reads its matches up to this many, or up to the page asked for when that is
#: further: beyond, it says that more exist without counting them (a count would read every
#: match, and grow with the catalog).
SEARCH_READ = 200
#: Up to this row, a page further down reads the ids before it too (`_capped_page`).
WALK_READ = 10_000
#: No page number beyond this one is read (a number is a LIMIT: it must stay an integer
#: the database takes).
LAST_PAGE_READ = 100_000


def _page_number(request: HttpRequest) -> int:
    try:
        return min(max(int(request.GET.get("page") or 1), 1), LAST_PAGE_READ)
    except ValueError:
        return 1


def _capped_page(request: HttpRequest, ids: Any, *, known_more: bool = False) -> Any:
    """`_page` of a search's query of ids, in one query: the ids up to `SEARCH_READ`, plus
    one to know whether more exist (`page.more`; the count is then "more than"); a page past
    those, or any page when more than `SEARCH_READ` are `known_more` to match
    (`selectors.names_beyond`), only its own ids (plus one), or, a walk in order down to
    `WALK_READ`, every id up to its own. A page past the end reads up to it, and shows the
    last page as Django's paginator does."""
    number = _page_number(request)
    start, upto = (number - 1) * PAGE_SIZE, number * PAGE_SIZE
    if known_more and upto <= SEARCH_READ:
        window = selectors.all_ids(ids[start:upto])
        # The same page and count ("more than SEARCH_READ") as reading them all shows (a
        # number the paginator reads otherwise, "-4", is left to the reading of them all).
        page = _page(request, _Window(start, window, length=SEARCH_READ))
        if len(window) == upto - start and page.number == number:
            page.more = True
            return page
    if upto > SEARCH_READ and upto <= WALK_READ and not isinstance(ids, selectors.NamePositions):
        # A query walking the list in order passes every row before the page (its OFFSET)
        # whatever it returns: returning them as well costs little more, and a page past the
        # end (a shorter list than the link's, a reader who sees part of the catalog) then
        # has the last page's ids without a second walk.
        found = selectors.all_ids(ids[: upto + 1])
        if len(found) > start:
            page = _page(request, _Window(start, found[start:upto]))
            page.more = len(found) > upto
            return page
        page = _page(request, found)
        page.more = False
        return page
    if upto > SEARCH_READ:
        window = selectors.all_ids(ids[start : upto + 1])
        if window:
            page = _page(request, _Window(start, window[:PAGE_SIZE]))
            page.more = len(window) > PAGE_SIZE
            return page
    upto = max(SEARCH_READ, upto)
    found = selectors.all_ids(ids[: upto + 1])
    page = _page(request, found[:upto])
    page.more = len(found) > upto
    return page


class _Window(Sequence):
    """Ids `start` to `start + len(items)` of a longer list, for a paginator that slices
    only the page it shows (the ids before `start` are not read)."""

    def __init__(self, start: int, items: list[int], *, length: int | None = None) -> None:
        self.start, self.items = start, items
        self.length = self.start + len(self.items) if length is None else length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            begin = max(index.start or 0, self.start) - self.start
            end = (len(self) if index.stop is None else index.stop) - self.start
            return self.items[begin : max(end, 0)]
        return self.items[index - self.start]


def linker() -> Callable[..., str]:
    """`link(url_name, namespace, name=None)`: the address of a namespace's page (no
    `name`) or of an object's page, what `reverse` gives, reversed once per page kind and
    then filled in with each namespace and name, quoted as `reverse` quotes them: for lists
    of many rows (a search's rows are in as many namespaces as rows)."""
    # Letters only: reverse() leaves them as they are. Neither contains the other.
    ns_marker, name_marker = "LAKEVIEWNAMESPACE", "LAKEVIEWOBJECTNAME"
    pieces: dict[tuple[str, bool], tuple[str, str, str]] = {}

    def link(url_name: str, namespace: str, name: str | None = None) -> str:
        key = (url_name, name is None)
        if key not in pieces:
            arguments = {"namespace": ns_marker}
            if name is not None:
                arguments["name"] = name_marker
            head, _, rest = reverse(url_name, kwargs=arguments).partition(ns_marker)
            middle, _, tail = rest.partition(name_marker) if name is not None else (rest, "", "")
            pieces[key] = (head, middle, tail)
        head, middle, tail = pieces[key]
        address = f"{head}{quote(namespace, safe=_URL_SAFE)}{middle}"
        if name is not None:
            address += f"{quote(name, safe=_URL_SAFE)}{tail}"
        return address

    return link


#: What `reverse` leaves unquoted in a path argument (django.urls.resolvers).
_URL_SAFE = RFC3986_SUBDELIMS + "/~:@"


def _when(moment: datetime | None) -> str:
    """A list's "Updated" column: what `|date:"Y-m-d H:i"` shows, in the current timezone."""
    return timezone.localtime(moment).strftime("%Y-%m-%d %H:%M") if moment else ""


#: The longest search text: a name or a line of SQL, not a file.
SEARCH_TEXT_LENGTH = 1000


def _search_page(request: HttpRequest, query: str) -> HttpResponse:
    """Views, tables and materialized tables matching `query`, by qualified name first
    ("sales.region" finds sales.region_revenue); views by their SQL too when asked
    (`?sql=1`, "names and view SQL" in the form), or when no name matches.

    Either way one query returns the ids in order up to the 200th match (`_capped_page`;
    by name through the names' trigram index or walking the (namespace, name) index, see
    `selectors.search_ids`): counting, then reading a page, would run it twice, and a text
    in half the names or half the views' SQL would have thousands of ids counted or
    listed. Then only the page's rows are read, as plain values."""
    with_sql = request.GET.get("sql") == "1"
    problem = None
    if "\x00" in query:
        problem = "The search text holds a NUL character, which no name or SQL can hold."
    elif len(query) > SEARCH_TEXT_LENGTH:
        problem = f"The search text is longer than {SEARCH_TEXT_LENGTH:,} characters."
    if problem:
        context = {"query": "", "page": None, "with_sql": with_sql, "problem": problem}
        return render(request, "catalog/search.html", context, status=400)
    by_sql_alone = False
    page = None
    if query:
        number = _page_number(request)
        upto = number * PAGE_SIZE + 1
        # Names of what the user may see (read_metadata); SQL of the views whose SQL they
        # may read (read_data): both conditions of the search's one query.
        seen = {
            "visible": page_access.visible(request),
            "readable": page_access.visible(request, READ_DATA),
        }
        # A text in many names is found by walking the list in order (`in_many`); a page
        # among the first ones then reads only its own ids, when the index's count of
        # names is the user's (every name visible to them).
        in_many = number * PAGE_SIZE <= SEARCH_READ and selectors.names_beyond(query, SEARCH_READ)
        known_more = in_many and seen["visible"] is None
        if with_sql:
            ids = selectors.search_ids(query, sql=True, in_many_names=in_many, **seen)
            page = _capped_page(request, ids, known_more=known_more)
        else:
            # A page past the first read ones: the names' index may be the shorter way there.
            deep = upto if upto > SEARCH_READ else None
            ids = selectors.search_ids(query, upto=deep, in_many_names=in_many, **seen)
            page = _capped_page(request, ids, known_more=known_more)
            if not page.paginator.count:
                # Names first: when none matches, the text may be part of a view's SQL.
                by_sql_alone = True
                ids = selectors.search_ids(query, names=False, sql=True, **seen)
                page = _capped_page(request, ids)
        link = linker()
        rows = selectors.object_rows(list(page.object_list))
        for row in rows:
            if row["kind"] == CatalogObject.Kind.VIEW:
                row["label"], url_name = "view", "catalog:view-detail"
            elif row["materialized"]:
                row["label"], url_name = "materialized table", "refresh:mt-detail"
            else:
                row["label"], url_name = "table", "catalog:table-detail"
            row["url"] = link(url_name, row["namespace"], row["name"])
            row["updated"] = _when(row["updated_at"])
        page.object_list = rows
        if not with_sql:
            page.other_parameters.pop("sql", None)  # the form's "names first" is the default
    context = {"query": query, "page": page, "with_sql": with_sql, "by_sql_alone": by_sql_alone}
    return render(request, "catalog/search.html", context)


@require_http_methods(["GET", "HEAD", "POST"])
@catalog_page(own_nul_message=True)  # ?q= is the search page's (_search_page)
def namespace_list(request: HttpRequest) -> HttpResponse:
    form = NamespaceForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            checks.create_namespace(request, form.cleaned_data["name"], {})
            namespace = services.create_namespace(
                name=form.cleaned_data["name"], actor=request.user
            )
        except CatalogError as error:
            form.add_catalog_error(error)
        else:
            messages.success(request, f"Namespace {namespace.name} created.")
            return redirect("catalog:namespace-detail", namespace=namespace.name)
    query = request.GET.get("q", "").strip()
    if query and request.method != "POST":
        # Old links to /?q=... keep working: they are the search page.
        return _search_page(request, query)
    # The counts are kept on each namespace's row (catalog.counts): nothing is counted here.
    listed = Namespace.objects.order_by("name").only(
        "name", "view_total", "table_total", "materialized_total"
    )
    shown = page_access.visible_namespaces(request)
    if shown is not None:
        listed = listed.filter(shown)
    page = _page(request, listed)
    page.object_list = list(page.object_list)
    if shown is not None:
        _count_visible(request, page.object_list)
    link = linker()
    for ns in page.object_list:
        ns.view_count = ns.view_total
        ns.plain_table_count = ns.table_total - ns.materialized_total
        ns.materialized_count = ns.materialized_total
        ns.url = link("catalog:namespace-detail", ns.name)
        ns.mt_url = link("refresh:mt-list", ns.name)
    # The late and failing counts come from refresh's template tag (refresh/templatetags).
    context = {"form": form, "page": page, "sees_catalog": page_access.sees_catalog(request)}
    return render(request, "catalog/namespace_list.html", context)


def _count_visible(request: HttpRequest, namespaces: list[Namespace]) -> None:
    """The kept counts of a page's namespaces, recounted where the user sees only some of
    what a namespace holds (a grant on one object in it, say): in one query for the page,
    of the objects they may see."""
    who = page_access.principal(request)
    partial = {
        ns.pk: ns
        for ns in namespaces
        if READ_METADATA not in who.privileges(access.namespace(ns.name))
    }
    if not partial:
        return
    for ns in partial.values():
        ns.view_total = ns.table_total = ns.materialized_total = 0
    visible = page_access.visible(request) or Q()
    rows = (
        CatalogObject.objects.filter(visible, namespace_id__in=list(partial))
        .order_by()
        .values("namespace_id", "kind")
        .annotate(total=Count("pk"), materialized=Count("table__materialized", distinct=True))
    )
    for row in rows:
        ns = partial[row["namespace_id"]]
        if row["kind"] == CatalogObject.Kind.VIEW:
            ns.view_total = row["total"]
        else:
            ns.table_total, ns.materialized_total = row["total"], row["materialized"]


@require_http_methods(["GET", "HEAD"])
@catalog_page(own_nul_message=True)
def search(request: HttpRequest) -> HttpResponse:
    return _search_page(request, request.GET.get("q", "").strip())


@require_http_methods(["GET", "HEAD"])
@catalog_page()
def namespace_detail(request: HttpRequest, namespace: str) -> HttpResponse:
    ns = page_access.namespace_for(request, namespace)
    link = linker()
    visible = page_access.visible(request, namespace=ns.name)
    views = _page(request, selectors.namespace_views(ns, visible), "views_page")
    views.object_list = [
        {
            "name": view["name"],
            "url": link("catalog:view-detail", ns.name, view["name"]),
            "comment": selectors.comment_of(view["properties"]),
            "current_version_id": view["current_version_id"],
            "updated": _when(view["updated_at"]),
        }
        for view in views.object_list
    ]
    tables = _page(request, selectors.namespace_tables(ns, visible), "tables_page")
    tables.object_list = [
        {
            **table,
            "url": link("catalog:table-detail", ns.name, table["name"]),
            "mt_url": (
                link("refresh:mt-detail", ns.name, table["name"])
                if table["materialized_id"] is not None
                else None
            ),
            "updated": _when(table["updated_at"]),
        }
        for table in tables.object_list
    ]
    context = {
        "namespace": ns,
        "views": views,
        "tables": tables,
        "properties": sorted(ns.properties.items()),
        "can_edit": CREATE in page_access.principal(request).privileges(access.namespace(ns.name)),
        "permissions_url": permissions.later(ns.name),
    }
    return render(request, "catalog/namespace_detail.html", context)


# -- views ----------------------------------------------------------------------------------


@require_http_methods(["GET", "HEAD", "POST"])
@catalog_page(editors_only=True)
def view_create(request: HttpRequest, namespace: str) -> HttpResponse:
    ns = page_access.namespace_for(request, namespace, CREATE)
    form = ViewCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        arguments = {"namespace": ns.name, "name": form.cleaned_data["name"], **form.definition()}
        try:
            try:
                view = services.create_view(**arguments, actor=request.user)
            except NeedsWorker:
                # Spark types the columns sqlglot cannot: a job, whose page goes on to the
                # view when it is done.
                job = _spark_job("create_view", arguments, request, f"Create view {ns.name}.")
                return redirect("catalog:job", job_id=job.pk)
        except CatalogError as error:
            form.add_catalog_error(error)
        else:
            messages.success(request, f"View {view} created (version {view.current_version_id}).")
            return redirect("catalog:view-detail", namespace=ns.name, name=view.name)
    return render(request, "catalog/view_form.html", {"form": form, "namespace": ns, "view": None})


@require_http_methods(["GET", "HEAD"])
@catalog_page()
def view_detail(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    view = _get_view(request, namespace, name, READ_DATA)
    preview, status = preview_context(request, view)
    response = _view_page(request, view, extra_context=preview)
    response.status_code = status
    return response


@require_http_methods(["GET", "HEAD"])
@catalog_page()
def view_diff(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    view = _get_view(request, namespace, name, READ_DATA)
    versions = _versions(view)
    form = _diff_form(view, versions, data=request.GET)
    context: dict[str, Any] = {"view": view, "namespace": view.namespace, "form": form}
    expired = _expired_in_request(view, versions, request.GET)
    if expired:
        # An old link to a version that expired: say so, not "select a valid choice".
        context.update(
            expired=expired,
            history_size=view_facts.history_size(view),
            retained=sorted(v.version_id for v in versions),
        )
        return render(request, "catalog/view_diff.html", context, status=404)
    if not form.is_valid():
        return render(request, "catalog/view_diff.html", context, status=400)
    by_id = {v.version_id: v for v in versions}
    dialect = form.cleaned_data["dialect"]
    sides = []
    for key in ("left", "right"):
        version = by_id[form.cleaned_data[key]]
        representation = next(
            (r for r in version.representations.all() if r.dialect == dialect), None
        )
        sides.append({"version": version, "representation": representation})
    left, right = sides
    context.update(
        left=left,
        right=right,
        dialect=dialect,
        rows=side_by_side(
            left["representation"].sql if left["representation"] else "",
            right["representation"].sql if right["representation"] else "",
        ),
    )
    return render(request, "catalog/view_diff.html", context)


def _expired_in_request(view: View, versions: list[ViewVersion], params: Any) -> list[int]:
    """Version ids a diff link names that the view had once but no longer keeps."""
    expired = set(view_facts.expired_version_ids(view, versions))
    asked = []
    for key in ("left", "right"):
        number = whole_number(params.get(key, ""))
        if number is not None and number in expired:
            asked.append(number)
    return sorted(set(asked))


@require_http_methods(["GET", "HEAD", "POST"])
@catalog_page(editors_only=True)
def view_replace(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    view = _get_view(request, namespace, name, MANAGE)
    newer = None
    if request.method == "POST":
        form = ViewReplaceForm(request.POST)
        if form.is_valid():
            before = view.metadata_location
            definition = form.definition()
            if definition["comment"] == view.comment:
                definition["comment"] = None  # unchanged: leave the property alone
            arguments = {
                "namespace": view.namespace.name,
                "name": view.name,
                "expected_metadata_location": form.cleaned_data["expected_metadata_location"]
                or None,
                **definition,
            }
            try:
                try:
                    view = services.replace_view(**arguments, actor=request.user)
                except NeedsWorker:
                    job = _spark_job("replace_view", arguments, request, f"Replace view {view}")
                    return redirect("catalog:job", job_id=job.pk)
            except CommitConflict as error:
                # Someone changed the view since the form was opened: show their version
                # beside the user's text, and let the next submit build on it.
                view = _get_view(request, namespace, name, MANAGE)
                current = view.current_version()
                newer_sql, newer_dialect = view_facts.as_written(current)
                newer = {
                    "version_id": view.current_version_id,
                    "sql": newer_sql,
                    "dialect": newer_dialect,
                    "updated_at": view.updated_at,
                    "updated_by": view.updated_by,
                }
                data = request.POST.copy()
                data["expected_metadata_location"] = view.metadata_location
                form = ViewReplaceForm(data)
                form.is_valid()
                form.add_error(
                    None,
                    f"{error.message}. Version {view.current_version_id} is shown beside your "
                    "SQL; submit again to replace it with yours.",
                )
            except CatalogError as error:
                form.add_catalog_error(error)
            else:
                if view.metadata_location == before:
                    messages.info(request, f"No change: that is already the definition of {view}.")
                else:
                    messages.success(
                        request, f"View {view} replaced: now version {view.current_version_id}."
                    )
                return redirect(
                    "catalog:view-detail", namespace=view.namespace.name, name=view.name
                )
    else:
        current = view.current_version()
        sql, dialect = view_facts.as_written(current)
        form = ViewReplaceForm(
            initial={
                "sql": sql,
                "dialect": dialect,
                "comment": view.comment,
                "default_catalog": (current.default_catalog if current else None) or "",
                "default_namespace": ".".join(current.default_namespace) if current else "",
                "expected_metadata_location": view.metadata_location,
            }
        )
    return render(
        request,
        "catalog/view_form.html",
        {"form": form, "namespace": view.namespace, "view": view, "newer": newer},
    )


@require_http_methods(["GET", "HEAD", "POST"])
@catalog_page(editors_only=True)
def view_rollback(request: HttpRequest, namespace: str, name: str, version_id: int) -> HttpResponse:
    view = _get_view(request, namespace, name, MANAGE)
    version = view.versions.with_sql().filter(version_id=version_id).first()
    if version is None:
        raise Http404(f"View {view} has no retained version {version_id}")
    version.created = time_of(version.timestamp_ms)
    error_message = None
    expected = view.metadata_location
    if request.method == "POST":
        expected = request.POST.get("expected_metadata_location") or None
        try:
            view = services.rollback_view(
                namespace=view.namespace.name,
                name=view.name,
                version_id=version_id,
                expected_metadata_location=expected,
                actor=request.user,
            )
        except CatalogError as error:
            error_message = error.message
        else:
            messages.success(request, f"View {view} rolled back to version {version_id}.")
            return redirect("catalog:view-detail", namespace=view.namespace.name, name=view.name)
    context = {
        "view": view,
        "namespace": view.namespace,
        "version": version,
        "original": _original(version),
        "expected_metadata_location": expected or "",
        "error": error_message,
    }
    return render(request, "catalog/view_rollback.html", context)


@require_POST
@catalog_page(editors_only=True)
def view_properties(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    view = _get_view(request, namespace, name, MANAGE)
    if request.POST.get("action") == "remove":
        key = request.POST.get("key", "")
        try:
            services.remove_view_properties(
                namespace=view.namespace.name, name=view.name, keys=[key], actor=request.user
            )
        except CatalogError as error:
            messages.error(request, error.message)
        else:
            messages.success(request, f"Property {key} removed.")
        return redirect("catalog:view-detail", namespace=view.namespace.name, name=view.name)
    form = PropertyForm(request.POST)
    if form.is_valid():
        key, value = form.cleaned_data["key"], form.cleaned_data["value"]
        try:
            services.set_view_properties(
                namespace=view.namespace.name,
                name=view.name,
                updates={key: value},
                actor=request.user,
            )
        except CatalogError as error:
            form.add_catalog_error(error)
        else:
            messages.success(request, f"Property {key} set.")
            return redirect("catalog:view-detail", namespace=view.namespace.name, name=view.name)
    view.refresh_from_db()
    return _view_page(request, view, property_form=form)


@require_http_methods(["GET", "HEAD", "POST"])
@catalog_page(editors_only=True)
def view_drop(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    view = _get_view(request, namespace, name, MANAGE)
    error_message = None
    if request.method == "POST":
        try:
            services.drop_view(namespace=view.namespace.name, name=view.name, actor=request.user)
        except CatalogError as error:
            error_message = error.message
        else:
            messages.success(request, f"View {view} dropped.")
            return redirect("catalog:namespace-detail", namespace=view.namespace.name)
    return render(
        request,
        "catalog/view_drop.html",
        {"view": view, "namespace": view.namespace, "error": error_message},
    )

"""The search page: views, tables and materialized tables by qualified name, and views by
their SQL, of what the user may see (`selectors.search_ids`), a page at a time: a page of
ids read in one query, capped at SEARCH_READ matches (`_capped_page`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from catalog import selectors
from catalog.core.access import READ_DATA
from catalog.models import CatalogObject
from catalog.pages import access as page_access
from catalog.pages.access import catalog_page
from catalog.pages.formatting import linker, minute
from catalog.pages.paging import PAGE_SIZE, page_of

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
    """`?page=`: from 1 to LAST_PAGE_READ; 1 when it is not a number."""
    try:
        return min(max(int(request.GET.get("page") or 1), 1), LAST_PAGE_READ)
    except ValueError:
        return 1


def _capped_page(request: HttpRequest, ids: Any, *, known_more: bool = False) -> Any:
    """`page_of` a search's query of ids, in one query: the ids up to `SEARCH_READ`, plus
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
        page = page_of(request, _Window(start, window, length=SEARCH_READ))
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
            page = page_of(request, _Window(start, found[start:upto]))
            page.more = len(found) > upto
            return page
        page = page_of(request, found)
        page.more = False
        return page
    if upto > SEARCH_READ:
        window = selectors.all_ids(ids[start : upto + 1])
        if window:
            page = page_of(request, _Window(start, window[:PAGE_SIZE]))
            page.more = len(window) > PAGE_SIZE
            return page
    upto = max(SEARCH_READ, upto)
    found = selectors.all_ids(ids[: upto + 1])
    page = page_of(request, found[:upto])
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


#: The longest search text: a name or a line of SQL, not a file.
SEARCH_TEXT_LENGTH = 1000


def search_page(request: HttpRequest, query: str) -> HttpResponse:
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
            row["updated"] = minute(row["updated_at"])
        page.object_list = rows
        if not with_sql:
            page.other_parameters.pop("sql", None)  # the form's "names first" is the default
    context = {"query": query, "page": page, "with_sql": with_sql, "by_sql_alone": by_sql_alone}
    return render(request, "catalog/search.html", context)


@require_http_methods(["GET", "HEAD"])
@catalog_page(own_nul_message=True)
def search(request: HttpRequest) -> HttpResponse:
    return search_page(request, request.GET.get("q", "").strip())

"""Queries on the pages: a query's result page (its grid, downloads, the SQL, run again), and
what the SQL console shows of them (its user's history; the text of a query to run again).
The grid fills in from the rows API (static/js/query_results.js); without JavaScript the
page shows the result's first page as the server read it."""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from catalog.core.errors import CatalogError, NotFound
from catalog.core.inputs import whole_number
from catalog.pages.views import catalog_page
from refresh import queries
from refresh.models import Query

#: Rows the server puts in a result's grid (the script asks for the rest).
FIRST_ROWS = 100


def grid(query: Query) -> dict[str, Any]:
    """What templates/refresh/_query_results.html needs of a query."""
    state, error = queries.state_of(query)
    page = None
    if queries.kept(query):
        page = queries.page(query, offset=0, limit=FIRST_ROWS)
    return {
        "query": {**queries.summary(query), "state": state},
        "query_error": error,
        "query_page": page,
        "query_kept": queries.kept(query),
        "query_cut": queries.cut_message(query),
    }


def console_context(request: HttpRequest) -> dict[str, Any]:
    """The console's part about queries: its user's history, and the statement and namespace
    of a query asked to run again (`?again=<id>`, one of theirs)."""
    context: dict[str, Any] = {"query_history": queries.history_of(request.user)}
    again = whole_number(request.GET.get("again", ""), digits=18)
    if again:
        try:
            query = queries.get(again, user=request.user)
        except CatalogError:
            return context
        context["again"] = {"sql": query.sql, "namespace": query.namespace}
    return context


@require_http_methods(["GET", "HEAD"])
@catalog_page()
def query_page(request: HttpRequest, query_id: int) -> HttpResponse:
    """One query of the user's (a superuser's: anyone's): its result while it is kept."""
    try:
        query = queries.get(query_id, user=request.user)
    except NotFound as error:
        raise Http404(error.message) from None
    return render(request, "refresh/query.html", {"item": query, **grid(query)})

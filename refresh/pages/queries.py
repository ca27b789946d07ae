"""Queries on the pages: a query's result page (its grid, downloads, the SQL, run again), and
what the SQL console shows of them (its user's history; the text of a query to run again).
The grid fills in from the rows API (static/js/query_results.js); without JavaScript the
page shows the result's first page as the server read it."""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from catalog.core.errors import CatalogError, Forbidden, NotFound
from catalog.core.inputs import whole_number
from catalog.pages.access import catalog_page
from refresh import queries
from refresh.models import Query

#: Rows the server puts in a result's grid (the script asks for the rest).
FIRST_ROWS = 100


def grid(query: Query, *, user: Any) -> dict[str, Any]:
    """What templates/refresh/_query_results.html needs of a query, as `user` may see it: a
    user who may no longer read what the query read sees why, and no rows
    (`query_refused`); a result that is gone says why (`queries.gone`)."""
    state, error = queries.state_of(query)
    page, kept, refused = None, queries.kept(query), False
    if kept:
        try:
            page = queries.page(query, user=user, offset=0, limit=FIRST_ROWS)
        except Forbidden as refusal:
            error, kept, refused = {"message": refusal.message, "status": 403}, False, True
    elif state == Query.State.SUCCEEDED:
        # Said once, where the grid says its errors (and where its script says it again).
        error = queries.gone(query)
    return {
        "query": {**queries.summary(query), "state": state},
        "query_error": error,
        "query_page": page,
        "query_kept": kept,
        "query_cut": queries.cut_message(query),
        "query_refused": refused,
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
    """One query of the user's (a superuser's: anyone's): its result while it is kept, and
    while they may read what it read (else a 403 page that says why)."""
    try:
        query = queries.get(query_id, user=request.user)
    except NotFound as error:
        raise Http404(error.message) from None
    context = grid(query, user=request.user)
    status = 403 if context["query_refused"] else 200
    return render(request, "refresh/query.html", {"item": query, **context}, status=status)

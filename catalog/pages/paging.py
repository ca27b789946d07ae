"""Pages of the catalog's lists: one page of a list (Django's Paginator, `page_of`; a
search's pages are its own, `catalog.pages.search`), and how many events an object's page
lists (`HISTORY_LENGTH`). templates/catalog/_pagination.html shows the links."""

from __future__ import annotations

from typing import Any

from django.core.paginator import Paginator
from django.http import HttpRequest

#: The newest events an object's page lists (its history).
HISTORY_LENGTH = 20

PAGE_SIZE = 50


def page_of(request: HttpRequest, items: Any, parameter: str = "page") -> Any:
    """One page of `items` (Django's Paginator, PAGE_SIZE a page), from `?<parameter>=`; a
    number out of range gives the last page. `page.parameter` names the query parameter
    for the links (templates/catalog/_pagination.html)."""
    page = Paginator(items, PAGE_SIZE).get_page(request.GET.get(parameter))
    page.parameter = parameter
    page.other_parameters = request.GET.copy()
    page.other_parameters.pop(parameter, None)
    return page

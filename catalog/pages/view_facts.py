"""What the view page says beyond the mirror's rows: what the view reads (and whether the
catalog knows it), how many versions it keeps, which SQL was transpiled and which written,
the SQL its author typed, and the properties the catalog sets for itself."""

from __future__ import annotations

from typing import Any

from django.urls import reverse

from catalog import selectors
from catalog.core.sql import display_name
from catalog.core.view_metadata import (
    DEFAULT_VERSION_HISTORY_SIZE,
    ORIGINAL_DIALECT,
    REPLACE_DROP_DIALECT_ALLOWED,
    VERSION_HISTORY_SIZE,
)
from catalog.models import CatalogObject, View, ViewVersion
from catalog.prepared import Prepared
from catalog.services.sql_views import (
    ENGINE_NAME,
    SQL_AS_WRITTEN,
    WRITTEN_DIALECTS,
    split_dialects,
)

#: Properties the catalog sets and reads itself: shown, never offered for removal.
INTERNAL_PROPERTIES = frozenset({REPLACE_DROP_DIALECT_ALLOWED})


#: The kind of the object of a name (compiled once, catalog.prepared).
_KIND = Prepared(
    lambda namespace, name: CatalogObject.objects.filter(namespace__name=namespace, name=name)
    .order_by()
    .values_list("kind")[:1],
    namespace="lakeview sample namespace",
    name="lakeview sample name",
)


def reads(view: View) -> list[dict[str, Any]]:
    """The current version's sources: dotted name (no empty catalog), and a link when the
    catalog holds it."""
    result = []
    # An engine's own name for this catalog (`lake`) is this one too.
    ours = selectors.catalogs_meaning_this({parts[0] for parts in view.dependencies or []})
    for parts in view.dependencies or []:
        catalog, *namespace, name = parts
        kind = None
        if catalog in ours and namespace:
            found = _KIND.rows(namespace=".".join(namespace), name=name)
            kind = found[0][0] if found else None
        url = None
        if kind is not None:
            route = (
                "catalog:view-detail" if kind == CatalogObject.Kind.VIEW else "catalog:table-detail"
            )
            url = reverse(route, kwargs={"namespace": ".".join(namespace), "name": name})
        result.append({"name": display_name(parts), "url": url, "known": kind is not None})
    return result


def history_size(view: View) -> int:
    raw = (view.properties or {}).get(VERSION_HISTORY_SIZE, "")
    try:
        return max(1, int(raw))
    except (TypeError, ValueError):
        return DEFAULT_VERSION_HISTORY_SIZE


def expired_version_ids(view: View, versions: list[ViewVersion]) -> list[int]:
    """Versions the view once had that expired: ids up to the newest one that are no
    longer retained (this catalog and Iceberg's Java builders number versions 1, 2, ...)."""
    retained = {v.version_id for v in versions}
    newest = max(retained, default=0)
    return [i for i in range(1, newest) if i not in retained]


def label_representations(version: ViewVersion | None) -> list[Any]:
    """The version's representations, each with `label`: "original", "transpiled" (made by
    this catalog from the original), "written" (someone wrote it) or "" (an engine's)."""
    if version is None:
        return []
    summary = version.summary or {}
    ours = summary.get("engine-name") == ENGINE_NAME and ORIGINAL_DIALECT in summary
    written = set(split_dialects(summary.get(WRITTEN_DIALECTS)))
    representations = list(version.representations.all())
    for representation in representations:
        if representation.is_original:
            representation.label = "original"
        elif representation.dialect in written:
            representation.label = "written"
        elif ours:
            representation.label = "transpiled"
        else:
            representation.label = ""
    return representations


def as_written(version: ViewVersion | None) -> tuple[str, str]:
    """(SQL, dialect) the version's author typed: their own text when the catalog kept it,
    else the representation in the original dialect."""
    if version is None:
        return "", "spark"
    representations = list(version.representations.all())
    original = next((r for r in representations if r.is_original), None) or (
        representations[0] if representations else None
    )
    if original is None:
        return "", "spark"
    return (version.summary or {}).get(SQL_AS_WRITTEN) or original.sql, original.dialect


def page_facts(view: View, current: ViewVersion | None, versions: list[ViewVersion]) -> dict:
    """Context for the view page."""
    sources = reads(view)
    return {
        "reads": sources,
        "unknown_sources": [s["name"] for s in sources if not s["known"]],
        "history_size": history_size(view),
        "expired_version_ids": expired_version_ids(view, versions),
        "representations": label_representations(current),
        "internal_properties": sorted(INTERNAL_PROPERTIES),
    }

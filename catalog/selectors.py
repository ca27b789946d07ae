"""Reads shared by the services, pages, the API and the Iceberg REST adapter: objects by
name, with the catalog's not-found errors, the columns of known tables and views, and the
lists of the search and namespace pages."""

from __future__ import annotations

import functools
import math
import re
import string
from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings
from django.core.exceptions import EmptyResultSet
from django.db import connection
from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet, Sum

from catalog.core import metadata_io
from catalog.core.errors import NoSuchNamespace, NoSuchTable, NoSuchView, NotFound
from catalog.core.sql import ENGINE_CATALOG_PATTERN, SESSION_CATALOG
from catalog.core.types import sqlglot_type_from_iceberg
from catalog.models import (
    CatalogEvent,
    CatalogObject,
    Namespace,
    SparkJob,
    Table,
    View,
    ViewRead,
    ViewRepresentation,
    ViewSchemaField,
)


def no_such_namespace(name: str) -> NoSuchNamespace:
    """The error for a namespace that is not there (or that the asker may not see)."""
    return NoSuchNamespace(f"Namespace does not exist: {name}", field="namespace")


def no_such_view(namespace: str, name: str) -> NoSuchView:
    return NoSuchView(f"View does not exist: {namespace}.{name}", field="name")


def no_such_table(namespace: str, name: str) -> NoSuchTable:
    return NoSuchTable(f"Table does not exist: {namespace}.{name}", field="name")


def get_namespace(name: str) -> Namespace:
    try:
        return Namespace.objects.get(name=name)
    except Namespace.DoesNotExist:
        raise no_such_namespace(name) from None


def get_view(namespace: str, name: str) -> View:
    try:
        return View.objects.select_related("namespace").get(namespace__name=namespace, name=name)
    except View.DoesNotExist:
        raise no_such_view(namespace, name) from None


def get_table(namespace: str, name: str) -> Table:
    try:
        return Table.objects.select_related("namespace").get(namespace__name=namespace, name=name)
    except Table.DoesNotExist:
        raise no_such_table(namespace, name) from None


def holder_of(namespace: Namespace, name: str) -> CatalogObject | None:
    """Whatever object holds this name, of any kind."""
    return CatalogObject.objects.filter(namespace=namespace, name=name).first()


def column_lookup(catalog_names: set[str]) -> Callable[[tuple[str, ...]], list | None]:
    """Columns of the tables and views this catalog holds, for typing queries: a function
    from (catalog, *namespace, name) to [(column, sqlglot type)], or None when unknown."""

    def lookup(parts: tuple[str, ...]) -> list[tuple[str, str]] | None:
        catalog, *namespace, name = parts
        if catalog and catalog not in catalog_names and not catalogs_meaning_this([catalog]):
            return None
        namespace_name = ".".join(namespace)
        table = Table.objects.filter(namespace__name=namespace_name, name=name).first()
        if table is not None:
            return [(f.name, sqlglot_type_from_iceberg(f.type)) for f in table.schema_fields()]
        view = View.objects.filter(namespace__name=namespace_name, name=name).first()
        if view is None:
            return None
        version = view.current_version()
        if version is None:
            return None
        return [
            (f.name, sqlglot_type_from_iceberg(f.type))
            for f in ViewSchemaField.objects.filter(view=view, schema_id=version.schema_id)
        ]

    return lookup


# -- this catalog, by the names engines give it -----------------------------------------------
#
# An engine names the app's catalog as its configuration does (Spark's `lake` in
# `lake.shop.orders`, Trino's `iceberg`), and a view keeps the SQL as its engine wrote it. The
# app reads such a name as its own: any catalog part but Spark's session catalog (an engine's
# own metastore) means this catalog, unless it is the first level of one of this catalog's
# namespaces, where `lake.shop.orders` reads the nested namespace `lake.shop` (as Spark
# resolves a name whose first part is no catalog). A name that then holds nothing is an
# error naming it, where it is read.


ENGINE_CATALOG_NAME = re.compile(ENGINE_CATALOG_PATTERN)
#: The most engine names the app's sessions register: a team has a few; views naming
#: thousands (each a distinct name) must not make every session register them all.
MAX_ENGINE_CATALOGS = 32


def catalogs_meaning_this(names: Iterable[str]) -> frozenset[str]:
    """Those of `names` (catalog parts of names in SQL; "" for none) that mean this catalog:
    "", its own name, and engines' names for it (above; plain identifiers only). One query,
    only when a name is neither "" nor this catalog's."""
    wanted = {str(name) for name in names}
    own = wanted & {"", settings.CATALOG_NAME}
    others = {
        name for name in wanted - own - {SESSION_CATALOG} if ENGINE_CATALOG_NAME.fullmatch(name)
    }
    if not others:
        return frozenset(own)
    condition = Q()
    for name in others:
        condition |= Q(name=name) | Q(name__startswith=f"{name}.")
    # LIKE ignores case on SQLite: the first levels are compared here, exactly.
    taken = {
        namespace.split(".")[0]
        for namespace in Namespace.objects.filter(condition).values_list("name", flat=True)
    }
    return frozenset(own | (others - taken))


def engine_catalogs() -> frozenset[str]:
    """The names, other than its own, that views' SQL gives this catalog (`lake`, `iceberg`):
    the catalogs the app's Spark registers as this one, so that it reads those views as the
    engines that made them do. At most MAX_ENGINE_CATALOGS, the ones most views read through
    first."""
    counted = (
        ViewRead.objects.exclude(catalog__in=("", settings.CATALOG_NAME, SESSION_CATALOG))
        .values("catalog")
        .annotate(reads=Count("id"))
        .order_by("-reads", "catalog")
        .values_list("catalog", flat=True)
    )
    # A default catalog that names use is among them: a view's reads are filled from it.
    named = [name for name in counted if ENGINE_CATALOG_NAME.fullmatch(name)]
    return catalogs_meaning_this(named[:MAX_ENGINE_CATALOGS]) - {"", settings.CATALOG_NAME}


# -- lists: search and the namespace page ------------------------------------------------------
#
# A list shows a page of 50 rows of a few plain values each, so these read only those columns
# (`values()`), never whole model instances with every mirror column.


def search_ids(
    text: str,
    *,
    names: bool = True,
    sql: bool = False,
    upto: int | None = None,
    in_many_names: bool = False,
    visible: Q | None = None,
    readable: Q | None = None,
) -> QuerySet | NamePositions:
    """Ids, in list order (namespace, then name), of the objects of any kind whose qualified
    name contains `text` (`CatalogObject.objects.search`: "sales.region" finds
    sales.region_revenue) when `names`, and of the views whose retained versions' SQL, in
    any dialect, contains it when `sql`.

    By name, a text in few names (`_name_candidates`) is looked up in a trigram index of
    the qualified names; a common one is found by the (namespace, name) index alone: a page
    (LIMIT/OFFSET) walks it from the first namespace on and stops when the page is full, a
    count reads the index only. A page far down a common text's list (`upto`: the last row it
    needs; by name alone) may read the trigram index's whole list instead: then the answer
    is where the matches lie, sliced as the query is (`_deep_positions`). By SQL, see
    `_in_sql`. Building the query asks the trigram indexes once or twice each, unless the
    caller knows the text is `in_many_names` (`names_beyond`) and reads one of the first
    pages: then a walk in order finds the page among the names soon, testing the SQL of
    the objects it passes, and no index is asked.

    Only what the asker may see is found: names of the objects `visible` holds, SQL of
    the views `readable` holds (catalog.access's conditions; None: every one), tested as
    the walk passes each object."""
    found = CatalogObject.objects.none()
    if names:
        found = CatalogObject.objects.search(text)
        # Where the matches lie (NamePositions) counts every object's name: only for one who
        # may see them all.
        deep = None if sql or visible is not None else upto
        candidates = None if in_many_names else _name_candidates(text, upto=deep)
        if isinstance(candidates, NamePositions):
            return candidates
        if candidates is not None:
            # Few names contain it (none, often): read those, not the whole index.
            found = found.filter(pk__in=candidates)
        if visible is not None:
            found = found.filter(visible)
    if sql:
        by_sql = CatalogObject.objects.filter(_in_sql(text, walk=in_many_names))
        if readable is not None:
            by_sql = by_sql.filter(readable)
        # One WHERE with an OR (not an IN over the name search): the walk stays on the index.
        found = (found | by_sql) if names else by_sql
    return found.order_by("namespace__name", "name").values_list("pk", flat=True)


#: Migration 0007's FTS5 table (trigram tokenizer) of qualified names, SQLite only.
NAME_FTS_TABLE = "catalog_object_name_fts"
#: A text in at most this many qualified names is "rare" (`_name_candidates`). Low: past
#: it, walking the names' index (a fraction of a millisecond per thousand names) costs
#: little, and the index stops reading at the limit.
NAME_CANDIDATES = 200


#: A deep page reads at most this many candidates from the names' trigram index.
DEEP_CANDIDATES = 10_000
#: Up to this many objects, a deep page walks the names' index: all of them take about as
#: long to walk (SQLite, 2-core machine: 1.5 ms for 11,000) as counting the candidates.
DEEP_WALK_OBJECTS = 20_000
#: Reading a candidate from the trigram index (and sorting it) costs about as much as
#: walking this many names in order.
CANDIDATE_COST = 5
#: The name of the candidates' list inside `_deep_positions`' query.
_DEEP = "deep_candidates"
_OBJECTS = f'"{CatalogObject._meta.db_table}"'
_NAMESPACES = f'"{Namespace._meta.db_table}"'


def _name_candidates(text: str, *, upto: int | None = None) -> list[int] | NamePositions | None:
    """Ids of the objects whose qualified name may contain `text` (never fewer than do:
    the index folds case at least as widely as LIKE), from migration 0007's trigram index;
    None on other databases, for a text shorter than a trigram, or when there are more
    than NAME_CANDIDATES (then walking the names in order finds a page soon), unless the
    page asked for lies so far down that reading the index's list costs less: then where
    the matches lie (`_deep_positions`)."""
    if connection.vendor != "sqlite" or len(text) < 3:
        return None
    ids = _fts_rowids(NAME_FTS_TABLE, text, NAME_CANDIDATES + 1)
    if len(ids) <= NAME_CANDIDATES:
        return ids
    return _deep_positions(text, upto) if upto is not None else None


def _deep_positions(text: str, upto: int) -> NamePositions | None:
    """How many matches of a text in many names each namespace holds, for a page ending at
    match `upto`, when reading the trigram index's candidates is the shorter way there; None
    when the walk in order is.

    The walk reads about `objects x upto / matches` names to get there (it stops at the
    page), the index about `matches` ids (each costing CANDIDATE_COST names walked), and
    the matches are about as many as the candidates: so the index when there are fewer
    candidates than `sqrt(objects x upto / CANDIDATE_COST)` (and DEEP_CANDIDATES). In a
    catalog of at most DEEP_WALK_OBJECTS the walk is short whatever the page. At 100,000
    views page 90 of a text in 5,000 names walked 90,000 names (17 ms).

    One query reads the candidates once (the index asked for the text's end, as
    `_sql_candidates` does: fewer, longer lists are read; the ids stay in the database),
    and either counts them past the bound, which ends it, or counts the matches among them
    namespace by namespace: a page then walks from the namespace where it starts
    (`NamePositions`), where sorting every candidate would read them all a second time."""
    totals = Namespace.objects.aggregate(views=Sum("view_total"), tables=Sum("table_total"))
    objects = (totals["views"] or 0) + (totals["tables"] or 0)
    if objects <= DEEP_WALK_OBJECTS:
        return None  # walking every name costs less than reading the candidates
    # The most candidates for which reading them costs less than the walk.
    bound = min(DEEP_CANDIDATES, math.isqrt(max(objects * upto - 1, 0) // CANDIDATE_COST))
    phrase = '"' + text[-SQL_SUFFIX:].replace('"', '""') + '"'
    matching = f"SELECT rowid FROM {NAME_FTS_TABLE} WHERE {NAME_FTS_TABLE} MATCH %s"
    condition, condition_params = _search_condition(text)
    with connection.cursor() as cursor:
        # Joined, not `IN`: the candidates are read from their list once, each object by
        # its id. Past the bound the WHERE is false before any object is read (SQLite
        # tests a condition on no table once, ahead of the join).
        cursor.execute(
            f"WITH {_DEEP}(id) AS MATERIALIZED ({matching} LIMIT %s) "
            f"SELECT NULL, 0, 0, COUNT(*) FROM {_DEEP} UNION ALL "
            f"SELECT n.name, n.view_total, n.table_total, m.matches FROM ("
            f"SELECT {_OBJECTS}.namespace_id, COUNT(*) AS matches "
            f"FROM {_DEEP} JOIN {_OBJECTS} ON {_OBJECTS}.id = {_DEEP}.id "
            f"WHERE (SELECT COUNT(*) FROM {_DEEP}) <= %s AND ({condition}) GROUP BY 1"
            f") m JOIN {_NAMESPACES} n ON n.id = m.namespace_id",
            [phrase, bound + 1, bound, *condition_params],
        )
        rows = cursor.fetchall()
    # A namespace always has a name: the row without one is the candidates' count.
    candidates = next(count for name, _, _, count in rows if name is None)
    if candidates > bound:
        return None
    namespaces = sorted(
        (name, views + tables, matches) for name, views, tables, matches in rows if name is not None
    )
    return NamePositions(
        (condition, list(condition_params)), namespaces, candidates, (matching, [phrase])
    )


@functools.lru_cache(maxsize=256)
def _search_condition(text: str) -> tuple[str, tuple]:
    """The WHERE of `CatalogObject.objects.search(text)` on SQLite, as SQL on the objects'
    table and its parameters, for `_deep_positions` and its pages: building and compiling
    the queryset costs about 0.6 ms, which a deep page would spend again for each query (and
    a text past the bound for nothing). It depends on the text alone."""
    found = CatalogObject.objects.search(text)
    sql, params = found.query.get_compiler(connection=connection).compile(found.query.where)
    return sql, tuple(params)


class NamePositions:
    """The matches of a search by name (`search_ids`), sliced as its query of ids is
    (`positions[start:stop]`, a list of ids in list order: namespace, then name), from the
    search's `condition` (SQL and parameters, on the objects' table), how many matches each
    namespace holds (`namespaces`: name, objects, matches; in the list's order, which is
    the order of the names' code points, as SQLite compares them) and the trigram index's
    `candidates` (how many; `candidate_ids`: a subquery of their ids, every match is one).
    A slice walks the (namespace, name) index from the namespace where it starts, skipping
    the matches before it, unless the namespaces it spans hold so many objects that sorting
    the candidates costs less."""

    def __init__(
        self,
        condition: tuple[str, list],
        namespaces: list[tuple[str, int, int]],
        candidates: int,
        candidate_ids: tuple[str, list],
    ) -> None:
        self.condition, self.namespaces = condition, namespaces
        self.candidates, self.candidate_ids = candidates, candidate_ids
        self.total = sum(matches for _, _, matches in namespaces)

    def __len__(self) -> int:
        return self.total

    def __getitem__(self, index: slice) -> list[int]:
        start, stop, _ = index.indices(self.total)
        if start >= stop:
            return []
        first, skipped, walked, seen = None, 0, 0, 0
        for name, objects, matches in self.namespaces:
            if first is None and seen + matches <= start:
                seen += matches  # wholly before the slice
                continue
            if first is None:
                first, skipped = name, seen
            walked += objects
            seen += matches
            if seen >= stop:
                break
        condition, params = self.condition
        if walked <= CANDIDATE_COST * self.candidates:
            where, params = f'({condition}) AND {_NAMESPACES}."name" >= %s', [*params, first]
            start, stop = start - skipped, stop - skipped
        else:
            subquery, subquery_params = self.candidate_ids
            where = f"({condition}) AND {_OBJECTS}.id IN ({subquery})"
            params = [*params, *subquery_params]
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT {_OBJECTS}.id FROM {_OBJECTS} JOIN {_NAMESPACES} "
                f"ON {_NAMESPACES}.id = {_OBJECTS}.namespace_id WHERE {where} "
                f'ORDER BY {_NAMESPACES}."name", {_OBJECTS}."name" LIMIT %s OFFSET %s',
                [*params, stop - start, start],
            )
            return [row[0] for row in cursor.fetchall()]


#: SQLite's LIKE (Django's `icontains`) folds the case of ASCII letters only.
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def names_beyond(text: str, count: int) -> bool:
    """Whether more than `count` objects' qualified names contain `text` as `search` matches
    them (ASCII letters in any case), known from the first `count + 1` entries of migration
    0007's trigram index, each checked as LIKE checks it: a search that knows this reads
    only its page, where finding `count + 1` matches in list order would walk past every
    object before them (and a text in one name in twenty has the walk grow with the
    catalog). False when not known: other databases, a text shorter than a trigram, fewer
    entries, or one the index folds but LIKE does not (a non-ASCII letter)."""
    if connection.vendor != "sqlite" or len(text) < 3:
        return False
    phrase = '"' + text.replace('"', '""') + '"'
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT qualified FROM {NAME_FTS_TABLE} WHERE {NAME_FTS_TABLE} MATCH %s LIMIT %s",
            [phrase, count + 1],
        )
        names = [row[0] for row in cursor.fetchall()]
    needle = text.translate(_ASCII_LOWER)
    return len(names) > count and all(needle in name.translate(_ASCII_LOWER) for name in names)


def _fts_rowids(table: str, text: str, limit: int) -> list[int]:
    """The first `limit` rowids of the SQLite FTS5 `table` (a trigram index) whose text
    holds `text`: a MATCH of `text` as one FTS5 string, where only `"` is special (doubled),
    passed as a parameter; the tokenizer folds case at least as widely as LIKE does."""
    phrase = '"' + text.replace('"', '""') + '"'
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT rowid FROM {table} WHERE {table} MATCH %s LIMIT %s", [phrase, limit]
        )
        return [row[0] for row in cursor.fetchall()]


#: Migration 0006's FTS5 table (trigram tokenizer) over `ViewRepresentation.sql`, SQLite only.
SQL_FTS_TABLE = "catalog_viewrepresentation_sql_fts"
#: A text the trigram index finds in at most this many representations is "rare" (`_in_sql`).
SQL_CANDIDATES = 2000
#: The index is first asked for a longer text's last characters (three trigrams).
SQL_SUFFIX = 5


def _in_sql(text: str, *, walk: bool = False) -> Q:
    """The condition "a view whose retained SQL contains `text`" (`icontains`: the user's
    text taken literally, any case), written for how common the text is:

    - rare (the trigram index points to at most SQL_CANDIDATES representations): `pk IN` the
      views of those, so only they are read, however many views the catalog holds;
    - common (more, or shorter than a trigram, which no trigram index answers): each object's
      SQL is looked at as the list is walked in order, and a page of matches is found long
      before the end, where listing thousands of views first would read them all (as when
      `walk`, without asking the index)."""
    candidates = None if walk else _sql_candidates(text)
    if candidates == []:
        return Q(pk__in=[])
    if candidates is not None:
        representations = ViewRepresentation.objects.filter(pk__in=candidates)
        return Q(pk__in=representations.filter(sql__icontains=text).values("version__view_id"))
    in_one_version = ViewRepresentation.objects.filter(
        version__view_id=OuterRef("pk"), sql__icontains=text
    )
    return Q(Exists(in_one_version))


def _sql_candidates(text: str) -> list[int] | None:
    """Ids of the representations whose SQL may contain `text` (never fewer than do), read
    from the trigram index; None when there are more than SQL_CANDIDATES, or when `text` is
    shorter than a trigram.

    SQLite: migration 0006's FTS5 table (`_fts_rowids`). PostgreSQL: `icontains` itself,
    which the GIN index on UPPER(sql) answers (without pg_trgm, a scan that stops at the
    limit)."""
    if len(text) < 3:
        return None
    if connection.vendor == "sqlite":
        if len(text) > SQL_SUFFIX:
            # What ends a name or a literal (a number, a suffix) usually tells it apart,
            # where the rest of the text shares its trigrams with every view's SQL (SELECT,
            # FROM, a common prefix) and would have the index read long lists. Every SQL
            # holding the text holds its end, so few rows with the end are all candidates.
            ids = _fts_rowids(SQL_FTS_TABLE, text[-SQL_SUFFIX:], SQL_CANDIDATES + 1)
            if len(ids) <= SQL_CANDIDATES:
                return ids
        ids = _fts_rowids(SQL_FTS_TABLE, text, SQL_CANDIDATES + 1)
    else:
        matching = ViewRepresentation.objects.filter(sql__icontains=text).order_by()
        ids = list(matching.values_list("pk", flat=True)[: SQL_CANDIDATES + 1])
    return ids if len(ids) <= SQL_CANDIDATES else None


def all_ids(ids: QuerySet | NamePositions | list[int]) -> list[int]:
    """Every id a `values_list("pk", flat=True)` query gives, in its order, read straight
    from the cursor: Django's row-by-row iteration costs a microsecond an id, which counts
    when a search of the SQL returns thousands. `NamePositions`: every match (a slice of
    them is a list already)."""
    if isinstance(ids, list):
        return ids
    if isinstance(ids, NamePositions):
        return ids[:]
    try:
        sql, params = ids.query.sql_with_params()
    except EmptyResultSet:  # a condition that nothing meets (no candidate at all)
        return []
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [row[0] for row in cursor.fetchall()]


def object_rows(pks: list[int]) -> list[dict[str, Any]]:
    """What a search result shows of the objects `pks`, in that order: `pk`, `kind`, `name`,
    `namespace` (its name), `comment`, `updated_at` and `materialized` (whether a table is a
    materialized table's)."""
    rows = {
        row["pk"]: row
        for row in CatalogObject.objects.filter(pk__in=pks)
        .order_by()
        .values(
            "pk",
            "kind",
            "name",
            "properties",
            "updated_at",
            namespace_name=F("namespace__name"),
            materialized_id=F("table__materialized__id"),
        )
    }
    return [
        {
            "pk": pk,
            "kind": row["kind"],
            "name": row["name"],
            "namespace": row["namespace_name"],
            "comment": comment_of(row["properties"]),
            "updated_at": row["updated_at"],
            "materialized": row["materialized_id"] is not None,
        }
        for pk in pks
        if (row := rows.get(pk)) is not None
    ]


def namespace_views(namespace: Namespace, visible: Q | None = None) -> QuerySet:
    """The namespace's views by name, as dicts: `name`, `properties`, `current_version_id`,
    `updated_at` (the (namespace, name) index gives both the order and the page); only
    those `visible` holds (catalog.access.objects_condition), when given."""
    views = View.objects.filter(namespace=namespace)
    return (
        (views if visible is None else views.filter(visible))
        .order_by("name")
        .values("name", "properties", "current_version_id", "updated_at")
    )


def namespace_tables(namespace: Namespace, visible: Q | None = None) -> QuerySet:
    """The namespace's tables by name, as dicts: `name`, `format_version`,
    `current_snapshot_id`, `updated_at`, `materialized_id` (None unless the table is a
    materialized table's); only those `visible` holds, when given."""
    tables = Table.objects.filter(namespace=namespace)
    return (
        (tables if visible is None else tables.filter(visible))
        .order_by("name")
        .values(
            "name",
            "format_version",
            "current_snapshot_id",
            "updated_at",
            materialized_id=F("materialized__id"),
        )
    )


def comment_of(properties: Any) -> str:
    """The `comment` property of an object's properties, or ""."""
    return properties.get("comment", "") if isinstance(properties, dict) else ""


def spark_jobs_of(user: Any) -> QuerySet[SparkJob]:
    """The Spark jobs a user may see: their own (an operator's: everyone's), newest first."""
    jobs = SparkJob.objects.select_related("requested_by")
    if getattr(user, "is_superuser", False):
        return jobs
    return jobs.filter(requested_by_id=getattr(user, "pk", None))


def get_spark_job(job_id: int | str, *, user: Any) -> SparkJob:
    """A Spark job the user may see, or NotFound (another user's job is not there)."""
    try:
        pk = int(str(job_id))
    except ValueError:
        pk = 0
    found = spark_jobs_of(user).filter(pk=pk).first() if 0 < pk < 2**63 else None
    if found is None:
        raise NotFound(f"Spark job does not exist: {job_id}", field="job_id")
    return found


#: The history actions that take a table or a view out of the catalog; the first two keep
#: its files (Iceberg's drop), so the object can come back (services.restore_dropped).
KEEPING_DROPS = ("drop_table", "drop_view")
DROPS = (*KEEPING_DROPS, "purge_table")


def dropped(namespace: str, *, limit: int = 100) -> list[CatalogEvent]:
    """The tables and views dropped from `namespace` with their files kept, newest first:
    each object's newest drop, unless it was purged or is in the catalog again (restored,
    or registered by an engine). Reads at most 20 drops per one listed (the index on the
    action and time), so a history of many drops stays a bounded read."""
    events = (
        CatalogEvent.objects.filter(
            action__in=DROPS,
            result=CatalogEvent.Result.OK,
            object_uuid__isnull=False,
            object_name__startswith=f"{namespace}.",
        )
        .select_related("actor")
        .order_by("-occurred_at", "-id")[: limit * 20]
    )
    newest: dict[Any, CatalogEvent] = {}
    for event in events:
        if event.object_name.rpartition(".")[0] == namespace:
            newest.setdefault(event.object_uuid, event)
    live = set(CatalogObject.objects.filter(uuid__in=list(newest)).values_list("uuid", flat=True))
    kept = [e for e in newest.values() if e.action in KEEPING_DROPS and e.object_uuid not in live]
    # An engine may delete the files itself after an ordinary drop (Spark's DROP TABLE ...
    # PURGE does: Iceberg's SparkCatalog drops without purging, then deletes what the
    # metadata reaches): such a drop cannot come back, and is not listed.
    return [e for e in kept[:limit] if metadata_file_exists(e.metadata_location)]


def metadata_file_exists(location: str) -> bool:
    """Whether the metadata file a drop recorded is still there (one stat, or one HEAD)."""
    if not location:
        return False
    try:
        return metadata_io.file_io(location).new_input(location).exists()
    except Exception:  # noqa: BLE001 - an unreadable location is as good as gone
        return False

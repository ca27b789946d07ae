"""Reads the ORM builds and compiles once per database backend, then runs as SQL with each
call's values: for queries that take longer to build and compile than to run (the status of
every materialized table, a `Case` over freshness units and runs, took about 20 ms to build
and compile on every home page, and well under a millisecond to run).

`Prepared(build, now=SAMPLE)` calls `build(now=SAMPLE)` the first time it runs on a
backend, compiles the queryset, and notes where each sample value sits among the query's
parameters; `rows(now=...)` puts the call's values there and runs the SQL through Django's
cursor (so tests' query counts and the debug toolbar see it), converting the values as the
ORM would. A sample must appear in the query only where its argument does: one that is not
found, or the ORM passing it as text in the SQL, is an error at the first run, never a
query that looks for the sample."""

from __future__ import annotations

import copy
import threading
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Count, QuerySet


class Prepared:
    def __init__(self, build: Callable[..., QuerySet], **samples: Any) -> None:
        self._build = build
        self._samples = samples
        self._compiled: dict[tuple[str, str], _Compiled] = {}
        self._lock = threading.Lock()

    def rows(
        self,
        *,
        limit: int | None = None,
        offset: int = 0,
        using: str = DEFAULT_DB_ALIAS,
        **values: Any,
    ) -> list[tuple]:
        """The query's rows with these values (every argument of `build`), each value
        converted as the ORM converts it; `limit` and `offset` page through an ordered
        query."""
        if values.keys() != self._samples.keys():
            raise TypeError(f"Expected values for {sorted(self._samples)}, got {sorted(values)}")
        db = connections[using]
        key = (db.alias, db.vendor)
        compiled = self._compiled.get(key)
        if compiled is None:
            compiled = _Compiled(self._build(**self._samples), self._samples, db)
            with self._lock:
                self._compiled[key] = compiled
        return compiled.run(db, values, limit, offset)

    def objects(
        self,
        *,
        limit: int | None = None,
        offset: int = 0,
        using: str = DEFAULT_DB_ALIAS,
        **values: Any,
    ) -> list[Any]:
        """The query's model instances (with the related ones it selects and its
        annotations), as iterating the queryset gives them: for a query of instances, not of
        values."""
        rows = self.rows(limit=limit, offset=offset, using=using, **values)
        compiled = self._compiled[(using, connections[using].vendor)]
        return compiled.instances(rows, using)

    def count(
        self, *, limit: int | None = None, using: str = DEFAULT_DB_ALIAS, **values: Any
    ) -> int:
        """How many rows the query gives with these values, counting at most `limit`."""
        if values.keys() != self._samples.keys():
            raise TypeError(f"Expected values for {sorted(self._samples)}, got {sorted(values)}")
        db = connections[using]
        compiled = self._compiled.get((db.alias, db.vendor))
        if compiled is None:
            compiled = _Compiled(self._build(**self._samples), self._samples, db)
            with self._lock:
                self._compiled[(db.alias, db.vendor)] = compiled
        return compiled.count(db, values, limit)


class PreparedCount(Prepared):
    """How many rows `build`'s filter leaves, compiled once. The count is grouped by `by`,
    a column every counted row shares (the filter's own key), so that it compiles to a plain
    SELECT ... GROUP BY with its values where the samples are; no rows counts as 0."""

    def __init__(self, build: Callable[..., QuerySet], *, by: str, **samples: Any) -> None:
        super().__init__(
            lambda **values: build(**values)
            .order_by()
            .values(by)
            .annotate(n=Count("pk"))
            .values_list("n"),
            **samples,
        )

    def number(self, **values: Any) -> int:
        found = self.rows(**values)
        return found[0][0] if found else 0


class _Compiled:
    def __init__(self, queryset: QuerySet, samples: dict[str, Any], db: Any) -> None:
        from django.db.models.query import ModelIterable

        compiler = queryset.query.get_compiler(connection=db)
        sql, params = compiler.as_sql()
        self.of_instances = issubclass(queryset._iterable_class, ModelIterable)
        self.compiler = compiler
        self.sql = sql
        self.template = list(params)
        self.slots: dict[str, list[int]] = {}
        for name, sample in samples.items():
            adapted = _adapt(db, sample)
            self.slots[name] = [
                index for index, param in enumerate(self.template) if _same(param, adapted)
            ]
        missing = [name for name, slots in self.slots.items() if not slots]
        if missing:
            raise RuntimeError(f"The query does not take {missing} as parameters: {sql}")

    def params(self, db: Any, values: dict[str, Any]) -> list[Any]:
        params = self.template.copy()
        for name, slots in self.slots.items():
            value = _adapt(db, values[name])
            for index in slots:
                params[index] = _as(self.template[index], value)
        return params

    def count(self, db: Any, values: dict[str, Any], limit: int | None) -> int:
        params = self.params(db, values)
        sql = self.sql
        if limit is not None:
            sql = f"{sql} LIMIT %s"
            params.append(max(int(limit), 0))
        with db.cursor() as cursor:
            cursor.execute(f"SELECT COUNT(*) FROM ({sql}) AS counted", params)  # noqa: S608
            return cursor.fetchone()[0]

    def run(self, db: Any, values: dict[str, Any], limit: int | None, offset: int) -> list[tuple]:
        params = self.params(db, values)
        sql = self.sql
        if limit is not None:
            sql = f"{sql} LIMIT %s OFFSET %s"
            params += [int(limit), int(offset)]
        with db.cursor() as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
        # The compiler's converters (dates read from SQLite's text, JSON, booleans), bound
        # to this thread's connection.
        compiler = copy.copy(self.compiler)
        compiler.connection = db
        return list(compiler.results_iter(results=[rows], tuple_expected=True))

    def instances(self, rows: list[tuple], using: str) -> list[Any]:
        """Model instances of converted rows, built as Django's ModelIterable builds them."""
        from django.db.models.query import get_related_populators

        compiler = self.compiler
        select, klass_info = compiler.select, compiler.klass_info
        if not self.of_instances:
            raise RuntimeError(f"The query selects values, not model instances: {self.sql}")
        model = klass_info["model"]
        fields = klass_info["select_fields"]
        start, end = fields[0], fields[-1] + 1
        names = [column[0].target.attname for column in select[start:end]]
        populators = get_related_populators(klass_info, select, using)
        annotations = compiler.annotation_col_map.items()
        found = []
        for row in rows:
            obj = model.from_db(using, names, row[start:end])
            for populator in populators:
                populator.populate(row, obj)
            for name, position in annotations:
                setattr(obj, name, row[position])
            found.append(obj)
        return found


def _same(param: Any, sample: Any) -> bool:
    """Whether a compiled query's parameter is the sample. Integers may come wrapped in the
    driver's types (psycopg's Int4 on PostgreSQL)."""
    if _is_integer(param) and _is_integer(sample):
        return int(param) == int(sample)
    return type(param) is type(sample) and param == sample


def _as(template: Any, value: Any) -> Any:
    """`value` in the type the ORM gave its parameter (an integer wrapped as it was)."""
    if _is_integer(template) and _is_integer(value) and type(template) is not type(value):
        return type(template)(value)
    return value


def _is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _adapt(db: Any, value: Any) -> Any:
    """A value as the ORM passes it to this database as a parameter."""
    if isinstance(value, datetime):
        return db.ops.adapt_datetimefield_value(value)
    if isinstance(value, uuid.UUID) and not db.features.has_native_uuid_field:
        return value.hex  # as UUIDField stores it
    return value

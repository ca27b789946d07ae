"""Row filters and column masks as the readers' engine applies them. Django-free.

A table's policies are kept by the catalog (catalog.policy_models) as SQL written by its
managers: a row filter is a boolean expression over the table's columns (a reader sees the
rows where it is TRUE), a column mask an expression that gives the value a reader sees in
place of the column's own. Both may call `current_user()` and `is_member('group')`, which
mean the reader, not the worker that runs the query; and each names the groups exempt
from it.

`TablePolicy` is what reaches Spark for one reader and one table: the policies that apply
to that reader (an exempt reader gets none), *bound*: `current_user()` and `is_member()`
already replaced by the reader's name and memberships, so that what Spark evaluates is
plain SQL over the table's columns. runtime.spark.policies puts them into the analyzed
plan below everything the reader wrote."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TablePolicy:
    """The bound policies one reader meets on one table of the app's catalog.

    `table` is the table's identifier in the catalog: its namespace's levels, then its name.
    `row_filter` (None: every row) is Spark SQL over the table's columns; a row is seen
    where it is TRUE (FALSE and NULL hide it). `masks` pairs a column's name with the Spark
    SQL whose value the reader sees instead of the column's (cast to the column's type).
    `names` says which policies these are, for messages: e.g. "row filter of sales.orders"."""

    table: tuple[str, ...]
    row_filter: str | None = None
    masks: tuple[tuple[str, str], ...] = ()

    @property
    def label(self) -> str:
        return ".".join(self.table)

    def describe(self) -> str:
        """The policies by kind, for a refusal: "the row filter and the mask of email"."""
        parts = ["the row filter"] if self.row_filter is not None else []
        if self.masks:
            columns = ", ".join(column for column, _ in self.masks)
            parts.append(f"the mask{'s' if len(self.masks) > 1 else ''} of {columns}")
        return " and ".join(parts) + f" on {self.label}"

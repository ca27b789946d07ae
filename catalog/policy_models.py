"""Row filters and column masks on tables (materialized and attached tables too): the SQL a
table's managers keep to narrow what its readers see (catalog.core.policies checks and
binds it; catalog.policies reads it; catalog.services.policies writes it). Importable from
catalog.models, as every model of the app is. A policy goes with its table: dropping the
table deletes it."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class Policy(models.Model):
    """What a row filter and a column mask share: the SQL, the groups exempt from it, and
    who set it when."""

    #: Spark SQL over the table's columns, as its manager wrote it (checked when set).
    expression = models.TextField()
    #: Members of any of these groups are not subject to it.
    exempt_groups = models.ManyToManyField("auth.Group", blank=True, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_at = models.DateTimeField(default=timezone.now)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        abstract = True

    def exempt_names(self) -> list[str]:
        return sorted(group.name for group in self.exempt_groups.all())


class RowFilter(Policy):
    """A table's row filter: a reader it applies to sees the rows where it is TRUE. One per
    table."""

    table = models.OneToOneField(
        "catalog.CatalogObject", on_delete=models.CASCADE, related_name="row_filter"
    )

    def __str__(self) -> str:
        return f"row filter of {self.table}"


class ColumnMask(Policy):
    """A column's mask: a reader it applies to sees the expression's value in the column's
    place. One per table and column."""

    table = models.ForeignKey(
        "catalog.CatalogObject", on_delete=models.CASCADE, related_name="column_masks"
    )
    column = models.CharField(max_length=1024)

    class Meta:
        ordering = ["table", "column"]
        constraints = [
            models.UniqueConstraint(fields=["table", "column"], name="one_mask_per_column")
        ]

    def __str__(self) -> str:
        return f"mask of {self.column} on {self.table}"

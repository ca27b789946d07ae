"""Materialized tables' counts for pages outside this app: the catalog's home page shows how
many tables are late and failing (`{% load monitoring %}{% monitoring_counts as counts %}`)
without the catalog importing anything of refresh/."""

from __future__ import annotations

from django import template

from refresh.monitoring import tables as table_status

register = template.Library()


@register.simple_tag
def monitoring_counts() -> dict[str, int]:
    return table_status.counts()

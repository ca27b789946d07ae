"""Materialized tables' part of the management API at /api/: statements, tables, runs, queries,
monitoring, lineage."""

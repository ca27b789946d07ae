"""Materialized tables' server-rendered pages: the console, a table, queries, monitoring."""

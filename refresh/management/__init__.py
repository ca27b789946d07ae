"""Materialized tables' management commands."""

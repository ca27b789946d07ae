"""Materialized tables' management commands: pipelines from a folder, the streaming host,
verification."""

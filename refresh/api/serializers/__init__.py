"""Shapes of the materialized-table API's requests and responses, one module a resource:
common (the strict request base, freshness), statements, tables, runs, versions,
verifications, lineage and queries.

Request serializers check types and required fields only; FLIP-435's rules (freshness,
modes, options, lifecycle) are checked by `refresh.services`, which raises `CatalogError`."""

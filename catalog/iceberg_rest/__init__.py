"""The Iceberg REST catalog protocol at /iceberg, written without DRF."""

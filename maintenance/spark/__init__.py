"""Maintenance's Django-free Spark side: Iceberg's own Spark actions."""

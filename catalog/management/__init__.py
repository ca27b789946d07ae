"""The catalog's management commands."""

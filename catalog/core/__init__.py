"""The Django-free cores of the catalog: Iceberg view metadata, metadata files, SQL.

Nothing under this package imports Django (tests/unit/test_cores_are_django_free.py proves
it), so that engines' protocol code, Spark jobs and scripts can use it on their own.
"""

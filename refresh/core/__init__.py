"""The Django-free core of materialized tables: freshness and refresh modes, schedules and
the partition a scheduled refresh overwrites, as Flink's implementation of FLIP-435 defines
them. Nothing here imports Django (tests/unit/test_cores_are_django_free.py)."""

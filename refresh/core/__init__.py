"""The Django-free core of materialized tables, as Flink's implementation of FLIP-435 defines
them; nothing here imports Django (tests/unit/test_cores_are_django_free.py).

- `statements`: the FLIP-435 statements (and UPDATE/DELETE) parsed from sqlglot's Spark
  tokens into frozen dataclasses; scripts split; partition values rendered as literals.
- `freshness`: FRESHNESS, the refresh mode it implies, the full-refresh schedule (a crontab,
  or an interval for seconds) with Flink's refusals, planned ticks, lag.
- `partitions`: the partition a scheduled refresh overwrites (`scheduleTime - freshness`
  through `partition.fields.<col>.date-formatter`), Java date patterns translated.
"""

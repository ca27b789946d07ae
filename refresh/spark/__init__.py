"""The Django-free Spark core: the session factory, and later the batch and streaming jobs.

Nothing under refresh.spark imports Django, catalog or webapp, so the same code runs in a
Celery worker, a plain script, a spark-submit job and the Spark tests; the Django side passes
settings in as plain values.
"""

from runtime.spark.session import SparkSessionConfig, build_spark_session, jar_paths

__all__ = ["SparkSessionConfig", "build_spark_session", "jar_paths"]

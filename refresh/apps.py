from django.apps import AppConfig
from django.db.models.signals import post_delete


class RefreshConfig(AppConfig):
    name = "refresh"
    verbose_name = "Refresh"

    def ready(self) -> None:
        from refresh import schedules
        from refresh.models import MaterializedTable

        post_delete.connect(schedules.forget_schedule, sender=MaterializedTable)

        # Views' column types that sqlglot cannot derive are asked of the workers' Spark.
        from catalog.services import sql_views
        from refresh.analysis import view_schema

        if view_schema not in sql_views.TYPE_DERIVERS:
            sql_views.TYPE_DERIVERS.append(view_schema)

        # The job kinds (refresh.spark_jobs.KINDS) and the workers' heartbeat signals.
        from refresh import operations, workers  # noqa: F401

from django.apps import AppConfig
from django.db.models.signals import post_delete


class RefreshConfig(AppConfig):
    name = "refresh"
    verbose_name = "Refresh"

    def ready(self) -> None:
        from refresh import schedules
        from refresh.models import MaterializedTable

        post_delete.connect(schedules.forget_schedule, sender=MaterializedTable)

        # The catalog asks the workers' Spark what only Spark answers: views' column types
        # that sqlglot cannot derive, previews sqlglot and pyiceberg cannot read; and its
        # Spark jobs run inside this app's Spark (refresh.analysis).
        from catalog import jobs, previews
        from catalog.services import sql_views
        from refresh import analysis

        if analysis.view_schema not in sql_views.TYPE_DERIVERS:
            sql_views.TYPE_DERIVERS.append(analysis.view_schema)
        previews.SPARK_READER = analysis.preview_with_spark
        jobs.use_executor(analysis.EXECUTOR)

        # A streaming host's micro-batch commits only while it holds the table's lease.
        from catalog.services import kernel
        from refresh import stream_hosts

        if stream_hosts.check_commit not in kernel.COMMIT_GUARDS:
            kernel.COMMIT_GUARDS.append(stream_hosts.check_commit)

        # This app's job kinds (catalog.jobs.KINDS).
        from refresh import operations  # noqa: F401

"""The refresh app's config: forgets a dropped table's schedule, and registers into the catalog
what it asks of the workers' Spark (view column types, Spark previews, the Spark job
executor)."""

from django.apps import AppConfig
from django.db.models.signals import post_delete, post_save


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

        # A materialized table's query, in its table's properties, is shown only to those
        # who may read every source (refresh.rights), in the catalog's answers too.
        from catalog import redaction
        from refresh import rights
        from refresh.core.definition import QUERY_PROPERTY

        redaction.hide(QUERY_PROPERTY, rights.table_query_hidden)

        # GET /metrics reads the tables' lag and the work in progress at each scrape.
        from infra import metrics
        from refresh import metrics as refresh_metrics

        metrics.register_collector(refresh_metrics.collect)

        # OpenLineage events of runs (OPENLINEAGE_ENABLED), sent once a run's start or end
        # is committed.
        from refresh import lineage_events, signals

        signals.run_started.connect(lineage_events.run_started, dispatch_uid="openlineage")
        signals.run_finished.connect(lineage_events.run_finished, dispatch_uid="openlineage")

        # This app's job kinds (catalog.jobs.KINDS), and the console's (declared: its jobs
        # run through refresh.tasks.run_console_job).
        from refresh import console, operations  # noqa: F401

        # A namespace's count of materialized tables follows them (catalog.counts).
        post_save.connect(_counted, sender=MaterializedTable, dispatch_uid="count-mt")
        post_delete.connect(_uncounted, sender=MaterializedTable, dispatch_uid="uncount-mt")


def _counted(sender: object, instance: object, created: bool, **kwargs: object) -> None:
    from catalog import counts

    if created and not kwargs.get("raw"):
        counts.adjust(instance.table.namespace_id, materialized=1)


def _uncounted(sender: object, instance: object, **kwargs: object) -> None:
    from catalog import counts
    from catalog.models import CatalogObject

    # Deleted before its table (a drop's cascade), whose row is still there.
    namespace_id = (
        CatalogObject.objects.filter(pk=instance.table_id)
        .values_list("namespace_id", flat=True)
        .first()
    )
    if namespace_id is not None:
        counts.adjust(namespace_id, materialized=-1)

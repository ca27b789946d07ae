from django.apps import AppConfig


class CatalogConfig(AppConfig):
    name = "catalog"
    verbose_name = "Catalog"

    def ready(self) -> None:
        # pyiceberg's process-wide ManifestFile cache is keyed by path alone: a table
        # recreated with the same manifest paths would get the old table's records (see
        # catalog.core.metadata_cache). Off for the whole process, purges included.
        from django.conf import settings

        from catalog.core import metadata_io
        from catalog.core.metadata_cache import disable_pyiceberg_manifest_cache

        disable_pyiceberg_manifest_cache()
        # Object stores (attached tables on S3) are read with the operator's properties.
        metadata_io.configure(settings.FILE_IO_PROPERTIES)
        # The catalog's job kinds (catalog.jobs.KINDS) and the workers' heartbeat signals.
        from catalog import operations, workers  # noqa: F401

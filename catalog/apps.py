"""The catalog app's config: turns off pyiceberg's manifest cache, configures file IO, and
connects the namespace counts and the role groups."""

from django.apps import AppConfig
from django.db.models.signals import post_delete, post_migrate, post_save


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
        from catalog import counts, operations, workers  # noqa: F401
        from catalog.models import CatalogObject, Table, View

        # Each namespace's counts follow its objects (a create is a child's save, a delete
        # always deletes the parent row).
        for model in (View, Table):
            post_save.connect(counts.object_saved, sender=model, dispatch_uid=f"count-{model}")
        post_delete.connect(counts.object_deleted, sender=CatalogObject, dispatch_uid="uncount")
        post_migrate.connect(role_groups, sender=self, dispatch_uid="catalog-role-groups")


def role_groups(*, using: str = "default", apps=None, **kwargs) -> None:
    """The viewer and editor groups, with their grants on the catalog, when they are missing
    (a new database, or one a test emptied): migration 0017 gave existing ones theirs. A
    group that exists is left as its administrators made it. Nothing where the database is
    not migrated as far as grants (`apps` is the migrated state's)."""
    from django.apps import apps as global_apps

    from catalog.roles import ROLE_GRANTS

    apps = apps or global_apps  # a flush (tests) sends no migrated state
    from django.db import connections

    try:
        Group = apps.get_model("auth", "Group")
        Grant = apps.get_model("catalog", "Grant")
    except LookupError:
        return
    if Grant._meta.db_table not in connections[using].introspection.table_names():
        return  # a database migrated back to before grants, then flushed (tests)
    for name, privilege in ROLE_GRANTS.items():
        group, created = Group.objects.using(using).get_or_create(name=name)
        if created:
            Grant.objects.using(using).create(group=group, privilege=privilege)

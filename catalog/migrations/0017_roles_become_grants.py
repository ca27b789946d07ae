"""Today's deployments keep working unchanged: the viewer group reads the whole catalog
(read_data on the catalog) and the editor group changes it (manage on the catalog); every
object is owned by whoever created it, and every namespace by whoever the history says
created it (else no one: superusers and grants still reach it)."""

from django.db import migrations
from django.db.models import F, OuterRef, Subquery

VIEWER, EDITOR = "viewer", "editor"
ROLE_GRANTS = {VIEWER: "read_data", EDITOR: "manage"}


def roles_become_grants(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    Grant = apps.get_model("catalog", "Grant")
    for name, privilege in ROLE_GRANTS.items():
        group, _ = Group.objects.get_or_create(name=name)
        Grant.objects.get_or_create(
            group=group, privilege=privilege, user=None, client=None, namespace=None, object=None
        )


def owners_from_creators(apps, schema_editor):
    CatalogObject = apps.get_model("catalog", "CatalogObject")
    Namespace = apps.get_model("catalog", "Namespace")
    CatalogEvent = apps.get_model("catalog", "CatalogEvent")
    CatalogObject.objects.filter(owner__isnull=True, created_by__isnull=False).update(
        owner_id=F("created_by_id")
    )
    creators = CatalogEvent.objects.filter(
        action="create_namespace",
        result="ok",
        object_name=OuterRef("name"),
        actor__isnull=False,
    ).order_by("-occurred_at", "-id")
    Namespace.objects.filter(owner__isnull=True).update(
        owner_id=Subquery(creators.values("actor_id")[:1])
    )


def forwards(apps, schema_editor):
    roles_become_grants(apps, schema_editor)
    owners_from_creators(apps, schema_editor)


class Migration(migrations.Migration):
    dependencies = [("catalog", "0016_grants_and_owners")]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]

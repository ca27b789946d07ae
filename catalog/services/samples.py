"""Loading the sample data (catalog.core.samples) through the catalog's commit path.

Idempotent: what exists is left as it is, only what is missing is made. Each table is
created together with its first rows (one commit); a table of several batches (events)
gets one more commit per batch, so it has a snapshot per batch like a table appended to
over time. The commits are the samples' own user's (`SAMPLES_USERNAME`), an account that
cannot sign in, so the history says who wrote them."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth import get_user_model

from catalog.core import samples
from catalog.core.errors import AlreadyExists
from catalog.core.table_writes import all_or_nothing
from catalog.models import CatalogEvent, CatalogObject, Namespace
from catalog.services.namespaces import create_namespace
from catalog.services.table_writes import writer

SAMPLES_USERNAME = "lakeview-samples"


def samples_actor() -> Any:
    """The account the samples are written as: made on first use, inactive, no password."""
    user, created = get_user_model().objects.get_or_create(
        username=SAMPLES_USERNAME, defaults={"is_active": False}
    )
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    return user


@dataclass
class Loaded:
    """What one run did."""

    namespace_created: bool = False
    #: (table, rows, commits) of each table this run made.
    created: list[tuple[str, int, int]] = field(default_factory=list)
    #: Tables (or other objects holding their names) already there.
    present: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def changed(self) -> bool:
        return self.namespace_created or bool(self.created)


def were_dropped() -> bool:
    """Whether the samples' namespace was made here once and is gone now (someone dropped
    it: `make run` then leaves it dropped)."""
    if Namespace.objects.filter(name=samples.NAMESPACE).exists():
        return False
    return CatalogEvent.objects.filter(
        action="create_namespace",
        object_type="namespace",
        object_name=samples.NAMESPACE,
        actor__username=SAMPLES_USERNAME,
        result=CatalogEvent.Result.OK,
    ).exists()


def load_samples(*, actor: Any = None) -> Loaded:
    """Make whatever of the samples is missing."""
    actor = actor or samples_actor()
    started = time.monotonic()
    result = Loaded()
    if not Namespace.objects.filter(name=samples.NAMESPACE).exists():
        try:
            create_namespace(
                name=samples.NAMESPACE,
                properties={"comment": samples.NAMESPACE_COMMENT},
                actor=actor,
            )
            result.namespace_created = True
        except AlreadyExists:
            pass  # another run made it meanwhile
    namespace = Namespace.objects.get(name=samples.NAMESPACE)
    for table in samples.TABLES:
        if CatalogObject.objects.filter(namespace=namespace, name=table.name).exists():
            result.present.append(table.name)
            continue
        try:
            rows, commits = _write(table, actor)
        except AlreadyExists:
            result.present.append(table.name)  # another run made it meanwhile
            continue
        result.created.append((table.name, rows, commits))
    result.seconds = time.monotonic() - started
    return result


def _write(table: samples.SampleTable, actor: Any) -> tuple[int, int]:
    batches = table.batches()
    catalog = writer(actor=actor, action="load_samples")
    with all_or_nothing(catalog):
        transaction = catalog.create_table_transaction(
            (samples.NAMESPACE, table.name),
            schema=table.schema,
            partition_spec=table.spec,
            properties=table.properties,
        )
        transaction.append(batches[0])
        written = transaction.commit_transaction()
        for batch in batches[1:]:
            written.append(batch)
    return sum(batch.num_rows for batch in batches), len(batches)

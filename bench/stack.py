"""The whole stack a bench runs on, and its source table `bench.events`: soak.py and
many_tables.py start them the same way."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.refresh_stack import RefreshStack

#: The namespace of a bench's tables.
NS = "bench"


@contextmanager
def whole_stack(
    prefix: str, *, keep: bool, extra_env: dict[str, str] | None = None
) -> Iterator[tuple[RefreshStack, subprocess.Popen | None]]:
    """The app under gunicorn, the Celery worker, celery-beat and the streaming process
    (tests/refresh_stack.py) on a fresh SQLite database in a new temp dir named `prefix`...,
    with a Redis of their own unless `REDIS_URL` is set: (the stack, that Redis or None).
    Afterwards the Redis is stopped and the dir removed, unless `keep`."""
    # Imported here so that a bench's --help needs neither the tests' helpers nor Redis.
    from bench.refresh import _redis
    from tests.refresh_stack import refresh_stack

    root = Path(tempfile.mkdtemp(prefix=prefix))
    redis = _redis(root)
    try:
        with refresh_stack(root / "stack", extra_env=extra_env) as stack:
            yield stack, redis
    finally:
        if redis is not None:
            redis.terminate()
        if keep:
            print(f"kept {root} (the stack's logs in {root / 'stack'})")
        else:
            shutil.rmtree(root, ignore_errors=True)


def events_source(
    stack: RefreshStack, *, properties: dict[str, str] | None = None
) -> tuple[Any, Any, Any]:
    """The stack's Iceberg REST catalog (pyiceberg), with the namespace NS and a new source
    table NS.events (id bigint, k string, v double, none of them null) that has
    `properties`: (the catalog, the table's Arrow schema, the table)."""
    import pyarrow as pa
    from pyiceberg.catalog.rest import RestCatalog

    catalog = RestCatalog("lv", uri=stack.server.iceberg_uri, credential=stack.server.credential)
    catalog.create_namespace(NS)
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("k", pa.string(), nullable=False),
            pa.field("v", pa.float64(), nullable=False),
        ]
    )
    events = catalog.create_table(f"{NS}.events", schema=schema, properties=properties or {})
    return catalog, schema, events

"""The test suite. DATABASE_URL picks SQLite (default) or the throwaway PostgreSQL that
`make test` starts; the warehouse is a temporary folder each test session sets."""

from webapp.settings.base import *  # noqa: F403

DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
CELERY_TASK_ALWAYS_EAGER = False
# Integration tests run no worker: views keep sqlglot's types without asking for one
# (tests/spark runs the app with workers, where Spark types them).
VIEW_TYPES_FROM_SPARK = False
# A machine running the tests may have little disk left: the floor at which writing work
# stops is low here (tests/integration/test_disk_floor.py sets its own).
WAREHOUSE_MIN_FREE_BYTES = 64 << 20
# Lineage events only where a test turns them on (tests/integration/test_lineage_events.py),
# whatever the machine's OPENLINEAGE_* variables say.
OPENLINEAGE_ENABLED = False
# Access events are recorded where a test turns them on (tests/integration/
# test_access_events.py): tests that count a request's queries or the rows a request
# changes stay as they were. The hooks' own code still runs up to the recording. When on,
# each is written at once, in the request's own transaction: no flusher thread holds a
# database connection past a test (tests/integration/test_access_log.py runs one).
AUDIT_READS = False
AUDIT_READS_FLUSH_SECONDS = 0

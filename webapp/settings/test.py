"""The test suite. DATABASE_URL picks SQLite (default) or the throwaway PostgreSQL that
`make test` starts; the warehouse is a temporary folder each test session sets."""

from webapp.settings.base import *  # noqa: F403

DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
CELERY_TASK_ALWAYS_EAGER = False
# Integration tests run no worker: views keep sqlglot's types without asking for one
# (tests/spark runs the app with workers, where Spark types them).
VIEW_TYPES_FROM_SPARK = False

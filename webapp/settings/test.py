"""The test suite. DATABASE_URL picks SQLite (default) or the throwaway PostgreSQL that
`make test` starts; the warehouse is a temporary folder each test session sets."""

from webapp.settings.base import *  # noqa: F403

DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
CELERY_TASK_ALWAYS_EAGER = False

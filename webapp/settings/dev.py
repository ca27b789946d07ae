"""Local development: `make run`. SQLite, a warehouse folder under var/, local Redis."""

from webapp.settings.base import *  # noqa: F403
from webapp.settings.base import env

DEBUG = env("DEBUG", "1") == "1"

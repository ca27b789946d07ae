"""WSGI entry point for gunicorn."""

import gc
import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings.prod")

application = get_wsgi_application()

# Import every view now (the URLconf is otherwise loaded by the first request), then move
# what start-up built (Django, pyiceberg, pyarrow, sqlglot: about 200,000 objects, all kept
# for the life of the process) out of the garbage collector's reach. A full collection
# otherwise walks them all every so often in the middle of some request: 20-100 ms added to
# one request in twenty (bench/pages.py measures p95).
get_resolver().url_patterns  # noqa: B018 - the import is the point
gc.freeze()

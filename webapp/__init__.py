"""The project shell: settings, URL conf, WSGI and the Celery app."""

# Load the Celery app whenever Django starts, so that @shared_task binds to it.
from webapp.celery import app as celery_app

__all__ = ["celery_app"]

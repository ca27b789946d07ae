"""The Celery application: Redis broker, tasks discovered in the installed apps."""

import os
import time

from celery import Celery
from celery.signals import before_task_publish

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings.dev")

app = Celery("webapp")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@before_task_publish.connect
def _stamp_ticks(sender: str | None = None, headers: dict | None = None, **_: object) -> None:
    """A scheduled refresh says when it was sent (celery-beat sends it at its tick): the run
    is made for that tick however long the message then waits for a worker
    (refresh.runner.run_scheduled), so no late tick is merged into the next one unseen."""
    if sender == "refresh.scheduled_refresh" and headers is not None:
        headers.setdefault("lakeview_sent_at", time.time())

"""A gunicorn worker loads at start what its first requests would otherwise load while
holding Python's lock (webapp.warmup, called by webapp/gunicorn.conf.py's
post_worker_init): the URLconf with its reverse lookups, Celery's result backend and a
broker connection. Each case runs in a fresh interpreter, as a new worker process is."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from django.conf import settings

from tests.live_server import REPO_ROOT

PROBE = textwrap.dedent(
    """
    import sys, django
    django.setup()
    from django.urls import get_resolver
    from webapp.warmup import warm
    before = "catalog.api.urls" in sys.modules
    warm()
    api = get_resolver().namespace_dict["api"][1]
    from celery import current_app
    print("before", before)
    print("urls", "catalog.api.urls" in sys.modules, api._populated)
    print("backend", "celery.backends.redis" in sys.modules)
    with current_app.producer_or_acquire() as producer:
        print("connected", producer.connection.connected)
    """
)


def probe(redis_url: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=REPO_ROOT,
        env={
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "webapp.settings.test",
            "REDIS_URL": redis_url,
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def test_a_new_web_process_loads_the_urls_and_the_task_queue_before_its_first_request():
    out = probe(settings.REDIS_URL)
    assert "before False" in out
    assert "urls True True" in out
    assert "backend True" in out
    assert "connected True" in out
    assert "could not be reached" not in out


def test_a_task_queue_that_cannot_be_reached_at_start_is_logged_and_the_process_starts():
    out = probe("redis://127.0.0.1:1/0")
    assert "urls True True" in out
    assert "The task queue could not be reached at start" in out

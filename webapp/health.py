"""Health endpoints for load balancers, compose and Kubernetes: no sign-in, no secrets.

- `GET /healthz`: the process answers (liveness). It touches neither the database nor
  Redis, so a slow database never gets healthy web processes restarted.
- `GET /readyz`: what serving needs: the database, the broker (Redis), at least one live
  Celery worker (its heartbeat, catalog.workers), and a live streaming host when active
  continuous materialized tables exist. JSON names each check with its outcome and its
  time in milliseconds; 503 when one fails. A failure is described in fixed words and the
  error's class name, never the error's text (which may hold a host name or a user).

`HealthMiddleware` answers both paths first in MIDDLEWARE: before the host check
(ALLOWED_HOSTS: a Kubernetes probe asks by the pod's IP address, compose's by localhost),
sessions, CSRF and the login redirect of pages, none of which a probe should meet."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse

from catalog import workers
from infra.broker import redis_client
from refresh import stream_hosts

logger = logging.getLogger(__name__)

#: A check returns None when it passes, or why it fails (fixed words); an exception fails it.
Check = Callable[[], str | None]


def database() -> str | None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return None


def broker() -> str | None:
    redis_client().ping()
    return None


def worker() -> str | None:
    if workers.alive():
        return None
    return f"no worker said it was alive in the last {settings.WORKER_SILENT_AFTER_SECONDS} s"


def streams() -> str | None:
    if stream_hosts.streams_served():
        return None
    return "continuous tables are active and no streaming host is live"


#: In the order they run and are listed.
CHECKS: dict[str, Check] = {
    "database": database,
    "broker": broker,
    "workers": worker,
    "streams": streams,
}


def run_checks() -> tuple[bool, dict[str, dict[str, object]]]:
    results: dict[str, dict[str, object]] = {}
    for name, check in CHECKS.items():
        started = time.perf_counter()
        try:
            failure = check()
        except Exception as error:  # noqa: BLE001 - a failing dependency is an answer here
            logger.warning("Readiness check %s failed: %s: %s", name, type(error).__name__, error)
            failure = f"failed ({type(error).__name__})"
        result: dict[str, object] = {
            "ok": failure is None,
            "ms": round((time.perf_counter() - started) * 1000, 1),
        }
        if failure is not None:
            result["error"] = failure
        results[name] = result
    return all(result["ok"] for result in results.values()), results


def _answer(body: dict[str, object], status: int = 200) -> JsonResponse:
    response = JsonResponse(body, status=status)
    response["Cache-Control"] = "no-store"
    return response


def healthz(request: HttpRequest) -> HttpResponse:
    return _answer({"status": "ok"})


def readyz(request: HttpRequest) -> HttpResponse:
    ready, checks = run_checks()
    response = _answer(
        {"status": "ok" if ready else "failing", "checks": checks}, 200 if ready else 503
    )
    # A 503 here is an answer, not a server error: without this, Django logs an ERROR for
    # every poll of a load balancer while a worker is down (django.utils.log.log_response
    # skips responses so marked).
    response._has_been_logged = True  # type: ignore[attr-defined]
    return response


ENDPOINTS: dict[str, Callable[[HttpRequest], HttpResponse]] = {
    "/healthz": healthz,
    "/readyz": readyz,
}


class HealthMiddleware:
    """Answers /healthz and /readyz before any other middleware runs (see the module)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        endpoint = ENDPOINTS.get(request.path_info)
        if endpoint is None:
            return self.get_response(request)
        if request.method not in ("GET", "HEAD"):
            response = _answer({"error": "Only GET and HEAD", "type": "MethodNotAllowed"}, 405)
            response["Allow"] = "GET, HEAD"
            return response
        return endpoint(request)

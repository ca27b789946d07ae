"""Throttling failed sign-ins: the login page, the API's token endpoint and the engines'
OAuth token endpoint.

Each failure is a `FailedLogin` row keyed by a SHA-256 of the client's address and, apart,
of the account name it tried. After `LOGIN_FAILURES_ALLOWED` failures within
`LOGIN_FAILURE_WINDOW_SECONDS` for either key, further attempts are refused with 429 before
any password is checked, until the window has passed. Rows live in the database, so every
server process and worker sees the same counts."""

from __future__ import annotations

import hashlib
from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.http import HttpRequest
from django.utils import timezone

from catalog.models import FailedLogin


def _allowed() -> int:
    return int(getattr(settings, "LOGIN_FAILURES_ALLOWED", 10))


def _window() -> timedelta:
    return timedelta(seconds=int(getattr(settings, "LOGIN_FAILURE_WINDOW_SECONDS", 300)))


def _keys(request: HttpRequest, account: str) -> list[str]:
    address = request.META.get("REMOTE_ADDR", "")
    values = [f"address:{address}"] + ([f"account:{account}"] if account else [])
    return [hashlib.sha256(v.encode("utf-8", "replace")).hexdigest() for v in values]


def retry_after(request: HttpRequest, *, scope: str, account: str = "") -> int:
    """Seconds until this address or account may try again; 0 when it may try now."""
    since = timezone.now() - _window()
    recent = FailedLogin.objects.filter(scope=scope, at__gt=since)
    for key in _keys(request, account):
        failures = recent.filter(key=key).order_by("-at").values_list("at", flat=True)
        if len(failures[: _allowed()]) >= _allowed():
            oldest = failures[_allowed() - 1]
            return max(1, int((oldest + _window() - timezone.now()).total_seconds()) + 1)
    return 0


def record_failure(request: HttpRequest, *, scope: str, account: str = "") -> None:
    now = timezone.now()
    FailedLogin.objects.bulk_create(
        FailedLogin(scope=scope, key=key, at=now) for key in _keys(request, account)
    )
    # Rows older than the window count for nothing: drop them now and then.
    FailedLogin.objects.filter(Q(at__lt=now - _window() * 2)).delete()


def message(seconds: int) -> str:
    return f"Too many failed sign-ins; try again in {seconds} seconds"

"""Throttling failed sign-ins: the login page, the API's token endpoint and the engines'
OAuth token endpoint.

Each failure is a `FailedLogin` row per key: a SHA-256 of the client's address and, apart,
of the account it tried (a user name at the login page and /api/token/, which check the same
passwords; a client id at the OAuth endpoint). The three doors share one count: failures at
one count at the others, so an address gets `LOGIN_FAILURES_ALLOWED` guesses in all, not
that many per door. After that many failures within `LOGIN_FAILURE_WINDOW_SECONDS` for
either key, further attempts are refused with 429 before any password is checked, until the
window has passed. Rows live in the database, so every server process and worker sees the
same counts. A success clears nothing: failures from other addresses, or for the account
elsewhere, still count."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from catalog.models import FailedLogin

#: The doors (`FailedLogin.scope`), and what kind of account each one checks.
ACCOUNT_KINDS = {"page": "user", "api": "user", "oauth": "client"}


def _allowed() -> int:
    return max(1, int(getattr(settings, "LOGIN_FAILURES_ALLOWED", 10)))


def _window() -> timedelta:
    return timedelta(seconds=int(getattr(settings, "LOGIN_FAILURE_WINDOW_SECONDS", 300)))


def _keys(request: HttpRequest, scope: str, account: str) -> list[str]:
    address = request.META.get("REMOTE_ADDR", "")
    values = [f"address:{address}"]
    if account:
        values.append(f"{ACCOUNT_KINDS[scope]}:{account}")
    # "replace": a user name may hold lone surrogates (JSON's "\ud800"); the key must not fail.
    return [hashlib.sha256(v.encode("utf-8", "replace")).hexdigest() for v in values]


def retry_after(request: HttpRequest, *, scope: str, account: str = "") -> int:
    """Seconds until this address or account may try again; 0 when it may try now."""
    allowed, window = _allowed(), _window()
    now = timezone.now()
    # Every door's rows (scope__in keeps the (scope, key, at) index usable).
    recent = FailedLogin.objects.filter(scope__in=ACCOUNT_KINDS, at__gt=now - window)
    waits = []
    for key in _keys(request, scope, account):
        latest = list(recent.filter(key=key).order_by("-at").values_list("at", flat=True)[:allowed])
        if len(latest) >= allowed:
            # The window frees a slot when the oldest of the last `allowed` failures leaves it.
            waits.append(max(1, int((latest[-1] + window - now).total_seconds()) + 1))
    return max(waits, default=0)


def record_failure(request: HttpRequest, *, scope: str, account: str = "") -> None:
    now = timezone.now()
    FailedLogin.objects.bulk_create(
        FailedLogin(scope=scope, key=key, at=now) for key in _keys(request, scope, account)
    )
    # Rows older than the window count for nothing: drop them while we are here, so the
    # table stays small without a scheduled job.
    FailedLogin.objects.filter(at__lt=now - _window()).delete()


def message(seconds: int) -> str:
    return f"Too many failed sign-ins; try again in {seconds} seconds"


# -- the login page -------------------------------------------------------------------------


class _ThrottledForm(AuthenticationForm):
    """The login form of a throttled attempt: its fields are read (so the page shows what was
    typed) but `clean` refuses instead of calling `authenticate`, which would check the
    password and so keep answering a guesser."""

    def __init__(self, *args: Any, wait: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.wait = wait

    def clean(self) -> dict[str, Any]:
        raise ValidationError(message(self.wait), code="throttled")


def _username(request: HttpRequest) -> str:
    return request.POST.get("username", "")[:255]


class ThrottledLoginView(LoginView):
    """Django's login page, refusing with 429 (the form shows why) past the limit, and
    counting every refused password."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        wait = retry_after(request, scope="page", account=_username(request))
        if not wait:
            return super().post(request, *args, **kwargs)
        form = _ThrottledForm(wait=wait, **self.get_form_kwargs())
        form.is_valid()  # runs the refusing clean(): the message becomes the form's error
        response = self.render_to_response(self.get_context_data(form=form))
        response.status_code = 429
        response["Retry-After"] = str(wait)
        return response

    def form_invalid(self, form: AuthenticationForm) -> HttpResponse:
        record_failure(self.request, scope="page", account=_username(self.request))
        return super().form_invalid(form)

"""Throttling failed sign-ins at the three doors: the login page (and the admin site's
login, `admin_login`), the API's token endpoint (all check a user name's password, and count
as one) and the engines' OAuth token endpoint (a client id's secret).

The rule is that failures lock out what failed, never bystanders: one engine with a stale
secret, or one person guessing, behind the same proxy or NAT as everyone else, must not shut
the others out. The client's address is the one infra/proxies.py decided (the socket's, or
the client a trusted proxy relayed). Each failure is a `FailedLogin` row holding SHA-256s of
its account and its address (never the name or the address themselves).

**An account's failures slow that account** (a user name, from any address, so that guesses
spread over many addresses are slowed too). Like Keycloak's brute force detection (a wait
that grows, "max wait", "failure reset time") rather than a lock: up to
LOGIN_FAILURES_ALLOWED failures (10) cost nothing; after the n-th failure beyond them the
account waits 2^n seconds (2, 4, 8, ...) counted from that failure, at most
LOGIN_FAILURE_DELAY_MAX_SECONDS (900). While it waits, its sign-ins are refused with 429 and
Retry-After *without the password being checked*, and are not counted: hammering does not
lengthen the wait. Once the wait is over the next sign-in is checked, and a right password
gets in. Failures older than LOGIN_FAILURE_WINDOW_SECONDS (12 hours) are forgotten; the
window must be long next to the longest wait, or a guesser patient enough to wait it would
find its count forgotten and its guesses free again (at one guess per 900 s, 12 hours keep 48
of them). A success forgets that account's failures from that address (its own typos), not
those from elsewhere. What an attacker who knows a user name can do is make that user wait:
at most the longest wait after each of its own guesses, never for good, and it pays one
guess per wait to keep it up.

**Why the password is not checked during the wait.** Answering "wrong" with 429 but "right"
with a token would tell a guesser, at full speed, whether each guess is right: the wait
would slow nothing. So during the wait every answer is the same 429, whatever was sent.

**An engine's client id** is throttled by the same count, but its secret is checked even
during the wait, and a right secret always gets its token; a wrong one sent during the wait
is answered 429 (`slow_down`) instead of 401. A client secret is 256 random bits made by
the app (catalog/services/credentials.py): no guesser can find one however fast it is answered,
so the check tells it nothing, and refusing right secrets would only let a stale copy of a
credential, or anyone who learned a client id, keep every job using it from its token.

**An address is throttled only for a spray**: failures over LOGIN_SPRAY_ACCOUNTS (10)
different user names within the window. Failures of one account, however many (an engine's
11 retries), never throttle its address. Even then, a right password for a user name that
has not failed from that address gets in: the people behind the same proxy or NAT as a
guesser are not refused for its guesses. What the address's throttle refuses, without
checking, is a user name that *has* failed from it, for a wait that grows with the number of
user names failed from there (2^k seconds after its latest failure, k the names beyond the
limit, at most the longest wait). So a guesser at one address gets one guess per user name,
not LOGIN_FAILURES_ALLOWED of them, and its second guess at a name waits, as all its
guesses keep the address's clock going. That first guess cannot be refused without refusing
the same right password from the guesser's neighbours, and the answer to it is the usual
one: it is no oracle beyond what any sign-in answers. A neighbour who mistyped from the same
address waits with the guesser's address, as long as its spray goes on.

Client ids do not count toward a spray: their secrets cannot be guessed, and one machine
running many engines with stale credentials is not an attack.

**Races.** A user's sign-in that is to be checked is recorded as a failure before its
password is checked, and the row deleted if it was right, so that concurrent guesses see
each other instead of all passing the same check of the count; only what arrives within
one insert of each other can slip through together.

**Bounds.** Rows live in the database (every process sees the same counts). Each failure
deletes the rows older than the window, an account's rows beyond the newest few its wait can
still depend on, and every row but the newest MAX_ROWS. Each attempt reads a bounded number
of rows through the (account, at) and (address, at) indexes."""

from __future__ import annotations

import functools
import hashlib
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView
from django.core.exceptions import ValidationError
from django.db.models import Max
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from catalog.models import FailedLogin
from infra.proxies import client_address

logger = logging.getLogger(__name__)

#: The doors (`FailedLogin.scope`), and what kind of account each one checks.
ACCOUNT_KINDS = {"page": "user", "api": "user", "oauth": "client"}
USER_DOORS = ("page", "api")
#: The first wait past the allowed failures; each further failure doubles it.
FIRST_WAIT_SECONDS = 2
#: The most rows kept, whatever the window: the oldest go first.
MAX_ROWS = 100_000


def _setting(name: str, default: int) -> int:
    return int(getattr(settings, name, default))


def _allowed() -> int:
    return max(1, _setting("LOGIN_FAILURES_ALLOWED", 10))


def _spray_accounts() -> int:
    return max(2, _setting("LOGIN_SPRAY_ACCOUNTS", 10))


def _longest_wait() -> int:
    return max(1, _setting("LOGIN_FAILURE_DELAY_MAX_SECONDS", 900))


def _window() -> timedelta:
    return timedelta(seconds=_setting("LOGIN_FAILURE_WINDOW_SECONDS", 12 * 3600))


def _doublings() -> int:
    """How many failures past the limit reach the longest wait: counting further ones
    changes nothing, so no more rows than that are read or kept."""
    return (_longest_wait() // FIRST_WAIT_SECONDS).bit_length() + 1


def wait_after(failures: int, allowed: int) -> int:
    """Seconds to wait after the `failures`-th failure (of an account, or of user names at
    an address) when `allowed` are free: 0, then 2, 4, 8... up to the longest wait."""
    if failures < allowed:
        return 0
    return min(FIRST_WAIT_SECONDS << min(failures - allowed, 40), _longest_wait())


def _until(moment: datetime, now: datetime) -> int:
    """Whole seconds from now to `moment`, rounded up; 0 when it has passed."""
    seconds = (moment - now).total_seconds()
    return math.ceil(seconds) if seconds > 0 else 0


def _hash(value: str) -> str:
    # "replace": a user name may hold lone surrogates (JSON's "\ud800"); the key must not fail.
    return hashlib.sha256(value.encode("utf-8", "replace")).hexdigest()


@dataclass
class Attempt:
    """One sign-in at a door, and what the throttle decided before its password was
    checked."""

    door: str
    name: str
    address: str
    account_key: str
    address_key: str
    #: > 0: refused unchecked, for this many seconds (users only).
    refused: int = 0
    #: The account's own wait when the attempt came (an engine's wrong secret is told it).
    due: int = 0
    #: The account had failures to forget on a success.
    had_failures: bool = False
    #: The failure recorded ahead of a user's password check (deleted if it was right).
    row: int | None = None

    @property
    def engine(self) -> bool:
        return ACCOUNT_KINDS[self.door] == "client"

    def described(self) -> str:
        # A user name is not logged: people type their password into it.
        return f"client id {self.name!r}" if self.engine else "a user name"


def _account_wait(attempt: Attempt, now: datetime) -> tuple[int, bool]:
    """(seconds the account still waits, whether it has failures at all)."""
    allowed = _allowed()
    latest = list(
        FailedLogin.objects.filter(account=attempt.account_key, at__gt=now - _window())
        .order_by("-at")
        .values_list("at", flat=True)[: allowed + _doublings()]
    )
    if len(latest) < allowed:
        return 0, bool(latest)
    return _until(latest[0] + timedelta(seconds=wait_after(len(latest), allowed)), now), True


def _spray_wait(attempt: Attempt, now: datetime) -> int:
    """Seconds this user name still waits at this address for the address's spray: 0 unless
    failures from the address span enough user names and this is one of them."""
    limit = _spray_accounts()
    recent = FailedLogin.objects.filter(
        address=attempt.address_key, scope__in=USER_DOORS, at__gt=now - _window()
    )
    names = list(
        recent.values("account")
        .annotate(latest=Max("at"))
        .order_by("-latest")
        .values_list("latest", flat=True)[: limit + _doublings()]
    )
    if len(names) < limit or not recent.filter(account=attempt.account_key).exists():
        return 0
    return _until(names[0] + timedelta(seconds=wait_after(len(names), limit)), now)


def attempt(request: HttpRequest, *, door: str, account: str) -> Attempt:
    """What the throttle says of a sign-in before its password or secret is checked:
    `refused` > 0 means answer 429 with that Retry-After and check nothing."""
    address = client_address(request)
    tried = Attempt(
        door=door,
        name=account,
        address=address,
        account_key=_hash(f"{ACCOUNT_KINDS[door]}:{account}"),
        address_key=_hash(f"address:{address}"),
    )
    if not account:  # nothing will be checked: the form or serializer refuses it
        return tried
    now = timezone.now()
    tried.due, tried.had_failures = _account_wait(tried, now)
    if tried.engine:
        return tried
    tried.refused = max(tried.due, _spray_wait(tried, now))
    if tried.refused:
        logger.info(
            "Sign-in from %s refused unchecked for %ss: %s failed too often",
            address,
            tried.refused,
            tried.described(),
        )
        return tried
    tried.row = FailedLogin.objects.create(
        scope=door, account=tried.account_key, address=tried.address_key, at=now
    ).pk
    return tried


def failed(tried: Attempt) -> int:
    """Records a refused password or secret. Returns the seconds to answer 429 with (an
    engine's wrong secret sent during its client id's wait: how long the wait now is);
    0: the usual failure answer."""
    if not tried.name:
        return 0
    now = timezone.now()
    row = tried.row
    if row is None:
        row = FailedLogin.objects.create(
            scope=tried.door, account=tried.account_key, address=tried.address_key, at=now
        ).pk
    _prune(tried, now, newest=row)
    if not (tried.engine and tried.due):
        return 0
    wait = max(1, _account_wait(tried, now)[0])
    logger.info(
        "Wrong secret for %s from %s during its wait: %ss", tried.described(), tried.address, wait
    )
    return wait


def succeeded(tried: Attempt) -> None:
    """A right password or secret: the account's failures from this address (its own
    typos, and the row recorded ahead of the check) are forgotten."""
    if tried.row is not None or tried.had_failures:
        FailedLogin.objects.filter(account=tried.account_key, address=tried.address_key).delete()


def _prune(tried: Attempt, now: datetime, *, newest: int) -> None:
    FailedLogin.objects.filter(at__lte=now - _window()).delete()
    # An account's wait depends on its newest few failures only.
    keep = _allowed() + _doublings()
    oldest_kept = list(
        FailedLogin.objects.filter(account=tried.account_key)
        .order_by("-at", "-pk")
        .values_list("at", flat=True)[keep - 1 : keep]
    )
    if oldest_kept:
        FailedLogin.objects.filter(account=tried.account_key, at__lt=oldest_kept[0]).delete()
    FailedLogin.objects.filter(pk__lte=newest - MAX_ROWS).delete()


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
    """Django's login page, refusing with 429 (the form shows why) while the user name, or
    the address for that user name, waits, and counting every refused password."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        self.attempt = attempt(request, door="page", account=_username(request))
        if not self.attempt.refused:
            return super().post(request, *args, **kwargs)
        wait = self.attempt.refused
        form = _ThrottledForm(wait=wait, **self.get_form_kwargs())
        form.is_valid()  # runs the refusing clean(): the message becomes the form's error
        response = self.render_to_response(self.get_context_data(form=form))
        response.status_code = 429
        response["Retry-After"] = str(wait)
        return response

    def form_valid(self, form: AuthenticationForm) -> HttpResponse:
        succeeded(self.attempt)
        return super().form_valid(form)

    def form_invalid(self, form: AuthenticationForm) -> HttpResponse:
        failed(self.attempt)
        return super().form_invalid(form)


def admin_login(login: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """The admin site's own login page (`admin.site.login`) behind the same throttle, as the
    login page's door: it checks the same passwords, and would otherwise be a door where
    guesses are free. A refused attempt is a plain 429 that says how long to wait."""

    @functools.wraps(login)
    def view(request: HttpRequest, extra_context: dict | None = None) -> HttpResponse:
        if request.method != "POST":
            return login(request, extra_context)
        tried = attempt(request, door="page", account=_username(request))
        if tried.refused:
            response = HttpResponse(
                message(tried.refused), status=429, content_type="text/plain; charset=utf-8"
            )
            response["Retry-After"] = str(tried.refused)
            return response
        response = login(request, extra_context)
        # Signed in: the admin's LoginView redirected after auth_login set the user.
        if response.status_code == 302 and request.user.is_authenticated:
            succeeded(tried)
        else:
            failed(tried)
        return response

    return view

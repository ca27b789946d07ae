"""`Idempotency-Key` on the Iceberg REST catalog's mutating endpoints (Iceberg 1.10
open-api/rest-catalog-open-api.yaml, `components/parameters/idempotency-key`).

A client that sends a key and loses the answer (a timeout, a dropped connection) sends the
same request again with the same key, and gets the first answer instead of a second commit,
an "already exists" or a 409 of its own first attempt. The rules, as the spec has them:

- A key is a UUID in its 36-character form (the spec asks clients for UUIDv7; any version
  is accepted, case-insensitively). Anything else is a 400.
- It belongs to its principal (the user, through one client): another principal's request
  with the same key is its own request.
- The same key with another request (method, path, query, canonical JSON body) is a 422.
- Answers finalized and replayed: 2xx and the deterministic 4xx (a 409 included). Not
  stored: 5xx (the state is unknown, a retry does the work), and the 4xx that depend on the
  moment rather than the request (401, 403, 408, 419, 429): the retry is asked again.
- A key answers for ICEBERG_IDEMPOTENCY_KEY_LIFETIME from its first use, which
  `GET /v1/config` advertises as `idempotency-key-lifetime`; older rows are deleted by the
  hourly token sweep (catalog.tasks.purge_expired_tokens).

How: the key's row is inserted first, in a transaction of its own, as a claim (no status)
under a unique constraint, so that every web process sees it. The work then runs in one
transaction with the write of its answer into that row: a committed change always has its
stored answer, and a request that fails leaves neither (its claim is removed, and a retry
does the work). A second request with the key while the first runs waits for the answer
(polling the row) for up to IN_PROGRESS_WAIT_SECONDS, then gets a 503 with Retry-After,
which the spec lets a client retry. A claim older than STALE_CLAIM_SECONDS belongs to a
process that died: another request takes it over, and the old holder, should it still be
alive, cannot write its answer (the update names its claim), so its work rolls back.

Requests without the header never reach this module (resource.py looks at META): they
cost nothing more."""

from __future__ import annotations

import hashlib
import json
import re
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from functools import lru_cache
from urllib.parse import parse_qsl

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import IntegrityError, transaction
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from catalog import access
from catalog.core.errors import CatalogError
from catalog.models import IdempotencyKey

#: The header as Django's META names it (reading META costs nothing; request.headers builds
#: a mapping of every header).
META_KEY = "HTTP_IDEMPOTENCY_KEY"

#: Statuses of answers that are not final: the retry is answered anew.
NOT_STORED = frozenset({401, 403, 408, 419, 429})
#: Headers of an answer that a replay gives again.
KEPT_HEADERS = ("Content-Type", "ETag")

#: How long a request waits for another one with its key to finish, polling its row.
IN_PROGRESS_WAIT_SECONDS = 10.0
POLL_SECONDS = 0.05
#: A claim this old is a dead process's (a request of the catalog takes seconds at most).
STALE_CLAIM_SECONDS = 600.0

_UUID = re.compile(r"^[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$")
_ISO_DURATION = re.compile(
    r"^P(?!$)(?:(?P<days>\d+)D)?"
    r"(?:T(?=\d)(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?$"
)


class InvalidKey(CatalogError):
    iceberg_type = "BadRequestException"
    status = 400


class KeyReused(CatalogError):
    iceberg_type = "UnprocessableEntityException"
    status = 422


class StillInProgress(CatalogError):
    """The spec's 503: a client may retry a non-idempotent request when Retry-After says
    when."""

    iceberg_type = "ServiceUnavailableException"
    status = 503
    retry_after = 1


@lru_cache(maxsize=4)
def parse_lifetime(text: str) -> timedelta:
    """An ISO-8601 duration of days, hours, minutes and seconds (PT30M, PT24H, P1DT12H):
    the forms a client's Duration.parse reads, without years or months, whose length
    varies."""
    match = _ISO_DURATION.match(text.strip().upper())
    if match is None:
        raise ImproperlyConfigured(
            f"ICEBERG_IDEMPOTENCY_KEY_LIFETIME must be an ISO-8601 duration such as PT30M "
            f"or PT24H, not {text!r}"
        )
    parts = {name: float(value) for name, value in match.groupdict().items() if value}
    lifetime = timedelta(**parts)
    if lifetime <= timedelta(0):
        raise ImproperlyConfigured("ICEBERG_IDEMPOTENCY_KEY_LIFETIME must be longer than zero")
    return lifetime


def lifetime() -> timedelta:
    return parse_lifetime(settings.ICEBERG_IDEMPOTENCY_KEY_LIFETIME)


def advertised_lifetime() -> str:
    """`idempotency-key-lifetime` of GET /v1/config (checked: a wrong setting fails here,
    not on a client's retry)."""
    lifetime()
    return settings.ICEBERG_IDEMPOTENCY_KEY_LIFETIME.strip().upper()


def parse_key(raw: str) -> uuid.UUID:
    """The header's UUID, or a 400 that says what a key must be."""
    text = raw.strip()
    if not _UUID.match(text):
        shown = text[:60] + ("..." if len(text) > 60 else "")
        raise InvalidKey(
            f"Invalid Idempotency-Key {shown!r}: it must be a UUID in its 36-character "
            "form (a UUIDv7, e.g. 017f22e2-79b0-7cc3-98c4-dc0c0c07398f)"
        )
    return uuid.UUID(text)


def fingerprint(request: HttpRequest) -> str:
    """What makes two requests the same: method, path, query and body. A JSON body is
    compared in a canonical form (keys sorted, no spaces), so that a retry serialized with
    another key order is the same request."""
    body: bytes = request.body
    try:
        canonical = json.dumps(
            json.loads(body), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        ).encode()
    except (ValueError, UnicodeDecodeError):
        canonical = body  # not JSON: the handler refuses it, and a retry byte for byte alike
    query = sorted(parse_qsl(request.META.get("QUERY_STRING", ""), keep_blank_values=True))
    digest = hashlib.sha256()
    for part in (request.method or "", request.path, json.dumps(query)):
        digest.update(part.encode() + b"\x00")
    digest.update(canonical)
    return digest.hexdigest()


def stored(status: int) -> bool:
    """Whether an answer with this status is final for its key (the spec's rules)."""
    return 200 <= status < 300 or (400 <= status < 500 and status not in NOT_STORED)


def replay(row: IdempotencyKey) -> HttpResponse:
    response = HttpResponse(bytes(row.body), status=row.status)
    for name, value in row.headers.items():
        response[name] = value
    return response


def respond(request: HttpRequest, answer: Callable[[], HttpResponse]) -> HttpResponse:
    """The answer to a request carrying an Idempotency-Key: the stored one when its key has
    one, else `answer()` (the handler, with its CatalogErrors as error responses), done in
    one transaction with the storing of what it answered."""
    key = parse_key(request.META[META_KEY])
    principal = access.principal_of(request)
    if principal.client is None:  # not an engine's credential: nothing to scope a key by
        return answer()
    scope = {"user_id": principal.user.pk, "client_id": principal.client.pk, "key": key}
    digest = fingerprint(request)
    claimed = _claim(scope, digest)
    if isinstance(claimed, HttpResponse):
        return claimed
    try:
        with transaction.atomic():
            response = answer()
            mine = IdempotencyKey.objects.filter(claim=claimed, status__isnull=True, **scope)
            if stored(response.status_code):
                headers = {h: response[h] for h in KEPT_HEADERS if response.has_header(h)}
                body = b"" if response.streaming else response.content
                done = mine.update(status=response.status_code, headers=headers, body=body)
                if done != 1:
                    # Taken over as stale while this request ran: the other request answers
                    # for the key, and this one's work must not count.
                    raise _ClaimLost
            else:
                mine.delete()
    except _ClaimLost:
        raise StillInProgress(
            "Another request with this Idempotency-Key took it over; retry it"
        ) from None
    except BaseException:
        # The work rolled back: a retry must do it again.
        IdempotencyKey.objects.filter(claim=claimed, status__isnull=True, **scope).delete()
        raise
    return response


class _ClaimLost(Exception):
    pass


def _claim(scope: dict, digest: str) -> uuid.UUID | HttpResponse:
    """Claim the key for this request (its claim's UUID), or the answer a request with the
    key gave (waiting for it while it runs)."""
    deadline = time.monotonic() + IN_PROGRESS_WAIT_SECONDS
    claim = uuid.uuid4()
    while True:
        now = timezone.now()
        try:
            with transaction.atomic():
                IdempotencyKey.objects.create(
                    fingerprint=digest,
                    claim=claim,
                    claimed_at=now,
                    expires_at=now + lifetime(),
                    **scope,
                )
            return claim
        except IntegrityError:
            pass
        row = IdempotencyKey.objects.filter(**scope).first()
        if row is None:
            continue  # finished and released (or swept) meanwhile: claim it again
        if row.expires_at <= now:
            # Past its lifetime, the key is free: the old row goes, whatever it held.
            IdempotencyKey.objects.filter(pk=row.pk, expires_at__lte=now).delete()
            continue
        if row.fingerprint != digest:
            raise KeyReused(
                f"Idempotency-Key {scope['key']} was used for a different request (another "
                "method, path or body); use a new key for a different operation"
            )
        if row.status is not None:
            return replay(row)
        if row.claimed_at <= now - timedelta(seconds=STALE_CLAIM_SECONDS):
            taken = IdempotencyKey.objects.filter(
                pk=row.pk, claim=row.claim, status__isnull=True
            ).update(claim=claim, claimed_at=now)
            if taken == 1:
                return claim
            continue
        if time.monotonic() >= deadline:
            raise StillInProgress(
                f"A request with Idempotency-Key {scope['key']} is still in progress; "
                "retry it with the same key later"
            )
        time.sleep(POLL_SECONDS)


def delete_expired() -> int:
    """Keys past their lifetime (the hourly sweep); how many were deleted."""
    deleted, _ = IdempotencyKey.objects.filter(expires_at__lte=timezone.now()).delete()
    return deleted

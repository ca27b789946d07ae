"""Webhook signatures: HMAC-SHA256 with the subscription's secret over `<timestamp>.<body>`,
sent as `X-Lakeview-Signature: t=<timestamp>,v1=<hex>` (Stripe's scheme). The timestamp is
signed with the body, so a receiver that refuses old timestamps cannot be fed a replay."""

from __future__ import annotations

import hashlib
import hmac
import secrets

HEADER = "X-Lakeview-Signature"
#: A receiver should refuse a signature older (or newer) than this many seconds.
TOLERANCE_SECONDS = 300


def new_secret() -> str:
    """A subscription's signing secret: 256 random bits."""
    return "whsec_" + secrets.token_urlsafe(32)


def signature(secret: str, timestamp: int, body: bytes) -> str:
    signed = str(int(timestamp)).encode() + b"." + body
    return hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def header(secret: str, timestamp: int, body: bytes) -> str:
    """The value of the signature header for `body` sent at `timestamp` (Unix seconds)."""
    return f"t={int(timestamp)},v1={signature(secret, timestamp, body)}"


def verify(
    secret: str, value: str, body: bytes, *, now: float, tolerance: float = TOLERANCE_SECONDS
) -> bool:
    """Whether `value` (the header) signs `body` with `secret` at a time within `tolerance`
    seconds of `now`: what a receiver checks."""
    parts: dict[str, list[str]] = {}
    for item in value.split(","):
        key, _, part = item.strip().partition("=")
        parts.setdefault(key, []).append(part)
    stamps = parts.get("t", [])
    if len(stamps) != 1 or not stamps[0].isascii() or not stamps[0].isdigit():
        return False
    timestamp = int(stamps[0])
    if abs(now - timestamp) > tolerance:
        return False
    expected = signature(secret, timestamp, body)
    return any(hmac.compare_digest(expected, given) for given in parts.get("v1", []))

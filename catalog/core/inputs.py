"""Rules for what users type: object and namespace names, property changes.

One place for each rule, used by the services (and so by pages, the API and the Iceberg
REST protocol alike)."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping, Sequence

from catalog.core.errors import InvalidInput

NAME_LIMIT = 255
NAMESPACE_LIMIT = 1024
# Iceberg accepts any text in a name; these three would break what names are joined into:
# "." joins namespace levels (and a namespace to a name), "/" separates folders, and the
# unit separator joins levels in the REST protocol's URLs.
_FORBIDDEN = {".": "'.'", "/": "'/'", "\x1f": "the unit separator"}


def check_name(value: str, *, field: str = "name", what: str = "name") -> str:
    """A name as Iceberg accepts it: any Unicode text (`vue_été`, `日本`, `2024_sales`),
    without NUL or control characters, '.', '/', at most NAME_LIMIT characters."""
    if not isinstance(value, str):
        raise InvalidInput(f"Invalid {what}: a name is text", field=field)
    value = value.strip()
    if not value:
        raise InvalidInput(f"A {what} is required", field=field)
    if len(value) > NAME_LIMIT:
        raise InvalidInput(
            f"Invalid {what} {value[:40]!r}...: at most {NAME_LIMIT} characters", field=field
        )
    for character, label in _FORBIDDEN.items():
        if character in value:
            raise InvalidInput(
                f"Invalid {what} {value[:100]!r}: {label} is not allowed", field=field
            )
    if any(unicodedata.category(c) == "Cc" for c in value):
        raise InvalidInput(
            f"Invalid {what} {value[:100]!r}: control characters (NUL included) are not allowed",
            field=field,
        )
    return value


def whole_number(text: str, *, digits: int = 19, signed: bool = False) -> int | None:
    """`text` as an int when it is a whole number in ASCII digits (a leading '-' too when
    `signed`), of at most `digits` digits; else None. `str.isdigit` is no such check: it
    takes '²', which int() refuses (a ValueError, a 500 where it was trusted), and other
    scripts' digits; and int() refuses a text of over 4,300 digits."""
    body = text[1:] if signed and text.startswith("-") else text
    if not body or not body.isascii() or not body.isdigit() or len(body) > digits:
        return None
    return int(text)


def folder_name(name: str) -> str:
    """A name as one folder name that no filesystem layer reads as anything else: letters
    (any script), digits, '_' and '-' are kept, every other character becomes ~XX (its
    UTF-8 bytes in hex), so that '%2e%2e', ' ' or '~' can never become a path of their own."""
    return "".join(
        c if (c.isalnum() or c in "_-") else "".join(f"~{byte:02X}" for byte in c.encode())
        for c in name
    )


def check_namespace_name(value: str | Sequence[str], *, field: str = "namespace") -> str:
    """A namespace's dotted name from "a.b" or ["a", "b"], every level checked."""
    levels = value.split(".") if isinstance(value, str) else list(value)
    if not all(isinstance(level, str) for level in levels):
        raise InvalidInput("A namespace is a list of names", field=field)
    if not levels or levels == [""]:
        raise InvalidInput("A namespace name is required", field=field)
    name = ".".join(check_name(level, field=field, what="namespace level") for level in levels)
    if len(name) > NAMESPACE_LIMIT:
        raise InvalidInput(f"A namespace name is at most {NAMESPACE_LIMIT} characters", field=field)
    return name


def check_property_changes(
    updates: Mapping[str, str] | None, removals: Iterable[str] | None
) -> tuple[dict[str, str], list[str]]:
    """Properties to set and to remove, as strings; a key may not be both, nor empty."""
    updates = {str(k): str(v) for k, v in (updates or {}).items()}
    removals = [str(key) for key in removals or []]
    if any(not key.strip() for key in updates):
        raise InvalidInput("A property name must not be empty", field="properties")
    overlap = set(updates) & set(removals)
    if overlap:
        raise InvalidInput(
            f"Properties both set and removed: {', '.join(sorted(overlap))}", field="properties"
        )
    return updates, removals


def check_document(document: object, *, max_depth: int) -> None:
    """Refuse a parsed JSON request body that nests deeper than `max_depth` or holds a NUL
    character in any key or string (databases refuse NUL; a deep document exhausts the
    parsers behind us). Iterative, so a hostile document cannot exhaust this check."""
    stack: list[tuple[object, int, str]] = [(document, 1, "body")]
    while stack:
        value, depth, where = stack.pop()
        if isinstance(value, str):
            if "\x00" in value:
                raise InvalidInput(f"Invalid request: NUL character in {where}")
            continue
        if not isinstance(value, dict | list):
            continue
        if depth > max_depth:
            raise InvalidInput(f"Invalid request: the body nests deeper than {max_depth} levels")
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if isinstance(key, str) and "\x00" in key:
                raise InvalidInput(f"Invalid request: NUL character in a key of {where}")
            stack.append((item, depth + 1, f"{where}.{key}"[:200]))

"""Rules for what users type: object and namespace names, property changes.

One place for each rule, used by the services (and so by pages, the API and the Iceberg
REST protocol alike)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from catalog.core.errors import InvalidInput

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]{0,127}$")


def check_name(value: str, *, field: str = "name", what: str = "name") -> str:
    value = (value or "").strip()
    if not _NAME.match(value):
        raise InvalidInput(
            f"Invalid {what} {value!r}: use letters, digits, '_' or '-', starting with a "
            "letter or '_' (at most 128 characters)",
            field=field,
        )
    return value


def check_namespace_name(value: str | Sequence[str], *, field: str = "namespace") -> str:
    """A namespace's dotted name from "a.b" or ["a", "b"], every level checked."""
    levels = value.split(".") if isinstance(value, str) else list(value)
    if not levels or levels == [""]:
        raise InvalidInput("A namespace name is required", field=field)
    return ".".join(check_name(level, field=field, what="namespace level") for level in levels)


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

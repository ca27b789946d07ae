"""Reading the protocol's requests: JSON bodies, identifiers, namespaces in URLs, paging.

Each reader checks the shape of one field and raises `InvalidInput` (a 400) naming it, so
that the endpoints and the services see only well-typed values."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest

from catalog.core.errors import InvalidInput
from catalog.core.inputs import check_document

# The protocol joins namespace levels with the unit separator in URLs.
LEVEL_SEPARATOR = "\x1f"


def body(request: HttpRequest) -> dict[str, Any]:
    """The request's JSON object, refused when it is too large (settings.
    DATA_UPLOAD_MAX_MEMORY_SIZE), too deep (settings.JSON_MAX_DEPTH) or holds NUL."""
    try:
        raw = request.body
    except RequestDataTooBig:
        raise InvalidInput("Invalid request: the body is too large") from None
    try:
        document = json.loads(raw or b"{}")
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        raise InvalidInput(f"Malformed request body: {str(error)[:200]}") from None
    if not isinstance(document, dict):
        raise InvalidInput("Malformed request body: expected a JSON object")
    check_document(document, max_depth=settings.JSON_MAX_DEPTH)
    return document


def required(document: dict[str, Any], key: str) -> Any:
    if key not in document or document[key] is None:
        raise InvalidInput(f"Invalid request: missing required field {key}")
    return document[key]


def obj(document: dict[str, Any], key: str, *, is_required: bool = False) -> dict[str, Any]:
    """A JSON object field (absent or null is {} unless required)."""
    value = required(document, key) if is_required else document.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInput(f"Invalid request: {key} must be a JSON object")
    return value


def string_map(document: dict[str, Any], key: str) -> dict[str, str]:
    value = obj(document, key)
    if not all(isinstance(v, str | int | float | bool) for v in value.values()):
        raise InvalidInput(f"Invalid request: {key} must map strings to strings")
    return {str(k): str(v) for k, v in value.items()}


def objects(document: dict[str, Any], key: str, *, is_required: bool = False) -> list[dict]:
    """A list of JSON objects (absent or null is [] unless required)."""
    value = required(document, key) if is_required else document.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise InvalidInput(f"Invalid request: {key} must be a list of JSON objects")
    return value


def strings(document: dict[str, Any], key: str) -> list[str]:
    value = document.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InvalidInput(f"Invalid request: {key} must be a list of strings")
    return value


def string(document: dict[str, Any], key: str, *, is_required: bool = False) -> str | None:
    value = required(document, key) if is_required else document.get(key)
    if value is not None and not isinstance(value, str):
        raise InvalidInput(f"Invalid request: {key} must be a string")
    return value


def namespace_name(encoded: str) -> str:
    """The URL's namespace (levels joined by the unit separator) as our dotted name."""
    levels = encoded.split(LEVEL_SEPARATOR)
    for level in levels:
        if not level or "." in level:
            raise InvalidInput(f"Invalid namespace level: {level[:200]!r}")
    return ".".join(levels)


def levels(name: str) -> list[str]:
    return name.split(".")


def identifier(namespace: str, name: str) -> dict[str, Any]:
    return {"namespace": levels(namespace), "name": name}


def parse_identifier(value: Any, what: str) -> tuple[str, str]:
    """An identifier {namespace: [levels], name} as (dotted namespace, name)."""
    if not isinstance(value, dict) or "name" not in value or "namespace" not in value:
        raise InvalidInput(f"Invalid request: {what} must be an identifier {{namespace, name}}")
    namespace, name = value["namespace"], value["name"]
    if not isinstance(namespace, list) or not all(isinstance(x, str) for x in namespace):
        raise InvalidInput(f"Invalid request: {what}.namespace must be a list of strings")
    if not isinstance(name, str):
        raise InvalidInput(f"Invalid request: {what}.name must be a string")
    return ".".join(namespace), name


def page(request: HttpRequest, items: list) -> tuple[list, str | None]:
    """One page of `items` by the protocol's pageToken and pageSize (an offset here)."""
    token = request.GET.get("pageToken") or "0"
    size = request.GET.get("pageSize")
    try:
        start = int(token)
        count = int(size) if size else None
    except ValueError:
        raise InvalidInput("pageToken and pageSize must be whole numbers") from None
    if start < 0 or (count is not None and count < 1):
        raise InvalidInput("pageToken must be >= 0 and pageSize >= 1")
    if count is None:
        return items[start:], None
    end = start + count
    return items[start:end], (str(end) if end < len(items) else None)

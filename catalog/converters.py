"""Path converters shared by the pages and the API."""

from __future__ import annotations

from django.urls import register_converter

JAVA_INT_MAX = 2**31 - 1


class VersionIdConverter:
    """A view version id: a whole number that fits Iceberg's (Java's) int. A larger one
    matches no route (a 404), instead of reaching the database as an out-of-range value."""

    regex = r"[0-9]{1,10}"

    def to_python(self, value: str) -> int:
        number = int(value)
        if number > JAVA_INT_MAX:
            raise ValueError(value)
        return number

    def to_url(self, value: int) -> str:
        return str(value)


register_converter(VersionIdConverter, "version_id")


class DottedNamespaceConverter:
    """A namespace name in one path segment: levels joined by "." ("sales.eu")."""

    regex = r"[^/]+"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(DottedNamespaceConverter, "dotted")

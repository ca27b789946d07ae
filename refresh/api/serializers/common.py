"""What the materialized-table API's serializers share: the strict request base (unknown
fields refused), text maps and name lists, and a freshness, written either as an object
`{"value": 10, "unit": "SECOND"}` (the value an integer or its text, the unit SECOND,
MINUTE, HOUR or DAY) or as the text of FLIP-435's clause, `"INTERVAL '10' SECOND"`."""

from __future__ import annotations

import re
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from catalog.core.errors import InvalidInput
from refresh.core.freshness import Freshness

_INTERVAL = re.compile(r"\s*INTERVAL\s+'([^']*)'\s+([A-Za-z]+)\s*", re.IGNORECASE)


FRESHNESS_HELP = (
    'An object {"value": 10, "unit": "SECOND"} (unit SECOND, MINUTE, HOUR or DAY), or the '
    "text \"INTERVAL '10' SECOND\"."
)


def parse_freshness(data: Any) -> Freshness:
    """A freshness from the API's two spellings; InvalidInput (field "freshness") else."""
    if isinstance(data, str):
        match = _INTERVAL.fullmatch(data)
        if match is None:
            raise InvalidInput(
                f"A freshness is written INTERVAL '<n>' <unit>, not {data[:100]!r}",
                field="freshness",
            )
        return Freshness.parse(match.group(1), match.group(2))
    if isinstance(data, dict) and set(data) == {"value", "unit"}:
        value, unit = data["value"], data["unit"]
        if isinstance(value, bool) or not isinstance(value, int | str) or not isinstance(unit, str):
            raise InvalidInput(
                "A freshness's value is an integer (or its text) and its unit a text",
                field="freshness",
            )
        return Freshness.parse(value, unit)
    raise InvalidInput(
        'A freshness is {"value": <n>, "unit": "SECOND|MINUTE|HOUR|DAY"} or '
        "\"INTERVAL '<n>' <unit>\"",
        field="freshness",
    )


class FreshnessSerializer(serializers.Serializer):
    value = serializers.IntegerField()
    unit = serializers.ChoiceField(choices=["SECOND", "MINUTE", "HOUR", "DAY"])
    text = serializers.CharField(read_only=True, help_text="INTERVAL '<value>' <unit>")


@extend_schema_field(
    {
        "oneOf": [
            {
                "type": "object",
                "properties": {
                    "value": {"oneOf": [{"type": "integer"}, {"type": "string"}]},
                    "unit": {"type": "string", "enum": ["SECOND", "MINUTE", "HOUR", "DAY"]},
                },
                "required": ["value", "unit"],
            },
            {"type": "string", "example": "INTERVAL '10' SECOND"},
        ],
        "description": FRESHNESS_HELP,
    }
)
class FreshnessField(serializers.Field):
    """Kept as written; `parse_freshness` reads it, so that its errors are the catalog's."""

    def to_internal_value(self, data: Any) -> Any:
        return data

    def to_representation(self, value: Any) -> Any:
        return value


def text_map(**kwargs: Any) -> serializers.DictField:
    return serializers.DictField(child=serializers.CharField(allow_blank=True), **kwargs)


def names(**kwargs: Any) -> serializers.ListField:
    return serializers.ListField(child=serializers.CharField(), **kwargs)


class StrictSerializer(serializers.Serializer):
    """Refuses fields it does not know, naming them (a typo must not be ignored)."""

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        data = self.initial_data
        if hasattr(data, "keys"):
            unknown = sorted(set(data.keys()) - set(self.fields))
            if unknown:
                raise InvalidInput(
                    f"Unknown fields: {', '.join(unknown)} (known: {', '.join(self.fields)})",
                    field=unknown[0],
                )
        return attrs

"""A materialized table's expectations (CONSTRAINT name EXPECT (condition) [ON VIOLATION
...]): as a request writes them (each condition checked) and as a table or version shows
them."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from catalog.core.errors import InvalidInput
from refresh.core import expectations as ex


class ExpectationInputSerializer(serializers.Serializer):
    """CONSTRAINT name EXPECT (condition) [ON VIOLATION ...] as JSON."""

    name = serializers.CharField()
    condition = serializers.CharField(help_text="A Spark SQL expression over the query's columns.")
    on_violation = serializers.ChoiceField(
        choices=list(ex.ACTIONS),
        required=False,
        allow_null=True,
        default=None,
        help_text="Omitted: violating rows are kept and counted.",
    )

    def to_internal_value(self, data: Any) -> Any:
        if hasattr(data, "keys"):  # a typo must not be ignored, as StrictSerializer says
            unknown = sorted(set(data.keys()) - set(self.fields))
            if unknown:
                raise serializers.ValidationError(
                    f"Unknown fields: {', '.join(unknown)} (known: {', '.join(self.fields)})"
                )
        return super().to_internal_value(data)

    def validate_condition(self, value: str) -> str:
        try:
            ex.parse_condition(value)
        except InvalidInput as error:
            raise serializers.ValidationError(error.message) from None
        return value


def checked_expectations(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A request's expectations, refused when two share a name (in any case)."""
    seen: set[str] = set()
    for row in rows:
        if row["name"].lower() in seen:
            raise InvalidInput(f"Duplicate expectation name {row['name']!r}", field="expectations")
        seen.add(row["name"].lower())
    return rows


class ExpectationSerializer(serializers.Serializer):
    name = serializers.CharField()
    condition = serializers.CharField(allow_null=True)
    on_violation = serializers.ChoiceField(choices=["DROP ROW", "FAIL UPDATE"], allow_null=True)

"""The lineage graph's shape: its nodes (tables, views, materialized tables; hidden ones
left out) and edges."""

from __future__ import annotations

from rest_framework import serializers


class LineageNodeSerializer(serializers.Serializer):
    id = serializers.CharField(help_text='"namespace.name"')
    namespace = serializers.CharField()
    name = serializers.CharField()
    kind = serializers.ChoiceField(choices=["table", "view", "materialized table", "unknown"])
    url = serializers.CharField(allow_null=True, help_text="Its page; null when unknown.")
    focus = serializers.BooleanField(help_text="The object asked about.")
    state = serializers.CharField(required=False, help_text="Materialized tables only.")
    refresh_mode = serializers.CharField(required=False)
    freshness = serializers.CharField(required=False)
    freshness_seconds = serializers.IntegerField(required=False)
    lag_seconds = serializers.FloatField(required=False, allow_null=True)
    late = serializers.BooleanField(required=False, help_text="Lag beyond the freshness.")
    more_readers = serializers.IntegerField(
        required=False,
        help_text="Readers the user may see that the graph does not draw (it draws at most "
        "`fanout` of an object's readers); only on a node whose readers were cut.",
    )
    more_readers_at_least = serializers.BooleanField(
        required=False,
        help_text="The count of the readers stopped there: there are at least that many more.",
    )
    readers_url = serializers.CharField(
        required=False, help_text="The page listing every reader, a page at a time."
    )
    more_sources = serializers.IntegerField(
        required=False,
        help_text="Sources the user may see that the graph does not draw (at most `fanout`).",
    )


class LineageEdgeSerializer(serializers.Serializer):
    source = serializers.CharField(help_text="The object read.")
    target = serializers.CharField(help_text="The object reading it.")


class LineageSerializer(serializers.Serializer):
    focus = serializers.CharField()
    nodes = LineageNodeSerializer(many=True)
    edges = LineageEdgeSerializer(many=True)
    truncated = serializers.BooleanField(
        help_text="The walk stopped at its depth or node limit before the end, or left out "
        "readers or sources of an object beyond `fanout` (counted on its node)."
    )
    fanout = serializers.IntegerField(
        help_text="The most readers, and sources, of one object the graph draws."
    )

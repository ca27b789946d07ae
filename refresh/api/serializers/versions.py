"""A table's definition versions: ALTER ... AS and rollback requests, a version, the list of
versions, and an entry of the version log (a change being applied)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from refresh.api.serializers.common import StrictSerializer
from refresh.api.serializers.expectations import ExpectationSerializer
from refresh.models import (
    MaterializedTableVersion,
    MaterializedTableVersionLogEntry,
)


class VersionLogEntrySerializer(serializers.ModelSerializer):
    actor = serializers.CharField(
        source="actor.username", read_only=True, allow_null=True, default=None
    )
    operation = serializers.CharField(help_text="create, alter or rollback")

    outcome = serializers.CharField(
        help_text="PENDING while the rebuild runs, then APPLIED (the version is current) or "
        "FAILED (nothing changed; see error)"
    )
    run_id = serializers.IntegerField(
        allow_null=True, help_text="The rebuild run that applies an ALTER or a rollback."
    )

    class Meta:
        model = MaterializedTableVersionLogEntry
        fields = ["version_id", "timestamp", "operation", "actor", "outcome", "run_id", "error"]
        read_only_fields = fields


JAVA_INT_MAX = 2**31 - 1


class DefinitionRequestSerializer(StrictSerializer):
    query = serializers.CharField(
        trim_whitespace=False,
        help_text="The new query (Spark SQL): ALTER MATERIALIZED TABLE ... AS <query>.",
    )


class DefinitionRollbackSerializer(StrictSerializer):
    version_id = serializers.IntegerField(
        min_value=1,
        max_value=JAVA_INT_MAX,
        help_text="The definition version to make current again.",
    )


class MaterializedTableVersionSerializer(serializers.ModelSerializer):
    """A definition version; its query is null for a user who may not read every one of
    its sources (the context's `hidden`: version ids)."""

    created_by = serializers.CharField(
        source="created_by.username", read_only=True, allow_null=True, default=None
    )
    is_current = serializers.SerializerMethodField()
    query = serializers.SerializerMethodField()
    expectations = serializers.SerializerMethodField()

    class Meta:
        model = MaterializedTableVersion
        fields = [
            "version_id",
            "query",
            "expectations",
            "default_namespace",
            "sources",
            "schema_id",
            "created_at",
            "created_by",
            "is_current",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_query(self, version: MaterializedTableVersion) -> str | None:
        """The version's query; null when hidden from the user."""
        return None if version.version_id in self.context.get("hidden", ()) else version.query

    @extend_schema_field(ExpectationSerializer(many=True))
    def get_expectations(self, version: MaterializedTableVersion) -> list[dict[str, Any]]:
        """The version's expectations; each condition null when its query is hidden."""
        hidden = version.version_id in self.context.get("hidden", ())
        return [
            {**row, "condition": None if hidden else row["condition"]}
            for row in version.expectations
        ]

    def get_is_current(self, version: MaterializedTableVersion) -> bool:
        current = self.context.get("current_version")
        return version.version_id == current


class MaterializedTableVersionsSerializer(serializers.Serializer):
    namespace = serializers.CharField()
    name = serializers.CharField()
    current_version = serializers.IntegerField()
    versions = MaterializedTableVersionSerializer(many=True, help_text="Newest first.")
    log = VersionLogEntrySerializer(
        many=True,
        help_text="Each version asked to become current and whether it did, newest first.",
    )

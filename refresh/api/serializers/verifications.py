"""Verifications' shapes: a verify request and a snapshot's verdict, one or a list."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from refresh import checks
from refresh.api.serializers.common import StrictSerializer
from refresh.models import MaterializedTable, Verification

_WITHHELD = "_sample_withheld"


class VerifyRequestSerializer(StrictSerializer):
    snapshots = serializers.IntegerField(
        required=False,
        default=1,
        min_value=1,
        max_value=20,
        help_text="How many of the newest snapshots with a refresh state to verify.",
    )


class VerificationSerializer(serializers.ModelSerializer):
    """A snapshot checked against its query over the source snapshots it records. Its
    sample rows are shown only to a reader no row filter or column mask of the table
    applies to (issue 51): to others `sample` is empty and `sample_withheld` says why.
    The reader is the context's `actor`, else its request's user."""

    requested_by = serializers.CharField(
        source="requested_by.username", read_only=True, allow_null=True, default=None
    )
    sample_withheld = serializers.SerializerMethodField()

    class Meta:
        model = Verification
        fields = [
            "id",
            "snapshot_id",
            "verdict",
            "definition_version",
            "source_snapshots",
            "missing_rows",
            "extra_rows",
            "sample",
            "sample_withheld",
            "reason",
            "requested_by",
            "verified_at",
            "seconds",
        ]
        read_only_fields = fields

    @extend_schema_field(
        serializers.CharField(
            allow_null=True,
            help_text="Null when `sample` is shown; else why it is empty: a row filter or "
            "column mask of the table applies to the reader (the rows were recomputed under "
            "the owner's policies). The counts and the verdict are shown either way.",
        )
    )
    def get_sample_withheld(self, obj: Verification) -> str | None:
        # Asked once per table for a whole list (the context is the list's).
        known = self.context.setdefault(_WITHHELD, {})
        if obj.materialized_table_id not in known:
            request = self.context.get("request")
            actor = self.context.get("actor") or getattr(request, "user", None)
            mt = MaterializedTable.objects.select_related("table__namespace").get(
                pk=obj.materialized_table_id
            )
            known[obj.materialized_table_id] = checks.sample_withheld(actor, mt)
        return known[obj.materialized_table_id]

    def to_representation(self, instance: Verification) -> dict[str, Any]:
        shown = super().to_representation(instance)
        if shown["sample_withheld"] is not None:
            shown["sample"] = {}
        return shown


class VerificationsSerializer(serializers.Serializer):
    """What a verification request answers: one verdict per snapshot, newest first."""

    verifications = VerificationSerializer(many=True)

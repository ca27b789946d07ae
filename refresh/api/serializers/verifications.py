"""Verifications' shapes: a verify request and a snapshot's verdict, one or a list."""

from __future__ import annotations

from rest_framework import serializers

from refresh.api.serializers.common import StrictSerializer
from refresh.models import (
    Verification,
)


class VerifyRequestSerializer(StrictSerializer):
    snapshots = serializers.IntegerField(
        required=False,
        default=1,
        min_value=1,
        max_value=20,
        help_text="How many of the newest snapshots with a refresh state to verify.",
    )


class VerificationSerializer(serializers.ModelSerializer):
    """A snapshot checked against its query over the source snapshots it records."""

    requested_by = serializers.CharField(
        source="requested_by.username", read_only=True, allow_null=True, default=None
    )

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
            "reason",
            "requested_by",
            "verified_at",
            "seconds",
        ]
        read_only_fields = fields


class VerificationsSerializer(serializers.Serializer):
    """What a verification request answers: one verdict per snapshot, newest first."""

    verifications = VerificationSerializer(many=True)

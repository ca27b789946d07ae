"""The statements endpoint's shapes: a script of SQL statements (or its dry run), and each
statement's plan or result."""

from __future__ import annotations

from rest_framework import serializers

from refresh.api.serializers.common import StrictSerializer, names


class StatementRequestSerializer(StrictSerializer):
    sql = serializers.CharField(
        trim_whitespace=False,
        help_text="One or more statements (materialized-table statements, UPDATE / DELETE / "
        "MERGE, queries), separated by semicolons.",
    )
    namespace = serializers.CharField(
        required=False,
        allow_null=True,
        allow_blank=True,
        default=None,
        help_text="The namespace unqualified names resolve in.",
    )
    dry_run = serializers.BooleanField(
        required=False,
        default=False,
        help_text=(
            "Plan only: say per statement what it would do (create, alter with the changes, "
            "nothing, refused...), changing nothing and starting no Spark job."
        ),
    )


class StatementPlanSerializer(serializers.Serializer):
    action = serializers.CharField(
        help_text="create, alter, nothing, refused, or the statement's own verb (drop, "
        "suspend, resume, refresh, change data, read)"
    )
    table = serializers.CharField(allow_null=True)
    changes = names()
    error = serializers.DictField(allow_null=True)


class StatementResultSerializer(serializers.Serializer):
    statement = serializers.CharField()
    line = serializers.IntegerField()
    column = serializers.IntegerField()
    kind = serializers.CharField()
    ok = serializers.BooleanField()
    message = serializers.CharField()
    table = serializers.CharField(allow_null=True)
    run_id = serializers.IntegerField(allow_null=True)
    columns = names()
    rows = serializers.ListField(child=serializers.ListField())
    error = serializers.DictField(allow_null=True)
    plan = StatementPlanSerializer(
        allow_null=True,
        help_text="What the statement does or would do (a dry run; CREATE [OR ALTER]).",
    )
    query = serializers.DictField(
        allow_null=True,
        required=False,
        help_text="A query's result (id, kind, columns, row_count, cut, and the URLs of its "
        "rows, `rows_url`, and downloads, `csv_url` and `parquet_url`).",
    )


class StatementsResponseSerializer(serializers.Serializer):
    results = StatementResultSerializer(many=True)
    error = serializers.DictField(
        required=False, help_text="The failing statement's error (message, type, line, column)."
    )
    dry_run = serializers.BooleanField(
        required=False, help_text="True: a plan; nothing was changed."
    )
    refused = serializers.IntegerField(
        required=False, help_text="A plan: how many statements would be refused."
    )

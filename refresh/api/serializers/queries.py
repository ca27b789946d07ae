"""Console queries' shapes: a query (its state, columns, result's size) and a page of its
rows."""

from __future__ import annotations

from django.urls import reverse
from rest_framework import serializers

from refresh import queries
from refresh.models import (
    Query,
)


class QueryColumnSerializer(serializers.Serializer):
    name = serializers.CharField()
    type = serializers.CharField(help_text="Spark SQL's type name.")


class QuerySerializer(serializers.ModelSerializer):
    """One query of a user's history, with its kept result's links while it is kept."""

    requested_by = serializers.CharField(source="requested_by.username", read_only=True)
    state = serializers.SerializerMethodField(help_text=", ".join(Query.State.values))
    error = serializers.SerializerMethodField()
    columns = QueryColumnSerializer(many=True, read_only=True)
    duration_seconds = serializers.FloatField(read_only=True, allow_null=True)
    cut_message = serializers.SerializerMethodField()
    kept = serializers.SerializerMethodField(help_text="Whether its rows can still be read.")
    job = serializers.IntegerField(source="job_id", read_only=True, allow_null=True)
    url = serializers.SerializerMethodField()
    rows_url = serializers.SerializerMethodField()
    csv_url = serializers.SerializerMethodField()
    parquet_url = serializers.SerializerMethodField()
    run_url = serializers.SerializerMethodField()
    job_cancel_url = serializers.SerializerMethodField()

    class Meta:
        model = Query
        fields = [
            "id",
            "kind",
            "sql",
            "namespace",
            "state",
            "requested_by",
            "created_at",
            "started_at",
            "finished_at",
            "duration_seconds",
            "columns",
            "row_count",
            "cut",
            "cut_message",
            "error",
            "kept",
            "expires_at",
            "job",
            "url",
            "rows_url",
            "csv_url",
            "parquet_url",
            "run_url",
            "job_cancel_url",
        ]
        read_only_fields = fields

    def get_state(self, query: Query) -> str:
        return queries.state_of(query)[0]

    def get_error(self, query: Query) -> dict | None:
        return queries.state_of(query)[1]

    def get_cut_message(self, query: Query) -> str | None:
        return queries.cut_message(query)

    def get_kept(self, query: Query) -> bool:
        return queries.kept(query)

    def get_url(self, query: Query) -> str:
        return queries.summary(query)["url"]

    def get_rows_url(self, query: Query) -> str | None:
        return queries.summary(query)["rows_url"]

    def get_csv_url(self, query: Query) -> str | None:
        return queries.summary(query)["csv_url"] if queries.kept(query) else None

    def get_parquet_url(self, query: Query) -> str | None:
        return queries.summary(query)["parquet_url"] if queries.kept(query) else None

    def get_run_url(self, query: Query) -> str:
        return reverse("api:query-run", kwargs={"query_id": query.pk})

    def get_job_cancel_url(self, query: Query) -> str | None:
        if query.job_id is None:
            return None
        return reverse("api:job-cancel", kwargs={"job_id": query.job_id})


class QueryRowsSerializer(serializers.Serializer):
    query = serializers.IntegerField(allow_null=True)
    state = serializers.CharField()
    kind = serializers.CharField(allow_null=True)
    columns = QueryColumnSerializer(many=True)
    offset = serializers.IntegerField()
    limit = serializers.IntegerField()
    rows = serializers.ListField(child=serializers.ListField())
    row_count = serializers.IntegerField(help_text="Rows kept so far (all, once complete).")
    complete = serializers.BooleanField(help_text="False while the query waits or runs.")
    cut = serializers.CharField(allow_null=True, help_text='"rows" or "bytes": which bound cut it')
    cut_message = serializers.CharField(allow_null=True)
    duration_seconds = serializers.FloatField(allow_null=True)
    error = serializers.DictField(allow_null=True)

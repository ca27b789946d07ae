"""The API of tables: list a namespace's, show one as the catalog mirrors it, preview its
rows (pruning figures; Spark, as a job, for equality deletes), list its files, attach one
another system writes (and detach it), and make one from a file (upload). Engines load and
change tables through the Iceberg REST protocol (catalog/iceberg_rest)."""

from __future__ import annotations

import dataclasses
from typing import Any

from django.db.models import F
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, status
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog import (
    access,
    access_events,
    checks,
    jobs,
    policies,
    previews,
    redaction,
    selectors,
    services,
    uploads,
)
from catalog.api import serializers as s
from catalog.api.jobs import ACCEPTED, respond
from catalog.api.shared import (
    NAMESPACE_PARAM,
    PREVIEW_PARAMS,
    TABLE_PARAM,
    TIME_TRAVEL_PARAMS,
    ByGrants,
    CatalogPagination,
    error_responses,
    row_limit,
    validated,
)
from catalog.core.access import CREATE, MANAGE, READ_DATA, READ_METADATA, WRITE_DATA
from catalog.core.errors import Forbidden
from catalog.models import Table
from catalog.services.kernel import TABLE


def _followed(request: Request, namespace: str, name: str, privilege: str = READ_METADATA) -> Table:
    """The table, if the principal holds `privilege` on it, an attached one first followed
    to its newest metadata file (once per request: every read of an attached table looks)."""
    table = checks.obj(request, TABLE, namespace, name, privilege)
    return services.follow_attached(table, actor=request.user)


def _refuse_if_policy_applies(request: Request, table: Table, what: str) -> None:
    """A preview is read without the table's row filter and masks (pyiceberg, or Spark as a
    job), and a file list names the files: neither is shown to a reader they apply to."""
    refusal = policies.read_refusal(access.principal_of(request), table, what)
    if refusal is not None:
        raise Forbidden(refusal)


class TableListView(ByGrants, generics.ListAPIView):
    """A namespace's tables (materialized tables' data tables included, marked)."""

    serializer_class = s.TableSummarySerializer
    pagination_class = CatalogPagination

    def get_queryset(self) -> Any:
        checks.namespace(self.request, self.kwargs["namespace"])
        ns = selectors.get_namespace(self.kwargs["namespace"])
        tables = (
            Table.objects.filter(namespace=ns)
            .select_related("namespace")
            .annotate(materialized_id=F("materialized__id"))
            .order_by("name")
        )
        return access.visible_objects(access.principal_of(self.request), tables)

    @extend_schema(
        operation_id="tables_list",
        parameters=[NAMESPACE_PARAM],
        responses={200: s.TableSummarySerializer(many=True), **error_responses(404)},
        tags=["tables"],
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)


class TableDetailView(ByGrants, APIView):
    @extend_schema(
        operation_id="tables_retrieve",
        parameters=[NAMESPACE_PARAM, TABLE_PARAM],
        description=(
            "The table as the catalog mirrors its current metadata file: schema fields, "
            "current snapshot, properties, location and partition spec. Engines load and "
            "change tables through the Iceberg REST protocol at /iceberg."
        ),
        responses={200: s.TableDetailSerializer, **error_responses(404)},
        tags=["tables"],
    )
    def get(self, request: Request, namespace: str, name: str) -> Response:
        table = _followed(request, namespace, name)
        data = s.TableDetailSerializer(table).data
        # Properties the user may not see (a materialized table's query, to one who may not
        # read its sources) are left out (catalog.redaction).
        data["properties"] = redaction.properties(
            access.principal_of(request), table.pk, data["properties"]
        )
        return Response(data)


class TablePreviewView(ByGrants, APIView):
    @extend_schema(
        operation_id="tables_preview",
        parameters=[NAMESPACE_PARAM, TABLE_PARAM, *PREVIEW_PARAMS, *TIME_TRAVEL_PARAMS],
        description=(
            "The first rows of the table, with a column choice, a row filter, and time travel "
            "by snapshot id or timestamp (ClickHouse's rules and words), and what pruning "
            "did: data files in the snapshot, scanned, skipped by partition, skipped by "
            "column statistics, delete files applied. Read by pyiceberg; a table with "
            "equality deletes is read by a refresh worker's Spark (then no pruning figures), "
            f"as a job. {ACCEPTED}"
        ),
        responses={
            200: OpenApiTypes.OBJECT,
            202: s.JobAcceptedSerializer,
            **error_responses(400, 403, 404, 429, 503),
        },
        tags=["tables"],
    )
    def get(self, request: Request, namespace: str, name: str) -> Response:
        params = request.query_params
        table = _followed(request, namespace, name, READ_DATA)
        _refuse_if_policy_applies(request, table, "preview")
        access_events.read(request, "preview", "api", table)
        arguments = {
            "namespace": namespace,
            "name": name,
            "columns": params.getlist("columns") or None,
            "row_filter": params.get("filter") or None,
            "snapshot_id": params.get("snapshot_id"),
            "timestamp_ms": params.get("timestamp_ms"),
            "limit": row_limit(request),
            "version": table.metadata_location,
        }
        return respond(
            jobs.attempt(
                "preview_table",
                arguments,
                actor=request.user,
                summary=f"Preview of table {namespace}.{name}",
                reuse=True,
            )
        )


class TableFilesView(ByGrants, APIView):
    @extend_schema(
        operation_id="tables_files",
        parameters=[
            NAMESPACE_PARAM,
            TABLE_PARAM,
            TIME_TRAVEL_PARAMS[0],
            OpenApiParameter(
                "limit", OpenApiTypes.INT, description="Files listed: 200 by default."
            ),
        ],
        description="The data and delete files of the current snapshot (or `snapshot_id`), "
        "with sizes and record counts, and totals per kind over all of them.",
        responses={200: OpenApiTypes.OBJECT, **error_responses(400, 403, 404)},
        tags=["tables"],
    )
    def get(self, request: Request, namespace: str, name: str) -> Response:
        table = _followed(request, namespace, name, READ_DATA)
        _refuse_if_policy_applies(request, table, "file list")
        listing = previews.files_of(
            table,
            snapshot_id=request.query_params.get("snapshot_id"),
            limit=row_limit(request) if "limit" in request.query_params else 200,
        )
        return Response(
            {
                "snapshot_id": listing.snapshot_id,
                "files": [
                    {**dataclasses.asdict(f), "partition": dict(f.partition)} for f in listing.files
                ],
                "totals": {kind: dataclasses.asdict(t) for kind, t in listing.totals.items()},
                "truncated": listing.truncated,
            }
        )


class TableAttachView(ByGrants, APIView):
    @extend_schema(
        operation_id="tables_attach",
        parameters=[NAMESPACE_PARAM],
        request=s.AttachSerializer,
        description=(
            "Attach, read-only, an Iceberg table another system writes, from its folder. The "
            "metadata file is chosen by ClickHouse's rules: `metadata_file_path` wins; else "
            "the files with `table_uuid`; else every metadata file; the newest by version "
            "in the name or by `last-updated-ms`. Writes to it are refused; a newer "
            "metadata file is picked up on every read."
        ),
        responses={201: s.TableDetailSerializer, **error_responses(400, 404, 409)},
        tags=["tables"],
    )
    def post(self, request: Request, namespace: str) -> Response:
        checks.namespace(request, namespace, CREATE)
        data = validated(s.AttachSerializer, request)
        table = services.attach_table(namespace=namespace, actor=request.user, **data)
        return Response(s.TableDetailSerializer(table).data, status=status.HTTP_201_CREATED)


class TableUploadView(ByGrants, APIView):
    parser_classes = [MultiPartParser]

    @extend_schema(
        operation_id="tables_upload",
        parameters=[NAMESPACE_PARAM],
        request={"multipart/form-data": s.TableUploadSerializer},
        description=(
            "A file becomes a table. `mode=create` makes a table with the file's columns "
            "(types inferred from its first rows) and its rows, in one commit; `mode=append` "
            "adds the rows to an existing table with the same columns (types it can hold). "
            "`dry_run=true` answers the columns, types and first rows and writes nothing. "
            "The file is streamed to disk and read in batches; a bad file is a 400 naming "
            "the row (`row`, from 1, the header not counted) and column (`column_name`) at "
            "fault, and nothing is created or changed."
        ),
        responses={
            200: OpenApiResponse(
                s.UploadResultSerializer,
                description="Appended (or, with dry_run, an UploadPreview: what would be).",
            ),
            201: s.UploadResultSerializer,
            **error_responses(400, 403, 404, 409),
            413: OpenApiResponse(
                s.ErrorSerializer, description="The file is over UPLOAD_MAX_BYTES."
            ),
        },
        tags=["tables"],
    )
    def post(self, request: Request, namespace: str) -> Response:
        request.FILES  # noqa: B018 - reads the upload, which may be refused for its size
        refused = uploads.refusal(request._request)
        if refused is not None:
            raise refused
        data = validated(s.TableUploadSerializer, request)
        if data["mode"] == "append":
            checks.obj(request, TABLE, namespace, data["table"], WRITE_DATA)
        else:
            checks.namespace(request, namespace, CREATE)
        upload = data["file"]
        asked = services.UploadRequest(
            namespace=namespace,
            name=data["table"],
            path=upload.temporary_file_path(),
            filename=upload.name,
            format=data["format"],
            mode=data["mode"],
        )
        if data["dry_run"]:
            preview = services.inspect_upload(upload=asked)
            body = preview.as_dict()
            return Response(
                {
                    "dry_run": True,
                    "namespace": namespace,
                    "table": data["table"],
                    "mode": data["mode"],
                    "format": body["format"],
                    "columns": body["columns"],
                    "preview_rows": body["rows"],
                }
            )
        done = services.upload_table(upload=asked, actor=request.user)
        table = done.table
        body = {
            "namespace": table.namespace.name,
            "table": table.name,
            "mode": done.mode,
            "format": done.format,
            "rows_written": done.rows,
            "columns": [{"name": n, "type": t} for n, t in done.columns],
            "snapshot_id": done.snapshot_id,
            "url": reverse(
                "api:table-detail", kwargs={"namespace": table.namespace.name, "name": table.name}
            ),
        }
        created = done.mode == "create"
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class TableDetachView(ByGrants, APIView):
    @extend_schema(
        operation_id="tables_detach",
        parameters=[NAMESPACE_PARAM, TABLE_PARAM],
        request=None,
        description="Forget an attached table. Its folder and files are not touched.",
        responses={204: None, **error_responses(400, 404)},
        tags=["tables"],
    )
    def post(self, request: Request, namespace: str, name: str) -> Response:
        checks.obj(request, TABLE, namespace, name, MANAGE)
        services.detach_table(namespace=namespace, name=name, actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)

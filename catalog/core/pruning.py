"""A row filter as each partition spec of a table sees it (`SpecFilters`): which manifests
(by their partition summaries) and which files (by their partition tuples) it cannot match,
and what of it is left to apply to a file (its residual), with pyiceberg's own evaluators
bound to the read's schema. Shared by the preview's plan, the delete files a scan reads and
server-side scan planning. Django-free."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyiceberg.expressions import AlwaysTrue, BooleanExpression
from pyiceberg.expressions.visitors import (
    expression_evaluator,
    inclusive_projection,
    manifest_evaluator,
    residual_evaluator_of,
)
from pyiceberg.manifest import DataFile, ManifestFile
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata


class SpecFilters:
    """The filter as each partition spec sees it, built once per spec (pyiceberg's
    evaluators, bound to the read's schema)."""

    def __init__(self, metadata: TableMetadata, schema: Schema, row_filter: BooleanExpression):
        self.metadata = metadata
        self.schema = schema
        self.row_filter = row_filter
        self.filtered = not isinstance(row_filter, AlwaysTrue)
        self._cache: dict[tuple[str, int], Any] = {}

    def _spec(self, spec_id: int) -> PartitionSpec | None:
        return self.metadata.specs().get(spec_id)

    def _built(self, kind: str, spec_id: int, build: Callable[[PartitionSpec], Any]) -> Any:
        key = (kind, spec_id)
        if key not in self._cache:
            spec = self._spec(spec_id)
            try:
                self._cache[key] = build(spec) if spec is not None else None
            except (ValueError, KeyError):
                # A spec over a column the read's schema lacks: no pruning by it (safe).
                self._cache[key] = None
        return self._cache[key]

    def projection(self, spec_id: int) -> BooleanExpression | None:
        return self._built(
            "projection",
            spec_id,
            lambda spec: inclusive_projection(self.schema, spec)(self.row_filter),
        )

    def manifest_may_match(self, manifest: ManifestFile) -> bool:
        if not self.filtered:
            return True
        spec_id = manifest.partition_spec_id

        def build(spec: PartitionSpec) -> Callable[[ManifestFile], bool]:
            projection = self.projection(spec_id)
            return manifest_evaluator(spec, self.schema, projection) if projection else None

        evaluate = self._built("manifest", spec_id, build)
        return evaluate(manifest) if evaluate else True

    def partition_may_match(self, data_file: DataFile) -> bool:
        if not self.filtered:
            return True
        spec_id = data_file.spec_id or 0

        def build(spec: PartitionSpec) -> Callable[[Any], bool] | None:
            projection = self.projection(spec_id)
            if projection is None:
                return None
            partition_schema = Schema(*spec.partition_type(self.schema).fields)
            return expression_evaluator(partition_schema, projection, True)

        evaluate = self._built("partition", spec_id, build)
        return evaluate(data_file.partition) if evaluate else True

    def residual(self, data_file: DataFile) -> BooleanExpression:
        if not self.filtered:
            return self.row_filter
        spec_id = data_file.spec_id or 0
        evaluator = self._built(
            "residual",
            spec_id,
            lambda spec: residual_evaluator_of(spec, self.row_filter, True, self.schema),
        )
        return evaluator.residual_for(data_file.partition) if evaluator else self.row_filter

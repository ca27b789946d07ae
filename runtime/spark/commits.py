"""Snapshot-summary entries on the commits Spark makes for the app (a refresh's
`refresh-state`, a person's change: refresh.core.refresh_state). A DataFrame write takes
them as write options (`snapshot-property.<key>`, Iceberg's); a SQL statement (MERGE INTO,
the console's UPDATE and DELETE) runs inside Iceberg's CommitMetadata through the app's JVM
helper (jvm/CommitProperties.java). Django-free."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrameWriterV2, SparkSession


def with_properties(writer: DataFrameWriterV2, properties: Mapping[str, str]) -> DataFrameWriterV2:
    """`writer` whose commit adds `properties` to its snapshot's summary."""
    for key, value in properties.items():
        writer = writer.option(f"snapshot-property.{key}", value)
    return writer


def _helper(session: SparkSession) -> Any:
    return session._jvm.lakeview.commits.CommitProperties  # noqa: SLF001 - py4j's entry point


def _java_map(session: SparkSession, properties: Mapping[str, str]) -> Any:
    java = session._jvm.java.util.HashMap()  # noqa: SLF001
    for key, value in properties.items():
        java.put(key, value)
    return java


def run_sql(session: SparkSession, statement: str, properties: Mapping[str, str]) -> None:
    """Run a statement the app built (a MERGE INTO over its own views); its commit adds
    `properties` to the snapshot's summary. Spark's errors come out as PySpark's."""
    if not properties:
        session.sql(statement)
        return
    _helper(session).sql(
        session._jsparkSession,  # noqa: SLF001
        statement,
        _java_map(session, properties),
    )


def run_plan(session: SparkSession, plan: Any, properties: Mapping[str, str]) -> None:
    """Run an analyzed plan (the sandbox's checked data change); its commit adds
    `properties` to the snapshot's summary."""
    jsession = session._jsparkSession  # noqa: SLF001
    if not properties:
        session._jvm.org.apache.spark.sql.Dataset.ofRows(jsession, plan)  # noqa: SLF001
        return
    _helper(session).plan(jsession, plan, _java_map(session, properties))

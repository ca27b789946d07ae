"""OpenLineage run events of a materialized table's runs, from plain values: a refresh, a
rebuild or a continuous table's micro-batch is a run of the job named after the table, its
inputs the sources at the snapshots it read, its output the table at the snapshot it wrote.

The objects are openlineage-python's (event_v2, facet_v2), so that the client's transports
send them as they are. Dataset names follow OpenLineage's naming of catalog tables: the
namespace is the catalog (its URI), the name `namespace.table`. Nothing here imports Django
(refresh/lineage_events.py gathers the values and sends)."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from openlineage.client.event_v2 import (
    InputDataset,
    Job,
    OutputDataset,
    Run,
    RunEvent,
    RunState,
)
from openlineage.client.facet_v2 import (
    catalog_dataset,
    dataset_version_dataset,
    error_message_run,
    job_type_job,
    nominal_time_run,
    output_statistics_output_dataset,
    processing_engine_run,
    schema_dataset,
    sql_job,
)
from openlineage.client.uuid import generate_static_uuid

#: Who wrote the events (the `producer` of the event and of each facet).
PRODUCER = "urn:lakeview:refresh"
ENGINE = "lakeview"

#: A run's final state -> the event that ends it. A run that never started (cancelled or
#: skipped while queued) ended nothing that was started: no event, unless it failed.
END_OF = {
    "SUCCEEDED": RunState.COMPLETE,
    "SKIPPED": RunState.COMPLETE,
    "FAILED": RunState.FAIL,
    "CANCELLED": RunState.ABORT,
}


@dataclass(frozen=True)
class Where:
    """Deployment-wide names: the jobs' namespace, the datasets' (the catalog's URI), and
    the catalog itself for the catalog facet."""

    job_namespace: str
    dataset_namespace: str
    catalog_name: str
    warehouse: str = ""
    engine_version: str = ""


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    doc: str | None = None


@dataclass(frozen=True)
class RunFacts:
    """One run as its row and its table say it."""

    run_id: int
    #: When the run was queued: with `run_id`, the event's runId (UUIDv7-shaped, the same
    #: for the START and the end of one run, in whichever process sends them).
    queued_at: datetime
    #: The materialized table's full name ("ns.table"): the job and the output.
    table: str
    trigger: str
    state: str
    query: str = ""
    action: str = ""
    started_at: datetime | None = None
    finished_at: datetime | None = None
    #: Scheduled runs: the planned tick.
    schedule_time: datetime | None = None
    #: "ns.table" -> the snapshot id the run read (None: unknown, or no snapshot yet).
    sources: Mapping[str, int | None] = field(default_factory=dict)
    snapshot_id: int | None = None
    rows_written: int | None = None
    bytes_written: int | None = None
    #: The output's schema (the table's current one).
    columns: Sequence[Column] = ()
    error: str = ""


def run_uuid(facts: RunFacts, where: Where) -> str:
    data = f"{where.job_namespace}:{facts.table}:{facts.run_id}".encode()
    return str(generate_static_uuid(facts.queued_at, data))


def _time(moment: datetime | None) -> str:
    moment = moment or datetime.now(UTC)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _streaming(facts: RunFacts) -> bool:
    return facts.trigger == "CONTINUOUS" and facts.action == "INCREMENTAL"


def _job(facts: RunFacts, where: Where) -> Job:
    facets: dict = {
        "jobType": job_type_job.JobTypeJobFacet(
            processingType="STREAMING" if _streaming(facts) else "BATCH",
            integration="LAKEVIEW",
            jobType="MATERIALIZED_TABLE",
            producer=PRODUCER,
        )
    }
    if facts.query:
        facets["sql"] = sql_job.SQLJobFacet(query=facts.query, dialect="spark", producer=PRODUCER)
    return Job(namespace=where.job_namespace, name=facts.table, facets=facets)


def _catalog(where: Where) -> catalog_dataset.CatalogDatasetFacet:
    return catalog_dataset.CatalogDatasetFacet(
        framework="iceberg",
        type="rest",
        name=where.catalog_name,
        metadataUri=where.dataset_namespace,
        warehouseUri=where.warehouse or None,
        source=ENGINE,
        producer=PRODUCER,
    )


def _version(snapshot_id: int) -> dataset_version_dataset.DatasetVersionDatasetFacet:
    return dataset_version_dataset.DatasetVersionDatasetFacet(
        datasetVersion=str(snapshot_id), producer=PRODUCER
    )


def _inputs(facts: RunFacts, where: Where) -> list[InputDataset]:
    inputs = []
    for name, snapshot_id in sorted(facts.sources.items()):
        facets: dict = {"catalog": _catalog(where)}
        if snapshot_id is not None:
            facets["version"] = _version(snapshot_id)
        inputs.append(InputDataset(namespace=where.dataset_namespace, name=name, facets=facets))
    return inputs


def _outputs(facts: RunFacts, where: Where, *, ended: bool) -> list[OutputDataset]:
    facets: dict = {"catalog": _catalog(where)}
    if facts.columns:
        facets["schema"] = schema_dataset.SchemaDatasetFacet(
            fields=[
                schema_dataset.SchemaDatasetFacetFields(
                    name=c.name, type=c.type, description=c.doc or None, ordinal_position=i
                )
                for i, c in enumerate(facts.columns, start=1)
            ],
            producer=PRODUCER,
        )
    output_facets: dict = {}
    if ended and facts.snapshot_id is not None:
        facets["version"] = _version(facts.snapshot_id)
        if facts.rows_written is not None or facts.bytes_written is not None:
            output_facets["outputStatistics"] = (
                output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
                    rowCount=facts.rows_written, size=facts.bytes_written, producer=PRODUCER
                )
            )
    return [
        OutputDataset(
            namespace=where.dataset_namespace,
            name=facts.table,
            facets=facets,
            outputFacets=output_facets,
        )
    ]


def _run(facts: RunFacts, where: Where, *, failed: bool) -> Run:
    facets: dict = {
        "processing_engine": processing_engine_run.ProcessingEngineRunFacet(
            version=where.engine_version or "unknown",
            name=ENGINE,
            openlineageAdapterVersion=_client_version(),
            producer=PRODUCER,
        )
    }
    if facts.schedule_time is not None:
        facets["nominalTime"] = nominal_time_run.NominalTimeRunFacet(
            nominalStartTime=_time(facts.schedule_time), producer=PRODUCER
        )
    if failed and facts.error:
        facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(
            message=facts.error, programmingLanguage="SQL", producer=PRODUCER
        )
    return Run(runId=run_uuid(facts, where), facets=facets)


@functools.cache
def _client_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("openlineage-python")
    except PackageNotFoundError:  # pragma: no cover - installed with the app
        return "unknown"


def start_event(facts: RunFacts, where: Where) -> RunEvent:
    """The run started (claimed by a worker or a streaming host): its job, the sources it
    will read (their snapshots unknown until it decides) and the table it writes."""
    return RunEvent(
        eventType=RunState.START,
        eventTime=_time(facts.started_at),
        run=_run(facts, where, failed=False),
        job=_job(facts, where),
        inputs=_inputs(facts, where),
        outputs=_outputs(facts, where, ended=False),
        producer=PRODUCER,
    )


def end_event(facts: RunFacts, where: Where) -> RunEvent | None:
    """The run ended: COMPLETE (a refresh, a NO_DATA skip, a micro-batch), FAIL with the
    error, or ABORT (cancelled); None for a state that ends nothing."""
    kind = END_OF.get(facts.state)
    if kind is None:
        return None
    return RunEvent(
        eventType=kind,
        eventTime=_time(facts.finished_at),
        run=_run(facts, where, failed=kind is RunState.FAIL),
        job=_job(facts, where),
        inputs=_inputs(facts, where),
        outputs=_outputs(facts, where, ended=kind is RunState.COMPLETE),
        producer=PRODUCER,
    )


def finished_events(facts: RunFacts, where: Where, *, announced: bool) -> list[RunEvent]:
    """The events of a finished run: its end, after a START when none was sent when it
    began (`announced` False: a micro-batch, recorded once it committed). A run that never
    started sends only a failure."""
    end = end_event(facts, where)
    if end is None:
        return []
    if facts.started_at is None:
        return [end] if end.eventType is RunState.FAIL else []
    if announced:
        return [end]
    return [start_event(facts, where), end]

"""What a materialized table's snapshot answers, written into the snapshot's summary by the
commit that made it, so that any engine reading the table through the catalog can tell how
fresh it is without asking the app. Django-free.

The layout follows the Iceberg materialized-view spec draft (apache/iceberg pull request
11041): the summary's `refresh-state` is a JSON object with the definition version the
data was computed from (`view-version-id`: here the materialized table's definition
version), one record per source table it read (`source-states`: type, namespace, name, uuid,
snapshot-id; views are resolved to the tables they read, and another materialized table is
a table) and when the refresh started (`refresh-start-timestamp-ms`). A source that had no
snapshot yet (an empty table) has no `snapshot-id`.

A partition refresh answers for its partition only (the others keep what earlier refreshes
wrote): its summary also names the partition (`lakeview.refresh-partition`, a JSON object
of column -> value), and a verifier compares that partition.

A change a person made (the console's UPDATE, DELETE or MERGE, which FLIP-435 allows) has
no refresh state: its summary says `lakeview.change` = `user` and who.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

#: The snapshot-summary key of a refresh's state (the spec draft's name).
REFRESH_STATE = "refresh-state"
#: Summary keys of a change a person made instead of a refresh.
CHANGE = "lakeview.change"
CHANGED_BY = "lakeview.changed-by"
#: The partition a partition refresh wrote (its refresh state answers for it alone).
PARTITION = "lakeview.refresh-partition"


class _Spec(BaseModel):
    # Frozen, fields by the draft's kebab-case names (aliases), as pyiceberg models them.
    model_config = ConfigDict(frozen=True, populate_by_name=True)


class SourceState(_Spec):
    """A source table (or a view read through) as the refresh read it."""

    type: Literal["table", "view"] = "table"
    namespace: tuple[str, ...]
    name: str
    uuid: str
    snapshot_id: int | None = Field(default=None, alias="snapshot-id")
    #: A view's version the refresh read its SQL at.
    version_id: int | None = Field(default=None, alias="version-id")

    @property
    def qualified(self) -> str:
        return ".".join((*self.namespace, self.name))


class RefreshState(_Spec):
    view_version_id: int = Field(alias="view-version-id")
    source_states: tuple[SourceState, ...] = Field(alias="source-states")
    refresh_start_timestamp_ms: int = Field(alias="refresh-start-timestamp-ms")

    @property
    def tables(self) -> tuple[SourceState, ...]:
        """The source tables (a view's are among them; the views themselves are not)."""
        return tuple(s for s in self.source_states if s.type == "table")

    @property
    def views(self) -> dict[str, int | None]:
        """The views read through: "ns.view" -> the version read."""
        return {s.qualified: s.version_id for s in self.source_states if s.type == "view"}

    def summary(self) -> dict[str, str]:
        """The snapshot-summary entry that records this state."""
        return {REFRESH_STATE: self.model_dump_json(by_alias=True, exclude_none=True)}

    def snapshot_of(self, qualified: str) -> int | None:
        """The snapshot the refresh read of a source ("ns.table"), None if it read none."""
        for state in self.tables:
            if state.qualified == qualified:
                return state.snapshot_id
        return None


def refresh_state(
    *,
    version: int,
    sources: Mapping[str, tuple[str, int | None]],
    started_ms: int,
    views: Mapping[str, tuple[str, int | None]] | None = None,
) -> RefreshState:
    """The state of a refresh of definition `version` that read each source ("ns.table" ->
    (its table uuid, the snapshot read, None when it had none)), through `views` ("ns.view"
    -> (its view uuid, the version read)), started at `started_ms`."""
    states = []
    for qualified, (uuid, snapshot_id) in sorted(sources.items()):
        *namespace, name = qualified.split(".")
        states.append(
            SourceState(namespace=tuple(namespace), name=name, uuid=uuid, snapshot_id=snapshot_id)
        )
    for qualified, (uuid, version_id) in sorted((views or {}).items()):
        *namespace, name = qualified.split(".")
        states.append(
            SourceState(
                type="view", namespace=tuple(namespace), name=name, uuid=uuid, version_id=version_id
            )
        )
    return RefreshState(
        view_version_id=version,
        source_states=tuple(states),
        refresh_start_timestamp_ms=started_ms,
    )


def read(summary: Mapping[str, str] | None) -> RefreshState | None:
    """The refresh state a snapshot's summary records; None when it records none (a
    person's change, a commit from before refresh states, another writer) or when what it
    records is not one."""
    text = (summary or {}).get(REFRESH_STATE)
    if not text:
        return None
    try:
        return RefreshState.model_validate_json(text)
    except ValidationError:
        return None


def partition_entry(partition: Mapping[str, str] | None) -> dict[str, str]:
    """The summary entry naming a partition refresh's partition (none for a whole table)."""
    return {PARTITION: json.dumps(dict(partition), sort_keys=True)} if partition else {}


def read_partition(summary: Mapping[str, str] | None) -> dict[str, str] | None:
    """The partition a snapshot's refresh state answers for; None for the whole table."""
    text = (summary or {}).get(PARTITION)
    if not text:
        return None
    try:
        found = json.loads(text)
    except ValueError:
        return None
    if not isinstance(found, dict):
        return None
    return {str(key): str(value) for key, value in found.items()}


def user_change(username: str) -> dict[str, str]:
    """The summary entries of a change a person made (no refresh state)."""
    return {CHANGE: "user", CHANGED_BY: username or "?"}

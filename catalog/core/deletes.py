"""The delete files of a scan (`Deletes`): read once from the delete manifests that can
hold deletes for the scanned files, then asked which apply to each data file. Position
delete files and v3 deletion vectors apply by pyiceberg's `DeleteFileIndex` (a deletion
vector only to the file it names); equality deletes by the spec's rule (an older data file
in the same partition). A preview refuses equality deletes (`catalog.core.preview`);
server-side scan planning hands them on to the client. Django-free."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pyiceberg.io import FileIO
from pyiceberg.manifest import INITIAL_SEQUENCE_NUMBER, DataFile, DataFileContent, ManifestFile
from pyiceberg.table.delete_file_index import DeleteFileIndex

from catalog.core.manifests import all_entries
from catalog.core.metadata_cache import referenced_data_file
from catalog.core.pruning import SpecFilters


@dataclass(frozen=True)
class _EqualityDelete:
    file: DataFile
    sequence: int
    spec_id: int
    partition: Any
    everywhere: bool


@dataclass
class Deletes:
    """The delete files that may apply to the scanned files: position delete files in
    pyiceberg's `DeleteFileIndex` (by partition, or by the path their bounds name),
    deletion vectors and other file-scoped deletes by the data file they name, equality
    deletes listed. Read once for a scan (`read`) and asked for each data file."""

    index: DeleteFileIndex = field(default_factory=DeleteFileIndex)
    by_data_file: dict[str, list[tuple[int, DataFile]]] = field(default_factory=dict)
    equality: list[_EqualityDelete] = field(default_factory=list)

    @classmethod
    def read(
        cls,
        io: FileIO,
        delete_manifests: Sequence[ManifestFile],
        oldest: int,
        filters: SpecFilters,
    ) -> Deletes:
        """Only the delete manifests that can hold deletes for the scanned files are read:
        those whose partition summaries may match and that are not older than `oldest`,
        the oldest scanned file's sequence number (a delete applies to data of its own
        sequence number or older)."""
        wanted = [
            manifest
            for manifest in delete_manifests
            if (manifest.sequence_number or INITIAL_SEQUENCE_NUMBER) >= oldest
            and filters.manifest_may_match(manifest)
        ]
        deletes = cls()
        specs = filters.metadata.specs()
        for entries in all_entries(io, wanted):
            for entry in entries:
                delete = entry.data_file
                if not filters.partition_may_match(delete):
                    continue
                sequence = entry.sequence_number or INITIAL_SEQUENCE_NUMBER
                if delete.content == DataFileContent.POSITION_DELETES:
                    target = referenced_data_file(delete)
                    if target is None:
                        deletes.index.add_delete_file(entry, partition_key=delete.partition)
                    else:
                        deletes.by_data_file.setdefault(target, []).append((sequence, delete))
                elif delete.content == DataFileContent.EQUALITY_DELETES:
                    spec = specs.get(delete.spec_id or 0)
                    deletes.equality.append(
                        _EqualityDelete(
                            file=delete,
                            sequence=sequence,
                            spec_id=delete.spec_id or 0,
                            partition=delete.partition,
                            everywhere=spec is None or spec.is_unpartitioned(),
                        )
                    )
        return deletes

    def positional_for(self, data_file: DataFile, sequence: int) -> set[DataFile]:
        """The position deletes and deletion vectors that apply to `data_file` (of data
        sequence number `sequence`)."""
        found = self.index.for_data_file(sequence, data_file, partition_key=data_file.partition)
        for delete_sequence, delete in self.by_data_file.get(data_file.file_path, ()):
            if delete_sequence >= sequence:
                found.add(delete)
        return found

    def equality_for(self, data_file: DataFile, sequence: int) -> list[DataFile]:
        """The equality deletes that apply to `data_file`. The spec's rule: an equality
        delete applies to data files of an older sequence number, in its partition
        (everywhere, when it was written unpartitioned)."""
        return [
            delete.file
            for delete in self.equality
            if delete.sequence > sequence
            and (
                delete.everywhere
                or (
                    delete.spec_id == (data_file.spec_id or 0)
                    and delete.partition == data_file.partition
                )
            )
        ]

"""The metadata cache: warm reads hit, the bound holds, a new metadata file drops the old
state's entries, and a table recreated at the same location with the same file names is
never read from the old table's entries (nor from pyiceberg's own path-keyed cache)."""

from __future__ import annotations

import gzip
import random
import shutil
import threading
import uuid
from pathlib import Path

import pytest
from pyiceberg import manifest as pyiceberg_manifest
from pyiceberg.io.pyarrow import PyArrowFile
from pyiceberg.manifest import read_manifest_list
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType

from catalog.core.errors import InvalidMetadata, NotFound
from catalog.core.metadata_cache import (
    MetadataCache,
    disable_pyiceberg_manifest_cache,
)
from catalog.core.preview import preview
from tests.unit.test_preview_tables import IO, create_table, write

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "region", StringType(), required=False),
)
BY_REGION = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "region"))


def rows(*ids: int, region: str = "eu") -> list[dict]:
    return [{"id": id, "region": region} for id in ids]


def cached_preview(cache: MetadataCache, metadata_location: str, **options):
    table = cache.load(metadata_location, io=IO)
    return preview(table.metadata, metadata_location, io=table.io, table_path="t", **options)


def lookups(cache: MetadataCache) -> tuple[int, int]:
    stats = cache.stats()
    return stats.hits, stats.misses


@pytest.fixture
def two_manifests(tmp_path: Path):
    table = create_table(tmp_path / "t", SCHEMA, BY_REGION)
    write(table, rows(1, 2, region="eu"))
    write(table, rows(3, region="us"))
    return table


def test_a_warm_cache_serves_the_metadata_and_the_plan(two_manifests):
    cache = MetadataCache()

    cold = cached_preview(cache, two_manifests.metadata_location)
    after_cold = lookups(cache)
    warm = cached_preview(cache, two_manifests.metadata_location)

    # Cold: the metadata, the plan, then what planning read: the list and two manifests.
    assert after_cold == (0, 5)
    assert lookups(cache) == (2, 5)
    assert warm.rows == cold.rows and len(warm.rows) == 3
    assert warm.pruning == cold.pruning
    assert cache.stats().kinds == {"metadata": 1, "plan": 1, "manifest-list": 1, "manifest": 2}


def test_another_filter_on_a_warm_cache_plans_from_the_cached_manifests(two_manifests):
    cache = MetadataCache()
    cached_preview(cache, two_manifests.metadata_location)

    result = cached_preview(cache, two_manifests.metadata_location, row_filter="id > 1")

    # The metadata, the list and both manifests hit; only the new plan missed.
    assert lookups(cache) == (4, 5 + 1)
    assert sorted(values[0] for values in result.rows) == [2, 3]
    assert cache.stats().kinds["plan"] == 2


def test_a_manifest_pruned_by_its_partition_summaries_is_never_read_or_cached(two_manifests):
    cache = MetadataCache()

    result = cached_preview(cache, two_manifests.metadata_location, row_filter="region = 'us'")

    assert result.pruning.manifests_skipped == 1
    assert cache.stats().kinds == {"metadata": 1, "plan": 1, "manifest-list": 1, "manifest": 1}


def test_a_new_metadata_file_drops_the_entries_of_the_previous_one(two_manifests):
    cache = MetadataCache()
    cached_preview(cache, two_manifests.metadata_location)
    write(two_manifests, rows(4, region="ap"))

    result = cached_preview(cache, two_manifests.metadata_location)

    assert sorted(values[0] for values in result.rows) == [1, 2, 3, 4]
    # The new state's entries only, though two of its manifests are the same files: they
    # were read again.
    assert cache.stats().kinds == {"metadata": 1, "plan": 1, "manifest-list": 1, "manifest": 3}
    assert lookups(cache) == (0, 5 + 6)


def test_the_cache_stays_within_its_bound_least_recently_used_out_first(tmp_path: Path):
    first = create_table(tmp_path / "a", SCHEMA)
    second = create_table(tmp_path / "b", SCHEMA)
    probe = MetadataCache()
    probe.load(first.metadata_location, io=IO)
    one_entry = probe.stats().bytes
    cache = MetadataCache(max_bytes=one_entry + one_entry // 2)

    cache.load(first.metadata_location, io=IO)
    cache.load(second.metadata_location, io=IO)
    cache.load(second.metadata_location, io=IO)  # hit
    cache.load(first.metadata_location, io=IO)  # evicted: a miss again

    stats = cache.stats()
    assert stats.bytes <= stats.max_bytes and stats.entries == 1
    assert (stats.hits, stats.misses, stats.evictions) == (1, 3, 2)


def test_an_entry_larger_than_the_bound_is_not_kept(tmp_path: Path):
    table = create_table(tmp_path / "t", SCHEMA)
    cache = MetadataCache(max_bytes=10)

    cache.load(table.metadata_location, io=IO)
    cache.load(table.metadata_location, io=IO)

    assert cache.stats().entries == 0 and cache.stats().bytes == 0
    assert lookups(cache) == (0, 2)


def test_the_file_io_serves_avro_metadata_bytes_from_the_cache(two_manifests):
    cache = MetadataCache()
    table = cache.load(two_manifests.metadata_location, io=IO)
    manifest_list = two_manifests.current_snapshot().manifest_list

    first = list(read_manifest_list(table.io.new_input(manifest_list)))
    second = list(read_manifest_list(table.io.new_input(manifest_list)))

    assert [m.manifest_path for m in first] == [m.manifest_path for m in second]
    assert len(table.io.new_input(manifest_list)) == Path(manifest_list).stat().st_size
    assert lookups(cache) == (2, 2)  # metadata and the list's bytes missed once each
    # Data files are not metadata: read straight through.
    data_file = next((Path(two_manifests.location()) / "data").glob("*.parquet"))
    assert isinstance(table.io.new_input(str(data_file)), PyArrowFile)


def test_gzip_metadata_files_load_and_bad_ones_are_refused(two_manifests, tmp_path: Path):
    compressed = tmp_path / "v9.gz.metadata.json"
    compressed.write_bytes(gzip.compress(Path(two_manifests.metadata_location).read_bytes()))
    broken = tmp_path / "v10.metadata.json"
    broken.write_text("{not json")
    cache = MetadataCache()

    loaded = cache.load(str(compressed), io=IO)

    assert loaded.metadata.table_uuid == two_manifests.metadata.table_uuid
    with pytest.raises(InvalidMetadata, match="not valid JSON"):
        cache.load(str(broken), io=IO)
    with pytest.raises(NotFound):
        cache.load(str(tmp_path / "v11.metadata.json"), io=IO)


def test_concurrent_previews_share_one_cache(two_manifests):
    cache = MetadataCache()
    results: list = []

    def run() -> None:
        for _ in range(5):
            results.append(cached_preview(cache, two_manifests.metadata_location).rows)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(results) == 20 and all(result == results[0] for result in results)
    stats = cache.stats()
    # Each preview looks up the metadata and the plan; a cold one its files too.
    assert stats.hits >= 20 * 2 - 4 * 5
    assert stats.kinds == {"metadata": 1, "plan": 1, "manifest-list": 1, "manifest": 2}


# -- a table recreated at the same location ---------------------------------------------


@pytest.fixture
def same_names():
    """Makes tables whose every file name (table UUID, snapshot ids, manifest lists,
    manifests, data files) is the same each time: uuid4 replayed from one seed."""

    def make(location: Path, ids: list[int], region: str = "eu"):
        generator = random.Random(7)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(
                uuid, "uuid4", lambda: uuid.UUID(int=generator.getrandbits(128), version=4)
            )
            table = create_table(location, SCHEMA, BY_REGION)
            write(table, rows(*ids, region=region), names=["part-0"])
        return table

    return make


def files_under(location: Path) -> list[str]:
    return sorted(str(path.relative_to(location)) for path in location.rglob("*") if path.is_file())


def test_a_table_recreated_with_the_same_file_names_is_not_read_from_the_old_entries(
    tmp_path: Path, same_names
):
    location = tmp_path / "t"
    old = same_names(location, [1, 2])
    old_files = files_under(location)
    cache = MetadataCache()
    assert cached_preview(cache, old.metadata_location).rows == ((1, "eu"), (2, "eu"))

    shutil.rmtree(location)
    new = same_names(location, [7, 8, 9], region="us")

    assert files_under(location) == old_files  # v2.metadata.json, snap-...avro, ...
    assert new.metadata_location == old.metadata_location
    # The old table's manifest would put the one data file in partition eu.
    result = cached_preview(cache, new.metadata_location, row_filter="region = 'us'")
    assert result.rows == ((7, "us"), (8, "us"), (9, "us"))
    assert cache.stats().kinds == {"metadata": 1, "plan": 1, "manifest-list": 1, "manifest": 1}


def test_pyiceberg_path_keyed_manifest_cache_would_serve_a_recreated_table_stale_records(
    tmp_path: Path, same_names, monkeypatch: pytest.MonkeyPatch
):
    # A fresh, enabled instance of pyiceberg's process-wide cache (MetadataCache turns the
    # real one off), to show what it would do.
    monkeypatch.setattr(pyiceberg_manifest, "_manifest_cache", pyiceberg_manifest._ManifestCache())
    location = tmp_path / "t"
    old = same_names(location, [1, 2])
    assert old.current_snapshot().manifests(IO)[0].added_rows_count == 2
    shutil.rmtree(location)
    new = same_names(location, [7, 8, 9])

    stale = new.current_snapshot().manifests(IO)[0].added_rows_count
    disable_pyiceberg_manifest_cache()
    fresh = new.current_snapshot().manifests(IO)[0].added_rows_count

    assert (stale, fresh) == (2, 3)

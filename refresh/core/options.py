"""The options a materialized table takes (`WITH (...)`, `SET (...)`, `RESET (...)`) and the
options one run takes (`RESUME WITH (...)`, the refresh endpoint's `config`).

Flink passes a materialized table's options to its connector, which refuses what it does not
know. Here the "connector" is an Iceberg table written by Spark, so the known options are:

- `partition.fields.<column>.date-formatter`: FLIP-435's option, the partition a scheduled
  refresh overwrites (refresh.core.partitions);
- the Iceberg table properties that shape what a refresh writes (`write.*`, the file
  format and its compression, target file sizes...): they are written to the table's
  properties, where Spark's Iceberg writer reads them;
- `refresh.incremental` ('auto' by default, 'strict' or 'off'; 'true' and 'false' read as
  'auto' and 'off') and `refresh.incremental.max-change-ratio` (a share of a source's rows,
  0.3 by default): how a FULL table's refreshes may apply only what its sources changed
  (refresh.core.incremental);
- `refresh.timeout-seconds`: how long one of its batch refreshes may run before its worker
  stops it (`run_time_limit`; never longer than the deployment's limit).

A run's options are Spark SQL settings for that run's session only (`spark.sql.*`), the
counterpart of Flink's dynamic options: a resumed table's jobs, or one refresh, may use more
shuffle partitions without the table remembering it.

Anything else is refused, naming the option and what is known: a typo must not be kept
silently and then ignored."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping

from catalog.core.errors import InvalidInput
from catalog.core.inputs import whole_number
from refresh.core.incremental import INCREMENTAL_OPTION, POLICIES, RATIO_OPTION
from refresh.core.partitions import formatter_column

#: Iceberg table properties a user may set on a materialized table (Iceberg's TableProperties
#: names; values are checked by Iceberg's writer).
TABLE_PROPERTIES = frozenset(
    {
        "write.format.default",
        "write.parquet.compression-codec",
        "write.parquet.compression-level",
        "write.parquet.row-group-size-bytes",
        "write.parquet.page-size-bytes",
        "write.orc.compression-codec",
        "write.avro.compression-codec",
        "write.target-file-size-bytes",
        "write.distribution-mode",
        "write.merge.mode",
        "write.update.mode",
        "write.delete.mode",
        "write.metadata.delete-after-commit.enabled",
        "write.metadata.previous-versions-max",
        "history.expire.max-snapshot-age-ms",
        "history.expire.min-snapshots-to-keep",
    }
)

#: A run's settings are limited to these, each with the values it takes, so that one user's
#: run cannot take the worker down with it: a shuffle of two billion partitions asks one
#: JVM for arrays of 16 GB (an OutOfMemoryError ends the worker's Spark for every table), a
#: partition of one byte makes a task per byte, a file per row is a table no reader can
#: plan. A class name (spark.sql.adaptive.customCostEvaluatorClass) is no run's to choose.
#: Values reach Spark as this module writes them (byte sizes in bytes), so Spark reads
#: exactly what was checked.
MAX_PARTITIONS = 100_000
_Check = Callable[[str], str | None]  # the value as Spark is to read it, or None: refused
_MIB = 1 << 20
_TIB = 1 << 40
_BYTE_UNITS = {
    "": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "m": _MIB, "mb": _MIB, "g": 1 << 30,
    "gb": 1 << 30, "t": _TIB, "tb": _TIB, "p": 1 << 50, "pb": 1 << 50,
}  # fmt: skip


def _count(low: int, high: int) -> tuple[str, _Check]:
    def check(value: str) -> str | None:
        number = whole_number(value, digits=12)
        return str(number) if number is not None and low <= number <= high else None

    return f"a whole number from {low} to {high}", check


def _bytes(low: int) -> tuple[str, _Check]:
    def check(value: str) -> str | None:
        # Spark's byte strings (JavaUtils.byteStringAs): digits and an optional unit.
        found = re.fullmatch(r"([0-9]{1,16})([a-z]{0,2})", value.lower())
        if found is None or found.group(2) not in _BYTE_UNITS:
            return None
        size = int(found.group(1)) * _BYTE_UNITS[found.group(2)]
        return str(size) if low <= size <= _TIB else None

    smallest = f"{low // _MIB}m" if low >= _MIB else f"{low} bytes"
    return f"a size from {smallest} to 1t (such as 64m)", check


def _boolean() -> tuple[str, _Check]:
    return "true or false", lambda value: value.lower() if value.lower() in (
        "true",
        "false",
    ) else None


def _factor(low: float, high: float, *, exclusive: bool = False) -> tuple[str, _Check]:
    """A decimal number in [low, high], or in (low, high) when `exclusive` (as Spark's
    own check of the setting says)."""

    def check(value: str) -> str | None:
        if not re.fullmatch(r"[0-9]{1,9}(\.[0-9]{1,9})?", value):
            return None
        number = float(value)
        inside = low < number < high if exclusive else low <= number <= high
        return value if inside else None

    if exclusive:
        return f"a number above {_plain(low)} and below {_plain(high)}", check
    return f"a number from {_plain(low)} to {_plain(high)}", check


def _plain(number: float) -> str:
    return str(int(number)) if number == int(number) else str(number)


RUN_SETTINGS: dict[str, tuple[str, _Check]] = {
    "spark.sql.shuffle.partitions": _count(1, MAX_PARTITIONS),
    "spark.sql.adaptive.enabled": _boolean(),
    "spark.sql.adaptive.coalescePartitions.enabled": _boolean(),
    "spark.sql.adaptive.coalescePartitions.parallelismFirst": _boolean(),
    "spark.sql.adaptive.coalescePartitions.initialPartitionNum": _count(1, MAX_PARTITIONS),
    "spark.sql.adaptive.coalescePartitions.minPartitionSize": _bytes(1),
    "spark.sql.adaptive.advisoryPartitionSizeInBytes": _bytes(_MIB),
    "spark.sql.adaptive.localShuffleReader.enabled": _boolean(),
    "spark.sql.adaptive.skewJoin.enabled": _boolean(),
    "spark.sql.adaptive.skewJoin.skewedPartitionFactor": _factor(1, 1_000_000),
    "spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes": _bytes(_MIB),
    "spark.sql.adaptive.forceOptimizeSkewedJoin": _boolean(),
    "spark.sql.adaptive.optimizeSkewsInRebalancePartitions.enabled": _boolean(),
    "spark.sql.adaptive.rebalancePartitionsSmallPartitionFactor": _factor(0, 1, exclusive=True),
    "spark.sql.files.maxPartitionBytes": _bytes(_MIB),
    "spark.sql.files.openCostInBytes": _bytes(0),
    "spark.sql.files.minPartitionNum": _count(1, MAX_PARTITIONS),
    "spark.sql.files.maxPartitionNum": _count(1, MAX_PARTITIONS),
    "spark.sql.files.ignoreCorruptFiles": _boolean(),
    "spark.sql.files.ignoreMissingFiles": _boolean(),
}

DATE_FORMATTER_KEY = "partition.fields.<column>.date-formatter"

#: How long one batch refresh of the table may run, in whole seconds.
TIMEOUT_OPTION = "refresh.timeout-seconds"


def _known_table_options() -> str:
    return ", ".join(
        [
            DATE_FORMATTER_KEY,
            INCREMENTAL_OPTION,
            RATIO_OPTION,
            TIMEOUT_OPTION,
            *sorted(TABLE_PROPERTIES),
        ]
    )


def _timeout_seconds(value: str) -> int | None:
    seconds = whole_number(value.strip(), digits=9)
    return seconds if seconds else None


def _ratio(value: str) -> float | None:
    try:
        ratio = float(value.strip())
    except ValueError:
        return None
    return ratio if 0 < ratio <= 1 else None


def run_time_limit(options: Mapping[str, str] | None, *, cap: int) -> int | None:
    """The seconds a batch run of a table with `options` may take before its worker stops
    it: the table's TIMEOUT_OPTION, but never more than the deployment's `cap`; `cap` alone
    without one. None (no limit) when `cap` is 0 and the table sets none."""
    own = _timeout_seconds((options or {}).get(TIMEOUT_OPTION, ""))
    limits = [limit for limit in (own, cap) if limit]
    return min(limits) if limits else None


def check_table_options(options: Mapping[str, str], *, field: str = "options") -> dict[str, str]:
    """The options as strings, or InvalidInput naming the first unknown one."""
    checked: dict[str, str] = {}
    for key, value in options.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise InvalidInput("Options map text keys to text values", field=field)
        if key == INCREMENTAL_OPTION:
            if value.strip().lower() not in POLICIES and value != "":
                raise InvalidInput(
                    f"Option {INCREMENTAL_OPTION!r} is 'auto', 'strict' or 'off', not "
                    f"{value[:100]!r}",
                    field=field,
                )
        elif key == RATIO_OPTION:
            if value != "" and _ratio(value) is None:
                raise InvalidInput(
                    f"Option {RATIO_OPTION!r} is a share of a source's rows, a number above 0 "
                    f"and at most 1, not {value[:100]!r}",
                    field=field,
                )
        elif key == TIMEOUT_OPTION:
            if _timeout_seconds(value) is None:
                raise InvalidInput(
                    f"Option {TIMEOUT_OPTION!r} is a whole number of seconds from 1 to "
                    f"999999999, not {value[:100]!r}",
                    field=field,
                )
        elif formatter_column(key) is None and key not in TABLE_PROPERTIES:
            raise InvalidInput(
                f"Unknown option {key!r} for a materialized table. Known options: "
                f"{_known_table_options()}",
                field=field,
            )
        checked[key] = value
    return checked


def check_option_keys(keys: Iterable[str], *, field: str = "options") -> tuple[str, ...]:
    """Keys for RESET: each must be an option a materialized table can have."""
    checked = []
    for key in keys:
        if not isinstance(key, str):
            raise InvalidInput("Options are named by text", field=field)
        if key not in (INCREMENTAL_OPTION, RATIO_OPTION, TIMEOUT_OPTION):  # no empty value
            check_table_options({key: ""}, field=field)
        checked.append(key)
    return tuple(checked)


def check_run_options(options: Mapping[str, str], *, field: str = "options") -> dict[str, str]:
    """Options for one run (RESUME WITH, the refresh endpoint's config): Spark SQL settings
    of that run's session, each one RUN_SETTINGS knows with a value it takes, as Spark is to
    read it; InvalidInput naming the first that is not."""
    checked: dict[str, str] = {}
    for key, value in options.items():
        if not isinstance(key, str) or not isinstance(value, str | int | float | bool):
            raise InvalidInput("Options map text keys to text values", field=field)
        if key not in RUN_SETTINGS:
            raise InvalidInput(
                f"Unknown run option {key[:200]!r}: a run takes these Spark SQL settings: "
                f"{', '.join(RUN_SETTINGS)}",
                field=field,
            )
        what, check = RUN_SETTINGS[key]
        text = str(value).lower() if isinstance(value, bool) else str(value).strip()
        normal = check(text)
        if normal is None:
            raise InvalidInput(f"Run option {key!r} is {what}, not {text[:100]!r}", field=field)
        checked[key] = normal
    return checked

"""The options a materialized table takes (`WITH (...)`, `SET (...)`, `RESET (...)`) and the
options one run takes (`RESUME WITH (...)`, the refresh endpoint's `config`).

Flink passes a materialized table's options to its connector, which refuses what it does not
know. Here the "connector" is an Iceberg table written by Spark, so the known options are:

- `partition.fields.<column>.date-formatter`: FLIP-435's option, the partition a scheduled
  refresh overwrites (refresh.core.partitions);
- the Iceberg table properties that shape what a refresh writes (`write.*`, the file
  format and its compression, target file sizes...): they are written to the table's
  properties, where Spark's Iceberg writer reads them;
- `refresh.incremental` ('true' by default, or 'false'): whether a FULL table's refreshes
  may apply only what its sources appended (refresh.core.incremental);
- `refresh.timeout-seconds`: how long one of its batch refreshes may run before its worker
  stops it (`run_time_limit`; never longer than the deployment's limit).

A run's options are Spark SQL settings for that run's session only (`spark.sql.*`), the
counterpart of Flink's dynamic options: a resumed table's jobs, or one refresh, may use more
shuffle partitions without the table remembering it.

Anything else is refused, naming the option and what is known: a typo must not be kept
silently and then ignored."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from catalog.core.errors import InvalidInput
from catalog.core.inputs import whole_number
from refresh.core.incremental import INCREMENTAL_OPTION
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

#: Spark settings a single run may take (they only change how the job runs).
RUN_SETTING_PREFIXES = ("spark.sql.shuffle.partitions", "spark.sql.adaptive.", "spark.sql.files.")

DATE_FORMATTER_KEY = "partition.fields.<column>.date-formatter"

#: How long one batch refresh of the table may run, in whole seconds.
TIMEOUT_OPTION = "refresh.timeout-seconds"


def _known_table_options() -> str:
    return ", ".join(
        [DATE_FORMATTER_KEY, INCREMENTAL_OPTION, TIMEOUT_OPTION, *sorted(TABLE_PROPERTIES)]
    )


def _timeout_seconds(value: str) -> int | None:
    seconds = whole_number(value.strip(), digits=9)
    return seconds if seconds else None


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
            if value.strip().lower() not in ("true", "false") and value != "":
                raise InvalidInput(
                    f"Option {INCREMENTAL_OPTION!r} is 'true' or 'false', not {value[:100]!r}",
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
        if key not in (INCREMENTAL_OPTION, TIMEOUT_OPTION):  # both take no empty value
            check_table_options({key: ""}, field=field)
        checked.append(key)
    return tuple(checked)


def check_run_options(options: Mapping[str, str], *, field: str = "options") -> dict[str, str]:
    """Options for one run (RESUME WITH, the refresh endpoint's config): Spark SQL settings
    of that run's session."""
    checked: dict[str, str] = {}
    for key, value in options.items():
        if not isinstance(key, str) or not isinstance(value, str | int | float | bool):
            raise InvalidInput("Options map text keys to text values", field=field)
        if not any(
            key == p or (p.endswith(".") and key.startswith(p)) for p in RUN_SETTING_PREFIXES
        ):
            known = ", ".join(p + ("*" if p.endswith(".") else "") for p in RUN_SETTING_PREFIXES)
            raise InvalidInput(
                f"Unknown run option {key!r}: a run takes Spark SQL settings ({known})",
                field=field,
            )
        checked[key] = str(value).lower() if isinstance(value, bool) else str(value)
    return checked

"""A run's Spark settings (RESUME WITH, the refresh endpoint's `config`): only those that
change how a job runs, each with values that cannot take the worker's Spark down, passed to
Spark as checked."""

from __future__ import annotations

import pytest

from catalog.core.errors import InvalidInput
from refresh.core.options import MAX_PARTITIONS, check_run_options
from refresh.spark import jobs

AQE = "spark.sql.adaptive."
PARTITIONS = "spark.sql.shuffle.partitions"
MAX_BYTES = "spark.sql.files.maxPartitionBytes"
ADVISORY = AQE + "advisoryPartitionSizeInBytes"
SMALL_FACTOR = AQE + "rebalancePartitionsSmallPartitionFactor"


@pytest.mark.parametrize(
    "given, passed",
    [
        ({PARTITIONS: 8}, {PARTITIONS: "8"}),
        ({PARTITIONS: " 400 "}, {PARTITIONS: "400"}),
        ({AQE + "enabled": False}, {AQE + "enabled": "false"}),
        ({AQE + "skewJoin.enabled": "TRUE"}, {AQE + "skewJoin.enabled": "true"}),
        # Byte sizes as Spark writes them, passed on in bytes: Spark reads what was checked.
        ({MAX_BYTES: "128m"}, {MAX_BYTES: str(128 << 20)}),
        ({ADVISORY: "1GB"}, {ADVISORY: str(1 << 30)}),
        ({SMALL_FACTOR: "0.2"}, {SMALL_FACTOR: "0.2"}),
    ],
)  # fmt: skip
def test_settings_a_run_may_take_reach_spark_in_the_form_spark_reads(given, passed):
    assert check_run_options(given) == passed


@pytest.mark.parametrize(
    "given, named",
    [
        # Two billion shuffle partitions: arrays of 16 GB in the worker's one JVM.
        ({"spark.sql.shuffle.partitions": "2000000000"}, "is a whole number from 1 to 100000"),
        ({"spark.sql.shuffle.partitions": str(MAX_PARTITIONS + 1)}, "from 1 to 100000"),
        ({"spark.sql.shuffle.partitions": "0"}, "from 1 to 100000"),
        ({"spark.sql.shuffle.partitions": "-4"}, "from 1 to 100000"),
        ({"spark.sql.shuffle.partitions": "²"}, "from 1 to 100000"),
        ({"spark.sql.shuffle.partitions": "9" * 5000}, "from 1 to 100000"),
        ({"spark.sql.adaptive.coalescePartitions.initialPartitionNum": "10000000"}, "from 1"),
        # A task per byte of input.
        ({"spark.sql.files.maxPartitionBytes": "1"}, "is a size from 1m to 1t"),
        ({"spark.sql.adaptive.advisoryPartitionSizeInBytes": "12xb"}, "is a size from 1m"),
        ({"spark.sql.files.maxPartitionBytes": "2p"}, "to 1t"),
        ({"spark.sql.adaptive.enabled": "yes"}, "is true or false"),
        ({"spark.sql.adaptive.skewJoin.skewedPartitionFactor": "1e9"}, "from 1 to 1000000"),
        ({"spark.sql.adaptive.skewJoin.skewedPartitionFactor": "nan"}, "from 1 to 1000000"),
        # A class to load is no run's to choose; nor is anything outside the list.
        ({"spark.sql.adaptive.customCostEvaluatorClass": "x.Y"}, "Unknown run option"),
        ({"spark.sql.adaptive.optimizer.excludedRules": "x"}, "Unknown run option"),
        ({"spark.sql.files.maxRecordsPerFile": "1"}, "Unknown run option"),
        ({"spark.sql.runSQLOnFiles": "true"}, "Unknown run option"),
        ({"spark.sql.catalog.x": "org.apache.iceberg.spark.SparkCatalog"}, "Unknown run option"),
    ],
)
def test_a_setting_that_could_take_the_worker_down_is_refused_naming_it(given, named):
    [key] = given
    with pytest.raises(InvalidInput, match=named) as refused:
        check_run_options(given)
    assert key[:40] in refused.value.message and refused.value.field == "options"


class _NoSpark:
    def newSession(self):  # noqa: N802 - Spark's name
        raise AssertionError("a refused setting must never reach Spark")


def test_options_stored_before_a_rule_tightened_fail_the_run_before_reaching_spark():
    with pytest.raises(InvalidInput, match="spark.sql.shuffle.partitions"):
        jobs.run_session(
            _NoSpark(),
            catalog="lakeview",
            namespace=["sales"],
            settings={"spark.sql.shuffle.partitions": "2000000000"},
        )

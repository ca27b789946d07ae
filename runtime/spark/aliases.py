"""The other names a Spark session gives the app's catalog. Django-free.

An engine's view names the catalog as that engine does (`lake.shop.orders`); a run's session
registers the app's catalog again under each such name (runtime.spark.session.session_with)
and lists them in ALIASES_SETTING, so that the sandbox reads relations through them as the
catalog's own, and runtime.spark.policies applies a table's policies whichever name reads it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: The session setting naming the other names of the app's catalog in it (refresh.spark.jobs
#: registers them): relations read through them are the catalog's own.
ALIASES_SETTING = "lakeview.sandbox.catalogAliases"


def aliases_of(spark: SparkSession) -> frozenset[str]:
    """The names engines give this catalog that `spark` registered (ALIASES_SETTING)."""
    return frozenset(filter(None, spark.conf.get(ALIASES_SETTING, "").split(",")))

"""A local SparkSession set up for pysparklog: the one the main job, the examples and the notebooks start.

Spark runs Python code in worker processes started with ``PYSPARK_PYTHON``, not with the interpreter
that started Spark, so both are pointed at this interpreter (the project's environment) unless the
caller set them. With ``delta=True`` Delta Lake's jars come from Maven Central through
``spark.jars.packages``; Spark's Ivy resolver keeps them in its cache (``~/.ivy2.5.2``), so only the
first run downloads them. Nothing is vendored. The resolver also looks in ``~/.m2``, and takes a
dependency found there as a POM without its jar as found, then fails ("FAILED DOWNLOADS"): a
``~/.m2`` filled by ``mvn dependency:get`` of other versions breaks it, so fetch exactly the versions
Spark's report names (``mvn dependency:get -Dtransitive=false``) or let Spark download them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from pyspark.sql import SparkSession

#: Delta Lake's Spark jars. The ``delta-spark`` Python package is 4.4.1, a Python-only release: Maven
#: Central has no 4.4.1 jars for Spark 4.2 (``delta-spark_4.2_2.13`` stops at 4.4.0, which is what
#: ``configure_spark_with_delta_pip`` would ask for with its version), so the jars are 4.4.0's.
DELTA_PACKAGE = "io.delta:delta-spark_4.2_2.13:4.4.0"
_DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}


def local_spark(
    app_name: str,
    *,
    delta: bool = False,
    master: str = "local[2]",
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """A local SparkSession (or the running one) for pysparklog jobs.

    Args:
        app_name: Spark's application name.
        delta: Add Delta Lake (its jars, its SQL extension and catalog).
        master: Spark's master (default two local cores).
        conf: More Spark settings; they win over these defaults.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    settings = {
        "spark.ui.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "2",
        "spark.python.worker.reuse": "true",
        "spark.sql.streaming.stopGracefullyOnShutdown": "true",
    }
    if delta:
        settings |= {"spark.jars.packages": DELTA_PACKAGE, **_DELTA_CONF}
    settings |= dict(conf or {})
    builder = SparkSession.builder.master(master).appName(app_name)
    for name, value in settings.items():
        builder = builder.config(name, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark

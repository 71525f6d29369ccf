"""``python -m tests.warm_caches``: fill the caches the suite's jars come from, in one process, before the suite's
workers start (``make test``).

The suite runs on two workers (pytest-xdist), and on a fresh machine both would otherwise download the same
jars at once: Spark's Ivy resolver (``spark.jars.packages``) keeps no lock on its cache, so two JVMs resolving
Delta Lake's jars together can leave each other a half-written file, and two ``mvn`` runs can race for the same
artifacts in ``~/.m2``. Once cached, each is read-only for the suite. Whatever fails here is left for the test
that needs it to report.
"""

from __future__ import annotations

import sys

from tests.interop.kafka_tools import BROKER, TOOLS


def main() -> int:
    for classpath in (TOOLS, BROKER):
        if classpath.resolve() is None:
            print(f"tests.warm_caches: {classpath.pom}: {classpath.reason}", file=sys.stderr)
    from pysparklog.spark.session import local_spark

    spark = local_spark("pysparklog-warm-caches", delta=True)  # Delta's jars through spark.jars.packages
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

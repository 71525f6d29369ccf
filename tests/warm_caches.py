"""``python -m tests.warm_caches``: fill the caches the suite's jars and clients come from, in one process, before
the suite's workers start (``make test``).

The suite runs on two workers (pytest-xdist), and on a fresh machine both would otherwise download the same jars
at once: Spark's Ivy resolver (``spark.jars.packages``) keeps no lock on its cache, so two JVMs resolving Delta
Lake's jars or Spark's Kafka connector together can leave each other a half-written file, and two ``mvn`` runs
can race for the same artifacts in ``~/.m2``; the Java client harness is compiled and kcat fetched into
``.cache`` here too. Once cached, each is read-only for the suite. Whatever fails here is left for the test that
needs it to report.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from tests.endpoint.spark_kafka_compare import KAFKA_PACKAGE
from tests.interop.java_clients import JAVA_CLIENTS
from tests.interop.kafka_tools import BROKER, TOOLS
from tests.interop.kcat import KCAT


def main() -> int:
    for classpath in (TOOLS, BROKER):
        if classpath.resolve() is None:
            print(f"tests.warm_caches: {classpath.pom}: {classpath.reason}", file=sys.stderr)
    _quietly("the Java client harness", lambda: JAVA_CLIENTS.classpath())  # compiled against the broker's jars
    _quietly("kcat", KCAT.resolve)  # Debian's package, fetched into .cache when not installed
    from pysparklog.spark.session import DELTA_PACKAGE, local_spark

    # Delta's jars and Spark's Kafka connector through spark.jars.packages, resolved together into Ivy's cache.
    packages = {"spark.jars.packages": f"{DELTA_PACKAGE},{KAFKA_PACKAGE}"}
    spark = local_spark("pysparklog-warm-caches", delta=True, conf=packages)
    spark.stop()
    return 0


def _quietly(what: str, fetch: Callable[[], object]) -> None:
    try:
        fetch()
    except Exception as e:  # the test that needs it reports it
        print(f"tests.warm_caches: {what}: {type(e).__name__}: {e}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())

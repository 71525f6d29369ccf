"""Makes ``format("pysparklog")`` work without a registration line.

Spark (4.0+) imports every installed top-level module whose name starts with ``pyspark_`` and
registers the ``DefaultSource`` it exposes as a Python data source; ``pysparklog`` itself does not
match that prefix, so this module stands in for it.
"""

from pysparklog.datasource_v2 import PySparkLogDataSource as DefaultSource

__all__ = ["DefaultSource"]

"""Runnable examples of pysparklog, one module per scenario (see ``examples/README.md``).

Each module runs with ``python -m examples.<name>`` from the checkout and keeps its steps in small
functions that take the SparkSession and the directories explicitly, so that a notebook can import
and call them one by one (``from examples.quickstart import produce_orders``).
"""

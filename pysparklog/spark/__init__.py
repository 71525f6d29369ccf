"""The Spark adapter: Kafka's source and sink options, micro-batch planning, the exactly-once sink protocol,
Spark's Arrow form of the rows, the offsets-behind-latest listener and the local session.

``pysparklog.datasource_v2`` is the data source Spark loads, a thin layer over these modules; they hold the
logic and run without a SparkSession, so they are tested without one.
"""

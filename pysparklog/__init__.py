"""pysparklog: a broker-less, Kafka-byte-compatible partitioned log, with Spark as the runtime."""

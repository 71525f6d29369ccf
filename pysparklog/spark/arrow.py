"""The Arrow and Spark form of the Kafka source's rows, in one place.

Spark checks the batches a Python data source yields against ``to_arrow_schema(schema)`` exactly:
types, time zone and nullability. The engine's decoder yields timestamps in milliseconds and
header keys marked non-null, as Kafka defines them; Spark wants microseconds and every field
nullable, so each batch is cast once here (the values are kept; only buffers of timestamps are
rewritten).
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

_HEADERS = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
_FIELDS = [
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
]

#: Spark's Kafka source schema, without and with ``headers`` (``includeHeaders``).
SOURCE_SCHEMA = StructType(_FIELDS)
SOURCE_SCHEMA_WITH_HEADERS = StructType([*_FIELDS, StructField("headers", _HEADERS)])


def source_schema(include_headers: bool) -> StructType:
    return SOURCE_SCHEMA_WITH_HEADERS if include_headers else SOURCE_SCHEMA


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema Spark expects for ``source_schema(include_headers)``: derived as Spark derives
    the schema it checks batches against."""
    return _ARROW_SCHEMAS[include_headers]


_ARROW_SCHEMAS = {h: to_arrow_schema(source_schema(h), timezone="UTC") for h in (False, True)}


def to_spark_batch(batch: pa.RecordBatch, include_headers: bool) -> pa.RecordBatch:
    """An engine batch (``arrow_records.RECORD_SCHEMA[_WITH_HEADERS]``) in the form Spark accepts."""
    return batch.cast(arrow_schema(include_headers))

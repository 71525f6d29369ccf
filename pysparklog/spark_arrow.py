"""The Arrow and Spark form of the Kafka source's rows, in one place.

Spark checks the batches a Python data source yields against ``to_arrow_schema(schema)`` exactly:
types, time zone and nullability. The engine's decoder yields timestamps in milliseconds and
header keys marked non-null, as Kafka defines them; Spark wants microseconds and every field
nullable, so each batch is cast once here (the values are kept; only buffers of timestamps are
rewritten).
"""

from __future__ import annotations

import pyarrow as pa
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

_ARROW_HEADERS = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
_ARROW_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
]
_ARROW_SCHEMA = pa.schema(_ARROW_FIELDS)
_ARROW_SCHEMA_WITH_HEADERS = pa.schema([*_ARROW_FIELDS, pa.field("headers", _ARROW_HEADERS)])


def source_schema(include_headers: bool) -> StructType:
    return SOURCE_SCHEMA_WITH_HEADERS if include_headers else SOURCE_SCHEMA


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema Spark expects for ``source_schema(include_headers)``."""
    return _ARROW_SCHEMA_WITH_HEADERS if include_headers else _ARROW_SCHEMA


def to_spark_batch(batch: pa.RecordBatch, include_headers: bool) -> pa.RecordBatch:
    """An engine batch (``arrow_records.RECORD_SCHEMA[_WITH_HEADERS]``) in the form Spark accepts."""
    return batch.cast(arrow_schema(include_headers))

"""``pysparklog console-producer``: Kafka's ``kafka-console-producer.sh``, appending the lines of stdin to a topic.

Each line is a record: its value, or with ``--property parse.key=true`` its key, ``key.separator``
(a tab by default) and its value. Records get the time they are appended (CreateTime) and go where
Kafka's producer would send them (``pysparklog.partitioner``): to ``--partition`` when it is given,
else to the partition of the key's murmur2 hash, else by uniform sticky partitioning.

Lines are read in blocks and each block is sent with one ``Producer.send_arrow``
(``pysparklog.producer``), which appends each partition's lines in record batches of at most
``batch.size`` (16384) bytes, as Kafka's producer batches them; the producer is idempotent, as
Kafka's console producer is by default. A block ends after 1 MiB of lines, after a second without
a new line (this tool's ``linger.ms`` in Kafka), or at the end of stdin, so lines typed by hand or
piped from a slow process reach consumers within about a second. Lines end at ``\\n``, ``\\r\\n`` or ``\\r``, as
Java's ``BufferedReader.readLine`` ends them; the last one needs no end.

A line without the key separator ends the command with Kafka's message, ``No key separator found
on line number N: '<line>'``, once the lines before it are appended. Ctrl-C appends the complete
lines already read and ends the command with status 130.

Where Kafka's tool differs:

* ``--log-dir`` (default ``$PYSPARKLOG_LOG_DIR``) replaces ``--bootstrap-server``, and the topic
  must exist (``pysparklog topics --create``): nothing creates it automatically.
* ``--partition`` sends every line to one partition; Kafka's tool has no such option.
* Lines are sent as their bytes. Kafka's tool decodes stdin as UTF-8, so invalid bytes become
  U+FFFD there.
* The reader properties are ``parse.key`` and ``key.separator`` (not empty). The other properties of
  Kafka's ``LineMessageReader`` (``parse.headers``, ``headers.*``, ``ignore.error``, ``null.marker``)
  are refused, and so are unknown names, which Kafka ignores.
* A lone ``\\r`` ends a line only once a ``\\n`` follows later in the input, or the input ends.
* No ``>`` prompt on a terminal, and no producer options (``--sync``, ``--batch-size``,
  ``--producer-property``...).
"""

from __future__ import annotations

import argparse
import os
import select
import sys
import time
from collections.abc import Iterator, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pysparklog.cli._common import add_log_dir_argument, open_log_dir
from pysparklog.cli._console import add_property_argument, is_true, parse_properties
from pysparklog.cli.main import EXIT_INTERRUPTED
from pysparklog.errors import InvalidConfigError, PySparkLogError, UnsupportedCodecError
from pysparklog.producer import Producer, ProducerConfig
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.storage.records.codecs import Codec

BATCH_SIZE = 16384  # Kafka's batch.size default, which its console producer keeps
LINGER_S = 1.0  # Kafka's console producer --timeout, its linger.ms: 1000 by default
BLOCK_BYTES = 1024 * 1024
_READ_BYTES = 64 * 1024
_LINE_END = r"\r\n|\r|\n"

_READER_PROPERTIES: Mapping[str, str] = {
    "parse.key": "true to read each line as key<key.separator>value (default false)",
    "key.separator": "what separates the key from the value (default a tab)",
}


class _ReaderError(PySparkLogError):
    """A line the reader cannot turn into a record, reported in the words of Kafka's ``LineMessageReader``."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``console-producer`` to the ``pysparklog`` command."""
    parser = subparsers.add_parser(
        "console-producer",
        help="append the lines of stdin to a topic, as Kafka's kafka-console-producer.sh does",
        description="Read lines from standard input and append them to a topic as records, partitioned as "
        "Kafka's producer partitions them (kafka-console-producer.sh).",
    )
    add_log_dir_argument(parser)
    parser.add_argument("--topic", required=True, help="the topic to append to; it must exist")
    parser.add_argument(
        "--partition", type=_partition, metavar="P", help="append every line to partition P instead of partitioning"
    )
    parser.add_argument(
        "--compression-codec",
        nargs="?",
        type=_codec,
        const=Codec.GZIP,
        default=Codec.NONE,
        metavar="CODEC",
        help="none, gzip, snappy, lz4 or zstd (default: none; the option without a value: gzip)",
    )
    add_property_argument(parser, "--property", accepted=_READER_PROPERTIES)
    parser.set_defaults(run=run)


def _codec(name: str) -> Codec:
    try:
        return Codec.from_name(name)
    except UnsupportedCodecError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _partition(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"invalid partition {text!r}; accepted: an integer >= 0")
    return int(text)


def run(args: argparse.Namespace) -> int:
    reader = _LineReader(parse_properties(args.property, _READER_PROPERTIES))
    logs = open_log_dir(args.log_dir)
    config = ProducerConfig(batch_size=BATCH_SIZE, compression_type=args.compression_codec.kafka_name)
    sender = _Sender(logs, args.topic, args.partition, config)
    blocks = _LineBlocks(sys.stdin.fileno())
    try:
        for block in blocks:
            _send_lines(block, reader, sender)
    except KeyboardInterrupt:
        # Kafka's producer sends what it was given before it closes: the lines already read.
        _send_lines(blocks.complete_lines(), reader, sender)
        return EXIT_INTERRUPTED
    finally:
        sender.close()
    return 0


def _send_lines(block: bytes, reader: _LineReader, sender: _Sender) -> None:
    """Send the records of a block; a line the reader refuses ends the command once the lines before it are sent."""
    records, error = reader.records(block)
    sender.send(records)
    if error is not None:
        raise error


class _LineBlocks:
    """Blocks of whole lines from a file descriptor: a block is taken once ``BLOCK_BYTES`` have been read, once
    the oldest line read has waited ``LINGER_S``, or at the end of the input (where the last line may have no
    line end).

    It reads with ``select`` and ``os.read`` rather than through ``sys.stdin`` so that it can tell a pause in
    the input; what it has read but not yet handed out is pending.
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._pending = bytearray()
        self._since = 0.0  # when the oldest pending byte arrived

    def __iter__(self) -> Iterator[bytes]:
        while True:
            complete = self._pending.rfind(b"\n") + 1
            if complete and (
                len(self._pending) >= BLOCK_BYTES or not self._input_within(self._since + LINGER_S - time.monotonic())
            ):
                yield self._take(complete)
                continue
            chunk = os.read(self._fd, _READ_BYTES)  # without a whole line pending, wait as long as it takes
            if not chunk:
                if self._pending:
                    yield self._take(len(self._pending))
                return
            if not self._pending:
                self._since = time.monotonic()
            self._pending += chunk

    def _input_within(self, seconds: float) -> bool:
        """Whether input is there to read within ``seconds`` (none when that is not positive)."""
        return seconds > 0 and bool(select.select([self._fd], [], [], seconds)[0])

    def complete_lines(self) -> bytes:
        """The pending complete lines, taken out; the rest of a line being read stays."""
        return self._take(self._pending.rfind(b"\n") + 1)

    def _take(self, size: int) -> bytes:
        block = bytes(self._pending[:size])
        del self._pending[:size]
        self._since = time.monotonic()
        return block


class _LineReader:
    """Kafka's ``LineMessageReader`` for whole blocks: lines become a ``value`` column, or ``key`` and ``value``
    columns split at the first key separator, by Arrow kernels rather than line by line.

    Raises:
        InvalidConfigError: ``key.separator`` is empty.
    """

    def __init__(self, properties: Mapping[str, str]) -> None:
        self.parse_key = is_true(properties.get("parse.key", "false"))
        self.key_separator = properties.get("key.separator", "\t")
        if not self.key_separator:
            raise InvalidConfigError("key.separator is empty; accepted: one or more characters")
        self._lines_read = 0

    def records(self, block: bytes) -> tuple[pa.Table, _ReaderError | None]:
        """The records of a block of lines, and the error of the first line that makes none (then the records
        are those of the lines before it).

        With ``parse.key`` a line without the key separator is such a line; the error is Kafka's message,
        which counts lines from 1.
        """
        lines = pc.split_pattern_regex(pa.array([block], pa.binary()), pattern=_LINE_END).flatten()
        if block.endswith((b"\n", b"\r")):
            lines = lines.slice(0, len(lines) - 1)  # the empty string after the last line end
        first_line = self._lines_read + 1
        self._lines_read += len(lines)
        if not self.parse_key:
            return pa.table({"value": lines}), None
        parts = pc.split_pattern(lines, pattern=self.key_separator, max_splits=1)
        missing = np.flatnonzero(np.asarray(pc.list_value_length(parts)) < 2)
        error = None
        if len(missing):
            bad = int(missing[0])
            line = lines[bad].as_py().decode("utf-8", "replace")
            error = _ReaderError(f"No key separator found on line number {first_line + bad}: '{line}'")
            parts = parts.slice(0, bad)
        return pa.table({"key": pc.list_element(parts, 0), "value": pc.list_element(parts, 1)}), error


class _Sender:
    """Sends each block of records with one ``Producer.send_arrow``, to ``partition`` when one is given.

    Raises:
        UnknownTopicError: The topic does not exist, or has no partition ``partition``.
    """

    def __init__(self, logs: LogDirectory, topic: str, partition: int | None, config: ProducerConfig) -> None:
        # A missing topic or partition fails now, before stdin is read.
        logs.topics.get(topic)
        if partition is not None:
            logs.topics.open_partition(topic, partition)
        self._producer = Producer(logs, config)
        self._topic = topic
        self._partition = partition

    def send(self, records: pa.Table) -> None:
        if not records.num_rows:
            return
        if self._partition is not None:
            explicit = pa.array(np.full(records.num_rows, self._partition, np.int32))
            records = records.append_column("partition", explicit)
        self._producer.send_arrow(self._topic, records)

    def close(self) -> None:
        self._producer.close()

"""``pysparklog console-producer``: Kafka's ``kafka-console-producer.sh``, appending the lines of stdin to a topic.

Each line is a record, read as Kafka's ``LineMessageReader`` reads it: its value; with ``--property
parse.key=true`` its key, ``key.separator`` (a tab by default) and its value; with ``parse.headers=true`` its
headers first, then ``headers.delimiter`` (a tab). The headers are ``key<headers.key.separator>value`` pairs
(``:``) separated by ``headers.separator`` (``,``, a regular expression as in Kafka), so that
``h1:v1,h2:v2<TAB>k<TAB>v`` is a record with two headers, key ``k`` and value ``v``. A key, value, header value
or the whole headers equal to ``null.marker`` (none by default) are null (no headers); a header key may not equal
it. With ``ignore.error=true`` a line without the headers delimiter has no headers, one without the key separator
no key, and a header pair without its separator a null value, where Kafka's errors would otherwise end the
command. Records get the time they are appended (CreateTime) and go where Kafka's producer would send them
(``pysparklog.partitioner``): to ``--partition`` when it is given, else to the partition of the key's murmur2
hash, else by uniform sticky partitioning.

Lines are read in blocks and each block is sent with one ``Producer.send_arrow``
(``pysparklog.producer``), which appends each partition's lines in record batches of at most
``batch.size`` (16384) bytes, as Kafka's producer batches them; the producer is idempotent, as
Kafka's console producer is by default. A block ends after 1 MiB of lines, after a second without
a new line (this tool's ``linger.ms`` in Kafka), or at the end of stdin, so lines typed by hand or
piped from a slow process reach consumers within about a second. Lines end at ``\\n``, ``\\r\\n`` or ``\\r``, as
Java's ``BufferedReader.readLine`` ends them; the last one needs no end.

A line without the key separator ends the command with Kafka's message, ``No key separator found
on line number N: '<line>'`` (and likewise for the headers delimiter and a header pair's separator), once
the lines before it are appended. Ctrl-C appends the complete lines already read and ends the command
with status 130.

``--producer-property NAME=VALUE`` (repeatable) sets a producer config (``pysparklog.producer.ProducerConfig``,
Kafka's names): ``batch.size``, ``linger.ms`` (how long a block of lines waits for more, 1000 by default here as
in Kafka's tool), ``compression.type`` (unless ``--compression-codec``), ``client.id`` (``console-producer``),
``enable.idempotence``, ``acks``... The broker connection's configs (``bootstrap.servers``, ``security.protocol``,
``sasl.*``, ``ssl.*``...) are accepted and ignored with a warning.

Where Kafka's tool differs:

* ``--log-dir`` (default ``$PYSPARKLOG_LOG_DIR``) replaces ``--bootstrap-server``. A missing topic is created
  by the first line sent, with ``num.partitions`` of the log directory's ``server.properties``, as a broker
  creates it for Kafka's tool; with ``auto.create.topics.enable=false`` there the command fails before reading
  stdin, naming the setting (``TopicStore.get_or_create``).
* ``--partition`` sends every line to one partition; Kafka's tool has no such option.
* Lines are sent as their bytes. Kafka's tool decodes stdin as UTF-8, so invalid bytes become
  U+FFFD there.
* The reader properties are those of Kafka's ``LineMessageReader``; unknown names are refused (Kafka ignores
  them), and the separators may not be empty. ``headers.separator`` is an RE2 regular expression (Arrow's),
  where Kafka's is Java's; they agree on the usual constructs. A header key that is not UTF-8 gets U+FFFD for
  its bad bytes, as all of a line does in Kafka.
* ``--compression-codec`` wins over ``compression.type`` given with ``--producer-property`` (Kafka's tool
  always overrides it, with ``none`` when the option is absent).
* A lone ``\\r`` ends a line only once a ``\\n`` follows later in the input, or the input ends.
* No ``>`` prompt on a terminal, and no other producer options (``--sync``, ``--batch-size``,
  ``--producer.config``...): ``--producer-property`` sets those configs.
"""

from __future__ import annotations

import argparse
import os
import select
import sys
import time
from collections.abc import Callable, Iterator, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pysparklog.cli._common import add_log_dir_argument, open_log_dir
from pysparklog.cli._console import (
    add_client_property_argument,
    add_property_argument,
    client_properties,
    is_true,
    parse_properties,
)
from pysparklog.cli.main import EXIT_INTERRUPTED
from pysparklog.errors import InvalidConfigError, PySparkLogError, UnsupportedCodecError
from pysparklog.producer import Producer, ProducerConfig
from pysparklog.storage.log_dir import LogDirectory
from pysparklog.storage.records.arrow_records import HEADER_TYPE
from pysparklog.storage.records.codecs import Codec

BATCH_SIZE = 16384  # Kafka's batch.size default, which its console producer keeps
LINGER_MS = 1000  # Kafka's console producer --timeout, its linger.ms: 1000 by default
BLOCK_BYTES = 1024 * 1024
_READ_BYTES = 64 * 1024
_LINE_END = r"\r\n|\r|\n"

_READER_PROPERTIES: Mapping[str, str] = {
    "parse.key": "true to read each line as key<key.separator>value (default false)",
    "key.separator": "what separates the key from the value (default a tab)",
    "parse.headers": "true to read headers first, before <headers.delimiter> (default false)",
    "headers.delimiter": "what separates the headers from the key or value (default a tab)",
    "headers.separator": "a regular expression separating the headers (default ,)",
    "headers.key.separator": "what separates a header's key from its value (default :)",
    "null.marker": "a key, value, header value or headers equal to it are null (default: none)",
    "ignore.error": "true to read a line without a separator as having no headers, no key or a null header value "
    "(default false: an error)",
}


#: The reader's separators and their defaults, as Kafka's ``LineMessageReader`` has them.
_SEPARATORS: Mapping[str, str] = {
    "key.separator": "\t",
    "headers.delimiter": "\t",
    "headers.separator": ",",
    "headers.key.separator": ":",
}
#: The pairs Kafka's reader refuses to be equal.
_DISTINCT = (
    ("headers.delimiter", "headers.separator"),
    ("headers.delimiter", "headers.key.separator"),
    ("headers.separator", "headers.key.separator"),
    ("null.marker", "key.separator"),
    ("null.marker", "headers.separator"),
    ("null.marker", "headers.delimiter"),
    ("null.marker", "headers.key.separator"),
)


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
    parser.add_argument(
        "--topic",
        required=True,
        help="the topic to append to; created by the first line when missing, unless server.properties sets "
        "auto.create.topics.enable=false",
    )
    parser.add_argument(
        "--partition", type=_partition, metavar="P", help="append every line to partition P instead of partitioning"
    )
    parser.add_argument(
        "--compression-codec",
        nargs="?",
        type=_codec,
        const=Codec.GZIP,
        metavar="CODEC",
        help="none, gzip, snappy, lz4 or zstd (default: none; the option without a value: gzip)",
    )
    add_property_argument(parser, "--property", accepted=_READER_PROPERTIES)
    add_client_property_argument(parser, "--producer-property", "producer")
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


def _config(args: argparse.Namespace) -> ProducerConfig:
    """The producer's config: the console producer's defaults, ``--producer-property`` over them, and
    ``--compression-codec`` over both when given (``--compression-codec`` alone means none)."""
    properties: dict[str, object] = {
        "batch.size": BATCH_SIZE,
        "linger.ms": LINGER_MS,
        "client.id": "console-producer",
        "compression.type": Codec.NONE.kafka_name,
        **client_properties(args.producer_property, "producer"),
    }
    if args.compression_codec is not None:
        properties["compression.type"] = args.compression_codec.kafka_name
    return ProducerConfig.from_properties(properties)


def run(args: argparse.Namespace) -> int:
    reader = _LineReader(parse_properties(args.property, _READER_PROPERTIES))
    config = _config(args)
    logs = open_log_dir(args.log_dir)
    sender = _Sender(logs, args.topic, args.partition, config)
    blocks = _LineBlocks(sys.stdin.fileno(), config.linger_ms / 1000)
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
    the oldest line read has waited ``linger_s``, or at the end of the input (where the last line may have no
    line end).

    It reads with ``select`` and ``os.read`` rather than through ``sys.stdin`` so that it can tell a pause in
    the input; what it has read but not yet handed out is pending.
    """

    def __init__(self, fd: int, linger_s: float) -> None:
        self._fd = fd
        self._linger_s = linger_s
        self._pending = bytearray()
        self._since = 0.0  # when the oldest pending byte arrived

    def __iter__(self) -> Iterator[bytes]:
        while True:
            complete = self._pending.rfind(b"\n") + 1
            if complete and (
                len(self._pending) >= BLOCK_BYTES
                or not self._input_within(self._since + self._linger_s - time.monotonic())
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
    """Kafka's ``LineMessageReader`` for whole blocks: lines become ``value``, ``key`` and ``headers`` columns,
    split by Arrow kernels rather than line by line.

    Raises:
        InvalidConfigError: An empty separator, separators or a null marker that Kafka's reader refuses as equal,
            or a ``headers.separator`` that is not a regular expression.
    """

    def __init__(self, properties: Mapping[str, str]) -> None:
        self.parse_key = is_true(properties.get("parse.key", "false"))
        self.parse_headers = is_true(properties.get("parse.headers", "false"))
        self.ignore_error = is_true(properties.get("ignore.error", "false"))
        given = {name: properties.get(name, default) for name, default in _SEPARATORS.items()}
        for name, separator in given.items():
            if not separator:
                raise InvalidConfigError(f"{name} is empty; accepted: one or more characters")
        null_marker = properties.get("null.marker")
        if null_marker is not None:
            given["null.marker"] = null_marker
        for first, second in _DISTINCT:
            if first in given and second in given and given[first] == given[second]:
                raise InvalidConfigError(f"{first} and {second} may not be equal; accepted: different values")
        self.key_separator = given["key.separator"]
        self.headers_delimiter = given["headers.delimiter"]
        self.headers_separator = given["headers.separator"]
        self.headers_key_separator = given["headers.key.separator"]
        self.null_marker = None if null_marker is None else os.fsencode(null_marker)
        try:
            pc.split_pattern_regex(pa.array([b""]), pattern=self.headers_separator)
        except pa.ArrowInvalid as error:
            raise InvalidConfigError(
                f"headers.separator {self.headers_separator!r} is not a regular expression ({error}); "
                "accepted: an RE2 regular expression"
            ) from None
        self._lines_read = 0

    def records(self, block: bytes) -> tuple[pa.Table, _ReaderError | None]:
        """The records of a block of lines, and the error of the first line that makes none (then the records
        are those of the lines before it).

        Such a line lacks the headers delimiter or the key separator, or has a header pair without its
        separator or with a key equal to the null marker (unless ``ignore.error``, for all but the last); the
        error is Kafka's message, which counts lines from 1.
        """
        lines = pc.split_pattern_regex(pa.array([block], pa.binary()), pattern=_LINE_END).flatten()
        if block.endswith((b"\n", b"\r")):
            lines = lines.slice(0, len(lines) - 1)  # the empty string after the last line end
        first_line = self._lines_read + 1
        self._lines_read += len(lines)
        faults: list[tuple[np.ndarray, Callable[[int], str]]] = []
        rest: pa.Array = lines
        columns: dict[str, pa.Array] = {}
        headers_text = None
        if self.parse_headers:
            headers_text, rest, found = _split_first(rest, self.headers_delimiter)
            if not self.ignore_error:
                faults.append((~found, lambda i: _missing("headers delimiter", first_line + i, lines[i])))
        if self.parse_key:
            key, rest, found = _split_first(rest, self.key_separator)
            if not self.ignore_error:
                faults.append((~found, lambda i: _missing("key separator", first_line + i, lines[i])))
            columns["key"] = self._null_where_marker(key)
        columns["value"] = self._null_where_marker(rest)
        if headers_text is not None:
            columns["headers"], header_faults = self._headers(self._null_where_marker(headers_text), first_line)
            faults += header_faults
        table = pa.table(columns)
        bad = [(int(np.flatnonzero(mask)[0]), message) for mask, message in faults if mask.any()]
        if not bad:
            return table, None
        first_bad = min(line for line, _ in bad)
        message = next(message for line, message in bad if line == first_bad)  # Kafka's order of checks
        return table.slice(0, first_bad), _ReaderError(message(first_bad))

    def _null_where_marker(self, column: pa.Array) -> pa.Array:
        if self.null_marker is None:
            return column
        return pc.if_else(pc.equal(column, self.null_marker), pa.scalar(None, pa.binary()), column)

    def _headers(
        self, text: pa.Array, first_line: int
    ) -> tuple[pa.Array, list[tuple[np.ndarray, Callable[[int], str]]]]:
        """The headers column of each line's headers text (none where it is null), and the faults of its pairs,
        per line.

        The text splits at ``headers.separator`` as Java's ``Pattern.split`` splits it: without a match it is
        one pair, else trailing empty pairs are dropped.
        """
        pieces = pc.split_pattern_regex(text, pattern=self.headers_separator)
        counts = np.asarray(pc.list_value_length(pieces).fill_null(0), np.int64)
        starts = np.asarray(pieces.offsets)[:-1] - pieces.offsets[0].as_py()
        values = pieces.flatten()
        non_empty = np.flatnonzero(np.asarray(pc.binary_length(values)) > 0)
        # The last non-empty piece at or before each piece's position, -1 when none.
        last_non_empty = np.full(len(values), -1, np.int64)
        last_non_empty[non_empty] = non_empty
        if len(values):
            last_non_empty = np.maximum.accumulate(last_non_empty)
            trimmed = np.maximum(last_non_empty[np.maximum(starts + counts - 1, 0)] - starts + 1, 0)
        else:
            trimmed = counts
        kept = np.where(counts > 1, trimmed, counts)  # one piece is the whole text: no match, nothing dropped
        line_of_pair = np.repeat(np.arange(len(counts)), kept)
        total = int(kept.sum())
        pair_index = np.arange(total) + np.repeat(starts - (np.cumsum(kept) - kept), kept)
        pairs = values.take(pa.array(pair_index, pa.int64()))
        header_key, header_value, found = _split_first(pairs, self.headers_key_separator)
        header_key = pc.if_else(found, header_key, pairs)
        header_value = pc.if_else(found, header_value, pa.scalar(None, pa.binary()))
        no_separator = np.zeros(len(pairs), bool) if self.ignore_error else ~found
        null_key = np.zeros(len(pairs), bool)
        if self.null_marker is not None:
            null_key = found & np.asarray(pc.equal(header_key, self.null_marker).fill_null(False), bool)
        bad_pair = no_separator | null_key
        bad_line = np.zeros(len(counts), bool)
        bad_line[line_of_pair[bad_pair]] = True

        def message(line: int) -> str:
            pair = int(np.flatnonzero(bad_pair & (line_of_pair == line))[0])
            if no_separator[pair]:
                return (
                    f"No header key separator found in pair '{_text(pairs[pair])}' on line number {first_line + line}"
                )
            marker = (self.null_marker or b"").decode("utf-8", "replace")
            return f"Header keys should not be equal to the null marker '{marker}' as they can't be null"

        header_value = self._null_where_marker(header_value)
        structs = pa.StructArray.from_arrays([_utf8(header_key), header_value], fields=list(HEADER_TYPE.value_type))
        offsets = pa.array(np.concatenate([[0], np.cumsum(kept)]).astype(np.int32))
        return pa.ListArray.from_arrays(offsets, structs, type=HEADER_TYPE), [(bad_line, message)]


def _split_first(column: pa.Array, separator: str) -> tuple[pa.Array, pa.Array, np.ndarray]:
    """Each value split at the first ``separator``: what is before it (null where it is absent), what is after it
    (the whole value where it is absent), and where it was found."""
    parts = pc.split_pattern(column, pattern=separator, max_splits=1)
    counts = np.asarray(pc.list_value_length(parts).fill_null(0), np.int64)
    found = counts == 2
    starts = np.asarray(parts.offsets)[:-1] - parts.offsets[0].as_py()
    values = parts.flatten()
    before = pc.if_else(found, values.take(pa.array(starts)), pa.scalar(None, pa.binary()))
    return before, values.take(pa.array(starts + found)), found


def _missing(what: str, number: int, line: pa.Scalar) -> str:
    return f"No {what} found on line number {number}: '{_text(line)}'"


def _text(value: pa.Scalar) -> str:
    data: bytes = value.as_py()
    return data.decode("utf-8", "replace")


def _utf8(keys: pa.Array) -> pa.Array:
    """Header keys as strings; a key that is not UTF-8 gets U+FFFD for its bad bytes, as Kafka's reader decodes
    a whole line."""
    try:
        return keys.cast(pa.string())
    except pa.ArrowInvalid:
        return pa.array([key.decode("utf-8", "replace") for key in keys.to_pylist()], pa.string())


class _Sender:
    """Sends each block of records with one ``Producer.send_arrow``, to ``partition`` when one is given.

    Raises:
        UnknownTopicError: The topic does not exist and is not created on first use, or has no partition
            ``partition``.
    """

    def __init__(self, logs: LogDirectory, topic: str, partition: int | None, config: ProducerConfig) -> None:
        # A topic that is missing and may not be created, or a missing partition, fails now, before stdin is read;
        # a topic that may be created is created by the first block sent, as Kafka's tool creates it (none if
        # stdin is empty).
        logs.topics.get_or_create(topic, validate_only=True)
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

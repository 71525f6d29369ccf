"""Kafka's own DumpLogSegments on a partition the transactional producer wrote: its batches are marked
transactional under the session's producer id and epoch, each transaction ends in Kafka's COMMIT or ABORT
control record, and the aborted one is in the ``.txnindex``; our ``dump-log`` prints the same."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest

from pysparklog.producer import Producer, ProducerConfig
from pysparklog.storage.log_dir import LogDirectory
from tests.cli.test_dump_log import assert_like_kafka
from tests.interop.kafka_tools import DumpLogSegments

pytestmark = pytest.mark.interop


def test_kafka_reads_transactions_the_producer_wrote(kafka_dump_log: DumpLogSegments, tmp_path: Path) -> None:
    logs = LogDirectory(tmp_path)
    logs.topics.create("t", 1)
    config = ProducerConfig.from_properties({"transactional.id": "app-0", "linger.ms": 0})
    with Producer(logs, config) as producer:
        producer.init_transactions()
        for commit in (True, False, True):
            producer.begin_transaction()
            producer.send_arrow("t", pa.table({"value": pa.array([b"a", b"b"], pa.binary())}))
            producer.commit_transaction() if commit else producer.abort_transaction()
    directory = Path(logs.path) / "t-0"
    out = assert_like_kafka(kafka_dump_log, sorted(directory.glob("*.log")), "--print-data-log")
    batches = re.findall(r"producerId: (\d+) producerEpoch: (\d+) .*isTransactional: (\w+) .*isControl: (\w+)", out)
    assert len(batches) == 6 and {b[2] for b in batches} == {"true"}
    assert len({(b[0], b[1]) for b in batches}) == 1  # one session
    assert re.findall(r"endTxnMarker: (\w+)", out) == ["COMMIT", "ABORT", "COMMIT"]
    index = assert_like_kafka(kafka_dump_log, sorted(directory.glob("*.txnindex")))
    assert re.search(r"producerId: \d+ firstOffset: 3 lastOffset: 5", index)

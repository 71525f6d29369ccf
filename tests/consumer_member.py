"""One consumer-group member in its own process, for the multi-process tests (``test_consumer_group_processes``).

    python -m tests.consumer_member consume LOG_DIR GROUP TOPIC OUT [options]
    python -m tests.consumer_member committed LOG_DIR GROUP TOPIC

``consume`` subscribes to TOPIC in GROUP and polls until SIGTERM, then closes the consumer (leaving the
group) and exits 0. After each poll it appends to OUT, flushed before it commits:

    record <partition> <offset> <key>          one line per record the poll returned
    committed <topic>-<partition> <offset>     after the commit of those records succeeded

and, from the rebalance listener, ``assigned|revoked|lost <tp>,<tp>...``. A refused commit is written as
``commit-failed <reason>``. With ``--stop-after N`` it stops polling once it has consumed N records, writes
``idle`` and waits for a signal. ``committed`` prints the group's committed offsets of TOPIC as JSON.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from collections.abc import Iterable
from typing import TextIO

from pysparklog import CommitFailedError, LogDirectory, OffsetAndMetadata, TopicPartition
from pysparklog.consumer import Consumer, ConsumerConfig


def _names(partitions: Iterable[TopicPartition]) -> str:
    return ",".join(str(tp) for tp in sorted(partitions))


class _Listener:
    def __init__(self, out: TextIO) -> None:
        self.out = out

    def _write(self, kind: str, partitions: set[TopicPartition]) -> None:
        self.out.write(f"{kind} {_names(partitions)}\n")
        self.out.flush()

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self._write("revoked", revoked)

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self._write("assigned", assigned)

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self._write("lost", lost)


def consume(args: argparse.Namespace) -> int:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    config = ConsumerConfig(
        group_id=args.group,
        client_id=args.client_id,
        group_instance_id=args.instance_id,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=args.session_ms,
        heartbeat_interval_ms=args.heartbeat_ms,
        max_poll_records=args.max_poll_records,
        partition_assignment_strategy=(args.assignor,),
        include_headers=False,
    )
    consumed = 0
    with open(args.out, "a", encoding="utf-8") as out, Consumer(args.log_dir, config) as consumer:
        consumer.subscribe([args.topic], listener=_Listener(out))
        while not stop.is_set():
            if args.stop_after is not None and consumed >= args.stop_after:
                out.write("idle\n")
                out.flush()
                stop.wait()
                break
            table = consumer.poll_arrow(timeout_ms=100)
            if table.num_rows == 0:
                continue
            partitions = table.column("partition").to_pylist()
            offsets = table.column("offset").to_pylist()
            keys = table.column("key").to_pylist()
            out.write(
                "".join(f"record {p} {o} {k.decode()}\n" for p, o, k in zip(partitions, offsets, keys, strict=True))
            )
            out.flush()  # what was consumed is on record before the commit says so
            consumed += table.num_rows
            ends: dict[TopicPartition, int] = {}
            for p, o in zip(partitions, offsets, strict=True):
                ends[TopicPartition(args.topic, p)] = max(ends.get(TopicPartition(args.topic, p), 0), o + 1)
            try:
                consumer.commit({tp: OffsetAndMetadata(offset) for tp, offset in ends.items()})
            except CommitFailedError as error:
                out.write(f"commit-failed {error}\n")
            else:
                out.write("".join(f"committed {tp} {offset}\n" for tp, offset in sorted(ends.items())))
            out.flush()
            if args.pause_ms:
                time.sleep(args.pause_ms / 1000)  # "processing"
        out.write("closing\n")
        out.flush()
    return 0


def committed(args: argparse.Namespace) -> int:
    partitions = LogDirectory(args.log_dir).topics.get(args.topic).partitions
    with Consumer(args.log_dir, ConsumerConfig(group_id=args.group, enable_auto_commit=False)) as consumer:
        found = consumer.committed([TopicPartition(args.topic, p) for p in range(partitions)])
    print(json.dumps({str(tp): (c.offset if c is not None else None) for tp, c in found.items()}))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.consumer_member")
    modes = parser.add_subparsers(dest="mode", required=True)
    run = modes.add_parser("consume")
    show = modes.add_parser("committed")
    for p in (run, show):
        p.add_argument("log_dir")
        p.add_argument("group")
        p.add_argument("topic")
    run.add_argument("out")
    run.add_argument("--client-id", default="member")
    run.add_argument("--instance-id")
    run.add_argument("--session-ms", type=int, default=1500)
    run.add_argument("--heartbeat-ms", type=int, default=100)
    run.add_argument("--max-poll-records", type=int, default=50)
    run.add_argument("--assignor", default="range")
    run.add_argument("--pause-ms", type=int, default=0)
    run.add_argument("--stop-after", type=int)
    args = parser.parse_args(argv)
    return consume(args) if args.mode == "consume" else committed(args)


if __name__ == "__main__":
    sys.exit(main())

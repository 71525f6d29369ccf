"""Consumer-group lag monitoring: a producer, a slower consumer group, the lag sampled and plotted.

Lag is what a Kafka operator watches first: how far a consumer group's committed offsets are behind the log
end offsets. pysparklog keeps committed offsets where a broker keeps them (``__consumer_offsets``) and
``OffsetStore.lag(group, partitions)`` answers with the same numbers ``pysparklog consumer-groups --describe``
(and ``kafka-consumer-groups.sh``) print. Here, in one process:

* a producer thread writes order events at ``--produce-rate`` records/s for ``--produce-seconds``;
* a consumer thread, a member of group ``dashboard``, processes ``--consume-rate`` records/s and commits after
  each poll: slower than the producer, so the lag rises, then falls to 0 once the producer stops;
* the main thread samples the group's lag every ``--interval`` seconds, prints each sample, the group's
  description at the end, and saves a plot of lag over time (matplotlib, ``Agg`` backend) to ``--out``.

No Spark here: a Spark query with option ``group.id`` commits its micro-batches' end offsets to the same place,
so the same sampling watches it (and ``pysparklog.spark.lag.OffsetsBehindLatestListener`` reports Kafka's
``offsetsBehindLatest`` metrics from inside the query).

Run it from the checkout (about ten seconds)::

    .venv/bin/python -m examples.lag_monitor [--out data/examples/lag_monitor/lag.png] [--log-dir DIR]
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display: render to files
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)

from examples.common import (  # noqa: E402
    EXAMPLES_DATA,
    example_parser,
    fresh_log_dir,
    heading,
    order_events,
    print_result,
)
from pysparklog import Consumer, ConsumerConfig, LogDirectory, OffsetStore, Producer, TopicPartition  # noqa: E402

TOPIC = "orders"
PARTITIONS = 3
GROUP = "dashboard"


@dataclass(frozen=True, slots=True)
class LagSample:
    """The group's total lag over the topic's partitions ``seconds`` after the start."""

    seconds: float
    lag: int
    log_end: int
    committed: int


def create_topic(log_dir: str | Path) -> None:
    """The topic the producer writes and the group consumes."""
    LogDirectory(log_dir).topics.create(TOPIC, PARTITIONS)


def produce_steadily(log_dir: str | Path, rate: float, seconds: float) -> int:
    """Send order events at ``rate`` records/s for ``seconds``, in bursts every 50 ms; the number sent.

    ``flush`` after each burst makes each burst visible at once (the producer would otherwise wait up to
    ``linger.ms``), so the lag follows the production rate closely.
    """
    events = order_events(int(rate * seconds) + 1)
    sent = 0
    start = time.monotonic()
    with Producer(log_dir) as producer:
        while (elapsed := time.monotonic() - start) < seconds:
            due = min(int(elapsed * rate), len(events))
            for event in events[sent:due]:
                producer.send(TOPIC, event.value, key=event.key)
            producer.flush()
            sent = due
            time.sleep(0.05)
    return sent


def consume_slowly(log_dir: str | Path, rate: float, stop: threading.Event) -> int:
    """Consume the topic as a member of ``GROUP`` at ``rate`` records/s until ``stop`` is set, committing after
    each poll; the number of records consumed.

    Each poll takes at most a tenth of a second's worth of records, and the "processing" of a record is a
    sleep, as for a consumer limited by what it does with each record (a database write, an API call).
    """
    per_poll = max(int(rate / 10), 1)
    config = ConsumerConfig.from_properties(
        {"group.id": GROUP, "auto.offset.reset": "earliest", "enable.auto.commit": "false"}
    )
    consumed = 0
    with Consumer(str(log_dir), config) as consumer:  # Consumer takes a str or a LogDirectory, not a Path
        consumer.subscribe([TOPIC])
        while not stop.is_set():
            records = consumer.poll_arrow(timeout_ms=100, max_records=per_poll)
            if records.num_rows:
                time.sleep(records.num_rows / rate)  # the processing
                consumer.commit()
                consumed += records.num_rows
    return consumed


def sample_lag(offsets: OffsetStore, started: float) -> LagSample:
    """The group's lag now, summed over the topic's partitions.

    A partition the group has not committed yet counts whole (its records are all waiting: the group starts at
    the earliest offset), where ``PartitionLag.lag`` says None.
    """
    positions = offsets.lag(GROUP, [TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
    log_end = sum(p.log_end_offset or 0 for p in positions)
    committed = sum(p.committed or 0 for p in positions)
    return LagSample(round(time.monotonic() - started, 2), log_end - committed, log_end, committed)


def monitor(
    log_dir: str | Path, produce_rate: float, produce_seconds: float, consume_rate: float, interval: float
) -> tuple[list[LagSample], float | None]:
    """Run the producer and the consumer, sampling the lag every ``interval`` seconds until the producer is done
    and the group has caught up (or twice the time that should take).

    Returns:
        The samples, and the time of the first sample taken after the producer finished.
    """
    stop = threading.Event()
    counts: dict[str, int] = {}
    producer = threading.Thread(
        target=lambda: counts.update(produced=produce_steadily(log_dir, produce_rate, produce_seconds)),
        name="producer",
    )
    consumer = threading.Thread(
        target=lambda: counts.update(consumed=consume_slowly(log_dir, consume_rate, stop)), name="consumer"
    )
    deadline = 2 * produce_seconds * max(produce_rate / consume_rate, 1) + 10
    samples: list[LagSample] = []
    production_ended: float | None = None
    with OffsetStore(log_dir) as offsets:
        started = time.monotonic()
        producer.start()
        consumer.start()
        try:
            while time.monotonic() - started < deadline:
                time.sleep(interval)
                sample = sample_lag(offsets, started)
                samples.append(sample)
                print(f"SAMPLE t={sample.seconds:.2f}s lag={sample.lag} log_end={sample.log_end}", flush=True)
                if not producer.is_alive():
                    production_ended = sample.seconds if production_ended is None else production_ended
                    if sample.lag == 0:
                        break
        finally:
            stop.set()
            producer.join()
            consumer.join()
    print(f"produced {counts.get('produced')} records, consumed {counts.get('consumed')}")
    return samples, production_ended


def describe_group(log_dir: str | Path) -> None:
    """The group as ``pysparklog consumer-groups --describe --group dashboard`` shows it."""
    with OffsetStore(log_dir) as offsets:
        description = offsets.describe(GROUP)
    if description is None:
        print(f"group {GROUP} does not exist")
        return
    print(f"group {description.group_id}: state {description.state}, {len(description.members)} members")
    print(f"{'TOPIC':<10} {'PARTITION':>9} {'CURRENT-OFFSET':>14} {'LOG-END-OFFSET':>14} {'LAG':>14}")
    for row in description.rows:
        p = row.position
        columns = (p.committed, p.log_end_offset, p.lag)
        print(f"{p.partition.topic:<10} {p.partition.partition:>9} " + " ".join(f"{c!s:>14}" for c in columns))


def plot_lag(samples: list[LagSample], production_ended: float | None, out: str | Path) -> Path:
    """Save a plot of lag (and of the log end and committed offsets) over time as a PNG."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    seconds = [s.seconds for s in samples]
    figure, (lag_axes, offsets_axes) = plt.subplots(2, 1, sharex=True, figsize=(8, 6))
    lag_axes.plot(seconds, [s.lag for s in samples], marker=".", color="tab:red", label="lag")
    lag_axes.set_ylabel("records behind")
    lag_axes.set_title(f"consumer group {GROUP!r} on topic {TOPIC!r}")
    offsets_axes.plot(seconds, [s.log_end for s in samples], label="log end offsets (sum)")
    offsets_axes.plot(seconds, [s.committed for s in samples], label="committed offsets (sum)")
    offsets_axes.set_xlabel("seconds")
    offsets_axes.set_ylabel("offset")
    for axes in (lag_axes, offsets_axes):
        if production_ended is not None:
            axes.axvline(production_ended, color="grey", linestyle="--", label="producer stops")
        axes.legend(loc="upper left")
        axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(out, format="png", dpi=100)
    plt.close(figure)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = example_parser(__file__, __doc__, work_dir=False)
    parser.add_argument(
        "--out", type=Path, default=EXAMPLES_DATA / "lag_monitor" / "lag.png", help="the plot (default: %(default)s)"
    )
    parser.add_argument("--produce-rate", type=float, default=400, help="records/s (default: %(default)s)")
    parser.add_argument("--produce-seconds", type=float, default=3, help="(default: %(default)s)")
    parser.add_argument("--consume-rate", type=float, default=200, help="records/s (default: %(default)s)")
    parser.add_argument("--interval", type=float, default=0.25, help="seconds between samples (default: %(default)s)")
    args = parser.parse_args(argv)
    log_dir = fresh_log_dir(args.log_dir)
    create_topic(log_dir)

    heading(f"producing {args.produce_rate:g}/s for {args.produce_seconds:g} s, consuming {args.consume_rate:g}/s")
    samples, production_ended = monitor(
        log_dir, args.produce_rate, args.produce_seconds, args.consume_rate, args.interval
    )
    heading("the group at the end")
    describe_group(log_dir)
    out = plot_lag(samples, production_ended, args.out)
    peak = max(samples, key=lambda s: s.lag)
    print_result(
        "lag", samples=len(samples), peak=peak.lag, peak_at=peak.seconds, final=samples[-1].lag, plot=out.resolve()
    )
    return 0 if samples[-1].lag == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

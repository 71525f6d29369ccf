"""A Kafka-style producer: records in, batched per partition, appended to the log directory.

``Producer`` is what Kafka's ``KafkaProducer`` is to a broker, with the log directory in place of the
broker: ``send`` queues a record and returns a future of its ``RecordMetadata``; records are
partitioned as Kafka's producer partitions them (``pysparklog.partitioner``), gathered per partition
into record batches of ``batch.size`` bytes, and a background sender thread appends a partition's
batches once a batch is full or its oldest record has waited ``linger.ms``, as Kafka's ``Sender``
drains its ``RecordAccumulator``. ``flush`` and ``close`` append everything at once. ``send_arrow``
is the bulk path: a whole Arrow table, partitioned, encoded and appended in one call.

Per record, ``send`` only appends to a few lists. The work Kafka does per record (partitioning,
sizing, encoding) runs over everything the sender takes at once, vectorised: the partitioner over
the accumulated key column, ``encode_arrow`` over each partition's rows. A future is an index into
its drain's result arrays, not a callback per record.

Acknowledged, on a filesystem
-----------------------------

A future completes (and ``send_arrow`` returns) once ``PartitionLog.append`` has returned: the
batch is written to the segment and the partition's state record updated, so every reader sees it.
It is fsynced only as the topic's flush policy (``flush.messages``, ``flush.ms``) says, as a Kafka
broker acknowledges ``acks=all`` without fsync: by default the OS writes it back and segments are
fsynced when they roll. A process crash loses nothing acknowledged; a machine crash (power, kernel)
can lose what was acknowledged after the last fsync, which recovery then truncates. Records still
in the producer (sent, not yet appended) are lost with the process, as they are with Kafka's.
There is one copy, the log directory: ``acks=1`` and ``acks=all`` mean the same.

Idempotence
-----------

With ``enable.idempotence`` (the default) the producer takes a producer id from the log directory
(``storage.producer_ids``), epoch 0, and numbers each partition's batches as Kafka's
``TransactionManager`` does: a partition's first batch has base sequence 0, each next one the
previous plus its record count, wrapping at 2**31. An append that fails with an ``OSError`` may
have been written anyway, so it is retried with the same batches, which the log recognises (it
keeps the producer's last five runs of consecutive batches, so a retried append of any number of
batches is recognised whole) and does not write twice. When an append finally fails, the
producer cannot know which of its sequences the log holds, so it takes a new producer id and
starts every partition at sequence 0 again (Kafka's idempotent producer resets its id the same way).

Transactions
------------

With ``transactional.id`` the producer is Kafka's transactional producer: ``init_transactions``
takes a session (producer id, bumped epoch) from ``pysparklog.transactions``, fencing older producers
of the id; ``begin_transaction``, then sends (each partition registered before its first append),
then ``commit_transaction`` or ``abort_transaction`` write COMMIT or ABORT markers, which
``read_committed`` readers follow; ``send_offsets_to_transaction`` makes a consumer group's offsets part of the
transaction, committed with it. ``prepare_transaction`` flushes and hands the open transaction to
another process to end (KIP-939's two-phase commit): Spark's driver commits its tasks' transactions so.

Modules
-------

One per role, as Kafka's producer client has them; each imports only modules listed above it:

- ``config``: ``ProducerConfig``, Kafka's producer configs.
- ``future``: ``RecordMetadata``, ``RecordFuture`` and the ``Chunk`` of records the futures read from.
- ``accumulator``: ``RecordAccumulator``, the records waiting per topic, then per partition.
- ``transaction_manager``: ``TransactionManager``, the producer id and epoch, the transaction states.
- ``sender``: ``Sender``, the thread and the drains, encoding, appends and retries.
- ``producer``: ``Producer``, the facade over them.

Example:
    >>> with Producer("/data/logs") as producer:
    ...     future = producer.send("orders", b'{"amount": 5}', key=b"c1")
    ...     metadata = future.get(timeout=10)   # RecordMetadata(topic='orders', partition=..., offset=...)
"""

from __future__ import annotations

from pysparklog.producer.config import ACCEPTED_CONFIGS, ProducerConfig
from pysparklog.producer.future import Callback, RecordFuture, RecordMetadata
from pysparklog.producer.producer import Producer

__all__ = ["ACCEPTED_CONFIGS", "Callback", "Producer", "ProducerConfig", "RecordFuture", "RecordMetadata"]

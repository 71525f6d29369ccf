/*
 * Apache Kafka's own Java clients (kafka-clients 4.2, from Maven Central through ../kafka-broker/pom.xml) driven by
 * the interop tests: a Kafka broker or a pysparklog endpoint is whatever --bootstrap names. Each mode is one client
 * in its own process, so a test can run several, stop one (SIGTERM: it leaves its group cleanly) or kill one.
 * Everything the test checks is printed on stdout as one JSON object a line; the clients' own logs go to stderr.
 *
 *   produce                --bootstrap B --topic T --count N [--delay-ms D] [--start I]
 *       idempotent, acks=all; record I has key "k<I>", value "v<I>", header "seq"="<I>" and CreateTime BASE+I;
 *       prints {"event":"ack",...} for each acknowledged record and {"event":"done",...} at the end.
 *   produce-transactional  --bootstrap B --topic T --transactional-id X --transactions N --per-transaction M
 *                          [--abort-every K] [--delay-ms D]
 *       transaction t is aborted when (t+1) % K == 0, committed otherwise; prints one {"event":"committed"} or
 *       {"event":"aborted"} per transaction with its records' coordinates.
 *   consume                --bootstrap B --topic T --group G [--isolation read_committed|read_uncommitted]
 *                          [--assignor range|roundrobin|sticky|cooperative-sticky] [--max-records N] [--idle-ms I]
 *                          [--client-id C]
 *       a member of group G (auto.offset.reset=earliest) committing synchronously after each poll; prints each
 *       record, each assignment and revocation, each commit (or its failure: the records then go to the partition's
 *       next owner); stops after N records, I ms without one, or SIGTERM.
 *
 * Every line has "at", the epoch milliseconds it was printed at, by which a test orders several clients' events.
 *
 * Compiled once per source hash by tests/interop/java_clients.py.
 */

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class KafkaClients {
    /** CreateTime of record 0; record I is stamped BASE_TIMESTAMP + I (the tests compute the same). */
    static final long BASE_TIMESTAMP = 1_700_000_000_000L;

    private KafkaClients() {}

    public static void main(String[] argv) throws Exception {
        if (argv.length == 0) {
            throw usage("no mode given");
        }
        Map<String, String> options = parse(argv);
        switch (argv[0]) {
            case "produce" -> produce(options);
            case "produce-transactional" -> produceTransactional(options);
            case "consume" -> consume(options);
            default -> throw usage("unknown mode " + argv[0]);
        }
    }

    // -- producing ------------------------------------------------------------------------------------------------

    static Properties producerConfig(Map<String, String> options) {
        Properties config = new Properties();
        config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, required(options, "bootstrap"));
        config.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        config.put(ProducerConfig.ACKS_CONFIG, "all");
        config.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        config.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        config.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        // An endpoint killed mid-test: the client retries through the other bootstrap server for this long.
        config.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "90000");
        config.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        config.put(ProducerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "1000");
        return config;
    }

    static ProducerRecord<String, String> record(String topic, String key, String value, long index) {
        ProducerRecord<String, String> record =
                new ProducerRecord<>(topic, null, BASE_TIMESTAMP + index, key, value);
        record.headers().add("seq", Long.toString(index).getBytes(StandardCharsets.UTF_8));
        return record;
    }

    static void produce(Map<String, String> options) throws Exception {
        String topic = required(options, "topic");
        long count = Long.parseLong(required(options, "count"));
        long start = Long.parseLong(options.getOrDefault("start", "0"));
        long delayMs = Long.parseLong(options.getOrDefault("delay-ms", "0"));
        AtomicLong acked = new AtomicLong();
        AtomicLong failed = new AtomicLong();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerConfig(options))) {
            for (long i = start; i < start + count; i++) {
                final long index = i;
                producer.send(record(topic, "k" + i, "v" + i, i), (metadata, error) -> {
                    if (error == null) {
                        acked.incrementAndGet();
                        emit(json("event", "ack", "i", index, "partition", metadata.partition(),
                                "offset", metadata.offset(), "timestamp", metadata.timestamp()));
                    } else {
                        failed.incrementAndGet();
                        emit(json("event", "error", "i", index, "error", error.toString()));
                    }
                });
                if (delayMs > 0) {
                    Thread.sleep(delayMs);
                }
            }
            producer.flush();
        }
        emit(json("event", "done", "acked", acked.get(), "failed", failed.get()));
    }

    static void produceTransactional(Map<String, String> options) throws Exception {
        String topic = required(options, "topic");
        int transactions = Integer.parseInt(required(options, "transactions"));
        int perTransaction = Integer.parseInt(required(options, "per-transaction"));
        int abortEvery = Integer.parseInt(options.getOrDefault("abort-every", "0"));
        long delayMs = Long.parseLong(options.getOrDefault("delay-ms", "0"));
        Properties config = producerConfig(options);
        config.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, required(options, "transactional-id"));
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(config)) {
            producer.initTransactions();
            emit(json("event", "initialized"));
            for (int t = 0; t < transactions; t++) {
                producer.beginTransaction();
                List<Future<RecordMetadata>> sent = new ArrayList<>();
                List<String> keys = new ArrayList<>();
                for (int j = 0; j < perTransaction; j++) {
                    long index = (long) t * perTransaction + j;
                    String key = "t" + t + "-" + j;
                    keys.add(key);
                    sent.add(producer.send(record(topic, key, "v" + index, index)));
                }
                producer.flush(); // every record written before the marker, so each has its offset
                boolean abort = abortEvery > 0 && (t + 1) % abortEvery == 0;
                if (abort) {
                    producer.abortTransaction();
                } else {
                    producer.commitTransaction();
                }
                StringBuilder records = new StringBuilder("[");
                for (int j = 0; j < sent.size(); j++) {
                    RecordMetadata metadata = sent.get(j).get();
                    records.append(j == 0 ? "" : ",").append(json("key", keys.get(j),
                            "partition", metadata.partition(), "offset", metadata.offset()));
                }
                emit(json("event", abort ? "aborted" : "committed", "transaction", t,
                        "records", new Raw(records.append("]").toString())));
                if (delayMs > 0) {
                    Thread.sleep(delayMs);
                }
            }
        }
        emit(json("event", "done"));
    }

    // -- consuming ------------------------------------------------------------------------------------------------

    static String assignorClass(String name) {
        return switch (name) {
            case "range" -> "org.apache.kafka.clients.consumer.RangeAssignor";
            case "roundrobin" -> "org.apache.kafka.clients.consumer.RoundRobinAssignor";
            case "sticky" -> "org.apache.kafka.clients.consumer.StickyAssignor";
            case "cooperative-sticky" -> "org.apache.kafka.clients.consumer.CooperativeStickyAssignor";
            default -> throw usage("--assignor " + name + "; accepted: range, roundrobin, sticky, cooperative-sticky");
        };
    }

    static void consume(Map<String, String> options) throws Exception {
        String isolation = options.getOrDefault("isolation", "read_uncommitted");
        if (!isolation.equals("read_committed") && !isolation.equals("read_uncommitted")) {
            throw usage("--isolation " + isolation + "; accepted: read_committed, read_uncommitted");
        }
        long maxRecords = Long.parseLong(options.getOrDefault("max-records", Long.toString(Long.MAX_VALUE)));
        long idleMs = Long.parseLong(options.getOrDefault("idle-ms", "0"));
        Properties config = new Properties();
        config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, required(options, "bootstrap"));
        config.put(ConsumerConfig.GROUP_ID_CONFIG, required(options, "group"));
        config.put(ConsumerConfig.CLIENT_ID_CONFIG, options.getOrDefault("client-id", "interop-consumer"));
        config.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        config.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
                assignorClass(options.getOrDefault("assignor", "range")));
        config.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        config.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        config.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        // A coordinator killed mid-test is noticed within a session, and its successor found soon after.
        config.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
        config.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
        config.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        config.put(ConsumerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "1000");
        config.put(CommonClientConfigs.METADATA_MAX_AGE_CONFIG, "5000");
        String topic = required(options, "topic");

        KafkaConsumer<String, String> consumer = new KafkaConsumer<>(config);
        AtomicBoolean stopping = new AtomicBoolean();
        CountDownLatch closed = new CountDownLatch(1);
        Thread main = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stopping.set(true);
            consumer.wakeup();
            try {
                closed.await();
            } catch (InterruptedException e) {
                main.interrupt();
            }
        }));
        long seen = 0;
        long lastRecordAt = System.currentTimeMillis();
        try {
            consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                    emit(json("event", "revoked", "partitions", partitionList(partitions)));
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    emit(json("event", "assigned", "partitions", partitionList(partitions)));
                }
            });
            while (!stopping.get() && seen < maxRecords
                    && (idleMs == 0 || System.currentTimeMillis() - lastRecordAt < idleMs)) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) {
                    continue;
                }
                lastRecordAt = System.currentTimeMillis();
                Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                for (ConsumerRecord<String, String> record : records) {
                    emit(recordJson(record));
                    next.put(new TopicPartition(record.topic(), record.partition()),
                            new OffsetAndMetadata(record.offset() + 1));
                    seen++;
                }
                try {
                    consumer.commitSync(next);
                } catch (WakeupException e) {
                    throw e;
                } catch (KafkaException e) {
                    // The group rebalanced (or its coordinator died) first: these records go to the next owner.
                    emit(json("event", "commit-failed", "error", e.toString()));
                    continue;
                }
                for (Map.Entry<TopicPartition, OffsetAndMetadata> entry : next.entrySet()) {
                    emit(json("event", "committed", "partition", entry.getKey().partition(),
                            "offset", entry.getValue().offset()));
                }
            }
        } catch (WakeupException e) {
            // SIGTERM: leave the group below
        } finally {
            consumer.close();
            emit(json("event", "closed", "records", seen));
            closed.countDown();
        }
    }

    static Raw partitionList(Collection<TopicPartition> partitions) {
        StringBuilder list = new StringBuilder("[");
        for (TopicPartition partition : partitions) {
            list.append(list.length() == 1 ? "" : ",").append(partition.partition());
        }
        return new Raw(list.append("]").toString());
    }

    static String recordJson(ConsumerRecord<String, String> record) {
        StringBuilder headers = new StringBuilder("[");
        for (Header header : record.headers()) {
            headers.append(headers.length() == 1 ? "" : ",").append("[").append(quote(header.key())).append(",")
                    .append(header.value() == null ? "null" : quote(new String(header.value(), StandardCharsets.UTF_8)))
                    .append("]");
        }
        headers.append("]");
        return json("event", "record", "partition", record.partition(), "offset", record.offset(),
                "key", record.key(), "value", record.value(), "timestamp", record.timestamp(),
                "timestamp_type", record.timestampType().name, "headers", new Raw(headers.toString()));
    }

    // -- plumbing -------------------------------------------------------------------------------------------------

    /** One JSON line, whole, even when callbacks on the client's I/O thread print at the same time, with the
     *  wall-clock time it was printed ("at", epoch ms): a test orders what several clients did by it. */
    static synchronized void emit(String line) {
        System.out.println("{\"at\":" + System.currentTimeMillis() + "," + line.substring(1));
        System.out.flush();
    }

    /** JSON text built here (a list), put into an object as it is. */
    record Raw(String json) {}

    /** A JSON object of alternating names and values: numbers and Raw as they are, null, others quoted. */
    static String json(Object... pairs) {
        StringBuilder out = new StringBuilder("{");
        for (int i = 0; i < pairs.length; i += 2) {
            out.append(i == 0 ? "" : ",").append(quote((String) pairs[i])).append(":");
            Object value = pairs[i + 1];
            if (value == null) {
                out.append("null");
            } else if (value instanceof Number) {
                out.append(value);
            } else if (value instanceof Raw raw) {
                out.append(raw.json());
            } else {
                out.append(quote(value.toString()));
            }
        }
        return out.append("}").toString();
    }

    static String quote(String text) {
        StringBuilder out = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                default -> {
                    if (c < 0x20) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
                }
            }
        }
        return out.append("\"").toString();
    }

    static Map<String, String> parse(String[] argv) {
        Map<String, String> options = new HashMap<>();
        for (int i = 1; i < argv.length; i += 2) {
            if (!argv[i].startsWith("--") || i + 1 >= argv.length) {
                throw usage("expected --name value pairs after the mode, got " + argv[i]);
            }
            options.put(argv[i].substring(2), argv[i + 1]);
        }
        return options;
    }

    static String required(Map<String, String> options, String name) {
        String value = options.get(name);
        if (value == null) {
            throw usage("--" + name + " is required");
        }
        return value;
    }

    static IllegalArgumentException usage(String problem) {
        return new IllegalArgumentException(problem
                + "; usage: KafkaClients produce|produce-transactional|consume --bootstrap HOST:PORT --topic T ..."
                + " (see the comment at the top of KafkaClients.java)");
    }
}

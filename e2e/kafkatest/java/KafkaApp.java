package kmirror.e2e;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.NoOffsetForPartitionException;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The application of the kmirror end-to-end tests: the real Java producer, consumer and admin
 * client, so a disaster-recovery test sees what an application sees on either cluster. Every
 * request is bounded (about 10 s), so a dead broker fails the program instead of hanging it.
 * Output on stdout is one fact a line; the clients' logging (WARN and up) goes to stderr.
 *
 * <pre>
 * KafkaApp produce --bootstrap B --topic T --count N [--key-prefix P] [--value-prefix V]
 *                  [--partition p] [--acks all|1|0] [--idempotent] [--prop k=v]...
 *     Sends records with keys P0..P(N-1) (default prefix "k") and values V0.. (default "v"),
 *     header app: kmirror-e2e, the producer's own timestamp; flushes and waits for each.
 *     Prints, in send order, "acked PARTITION OFFSET KEY VALUE" or "failed KEY ERROR";
 *     exits 1 when any failed. Idempotence is off unless --idempotent; acks defaults to all.
 *
 * KafkaApp consume --bootstrap B --topic T --group G --max N --timeout-ms MS [--commit]
 *                  [--reset none|earliest|latest] [--prop k=v]...
 *     A subscribed KafkaConsumer: enable.auto.commit=false, isolation.level=read_committed,
 *     auto.offset.reset=none unless --reset, so it resumes only from committed offsets.
 *     Polls until N records or the timeout. Prints "position PARTITION OFFSET" per assigned
 *     partition when it is assigned (before that partition's records), then
 *     "record PARTITION OFFSET KEY VALUE" per record (at most N), and with --commit commits
 *     the offset after the last record printed of each assigned partition (or the position
 *     it was assigned at) with commitSync, printing "commit PARTITION OFFSET". Ends with
 *     "done COUNT", exit 0. A partition without a committed offset (--reset none) prints
 *     "error no-committed-offset PARTITION" and exits 3 without reading. A consumer that got no
 *     partitions before the timeout (a dead cluster, or a group whose other members hold them
 *     all) prints "error not-assigned" and exits 4.
 *
 * KafkaApp offsets --bootstrap B --group G [--prop k=v]...
 *     Prints "committed TOPIC PARTITION OFFSET" per committed offset of the group, sorted.
 * </pre>
 *
 * Any other failure prints the exception on stderr and exits 1; bad arguments exit 2.
 */
public class KafkaApp {
    static final int TIMEOUT_MS = 10_000;
    static final String HEADER_KEY = "app";
    static final String HEADER_VALUE = "kmirror-e2e";

    public static void main(String[] args) {
        int code;
        try {
            code = run(args);
        } catch (UsageException e) {
            System.err.println("KafkaApp: " + e.getMessage());
            code = 2;
        } catch (Throwable e) {
            System.err.println("KafkaApp: " + oneLine(e));
            e.printStackTrace();
            code = 1;
        }
        System.out.flush();
        System.err.flush();
        System.exit(code);
    }

    static class UsageException extends Exception {
        private static final long serialVersionUID = 1L;

        UsageException(String msg) {
            super(msg);
        }
    }

    /** Flags: --name value, except the boolean ones; --prop may repeat. */
    static class Args {
        final Map<String, String> values = new HashMap<>();
        final Properties props = new Properties();

        Args(String[] args, int from, String... booleans) throws UsageException {
            List<String> bools = List.of(booleans);
            for (int i = from; i < args.length; i++) {
                String a = args[i];
                if (!a.startsWith("--")) {
                    throw new UsageException("unexpected argument " + a);
                }
                String name = a.substring(2);
                if (bools.contains(name)) {
                    values.put(name, "true");
                    continue;
                }
                if (i + 1 >= args.length) {
                    throw new UsageException(a + " needs a value");
                }
                String v = args[++i];
                if (name.equals("prop")) {
                    int eq = v.indexOf('=');
                    if (eq <= 0) {
                        throw new UsageException("--prop " + v + ": want key=value");
                    }
                    props.put(v.substring(0, eq), v.substring(eq + 1));
                } else {
                    values.put(name, v);
                }
            }
        }

        String get(String name) throws UsageException {
            String v = values.get(name);
            if (v == null) {
                throw new UsageException("--" + name + " is required");
            }
            return v;
        }

        String get(String name, String def) {
            return values.getOrDefault(name, def);
        }

        int getInt(String name) throws UsageException {
            try {
                return Integer.parseInt(get(name));
            } catch (NumberFormatException e) {
                throw new UsageException("--" + name + ": " + e.getMessage());
            }
        }

        boolean has(String name) {
            return values.containsKey(name);
        }

        /** The bounded client settings, bootstrap, then --prop overrides. */
        Properties client() throws UsageException {
            Properties p = new Properties();
            p.put("bootstrap.servers", get("bootstrap"));
            p.put("request.timeout.ms", String.valueOf(TIMEOUT_MS));
            p.put("default.api.timeout.ms", String.valueOf(TIMEOUT_MS));
            p.put("socket.connection.setup.timeout.ms", "5000");
            p.put("socket.connection.setup.timeout.max.ms", "5000");
            p.put("reconnect.backoff.max.ms", "1000");
            p.put("retry.backoff.max.ms", "1000");
            return p;
        }
    }

    static int run(String[] args) throws Exception {
        if (args.length < 1) {
            throw new UsageException("usage: KafkaApp produce|consume|offsets --bootstrap B ...");
        }
        switch (args[0]) {
            case "produce":
                return produce(new Args(args, 1, "idempotent"));
            case "consume":
                return consume(new Args(args, 1, "commit"));
            case "offsets":
                return offsets(new Args(args, 1));
            default:
                throw new UsageException("unknown command " + args[0]);
        }
    }

    static int produce(Args a) throws Exception {
        String topic = a.get("topic");
        int count = a.getInt("count");
        String keyPrefix = a.get("key-prefix", "k");
        String valuePrefix = a.get("value-prefix", "v");
        Integer partition = a.has("partition") ? Integer.valueOf(a.getInt("partition")) : null;

        Properties p = a.client();
        p.remove("default.api.timeout.ms"); // a consumer and admin setting; the producer warns about it
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        p.put("acks", a.get("acks", "all"));
        p.put("enable.idempotence", String.valueOf(a.has("idempotent")));
        p.put("max.block.ms", String.valueOf(TIMEOUT_MS));
        // delivery.timeout.ms must be at least linger.ms + request.timeout.ms.
        p.put("linger.ms", "0");
        p.put("delivery.timeout.ms", String.valueOf(TIMEOUT_MS));
        p.putAll(a.props);

        boolean failed = false;
        KafkaProducer<String, String> producer = new KafkaProducer<>(p);
        try {
            // The metadata first: without it every send would block max.block.ms on its own.
            String noMetadata = null;
            try {
                producer.partitionsFor(topic);
            } catch (Exception e) {
                noMetadata = oneLine(e);
            }
            List<Future<RecordMetadata>> futures = new ArrayList<>();
            List<String> keys = new ArrayList<>();
            List<String> values = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                String key = keyPrefix + i;
                String value = valuePrefix + i;
                keys.add(key);
                values.add(value);
                if (noMetadata != null) {
                    futures.add(null);
                    continue;
                }
                RecordHeaders headers = new RecordHeaders();
                headers.add(HEADER_KEY, HEADER_VALUE.getBytes(StandardCharsets.UTF_8));
                // A null timestamp: the producer stamps the record when it is sent (CreateTime).
                ProducerRecord<String, String> rec = new ProducerRecord<>(topic, partition, null, key, value, headers);
                try {
                    futures.add(producer.send(rec));
                } catch (Exception e) {
                    futures.add(new FailedFuture(e));
                }
            }
            try {
                producer.flush();
            } catch (Exception e) {
                // Each future says what became of its record.
            }
            for (int i = 0; i < count; i++) {
                Future<RecordMetadata> f = futures.get(i);
                if (f == null) {
                    System.out.println("failed " + keys.get(i) + " " + noMetadata);
                    failed = true;
                    continue;
                }
                try {
                    RecordMetadata md = f.get(2L * TIMEOUT_MS, TimeUnit.MILLISECONDS);
                    System.out.println("acked " + md.partition() + " " + md.offset() + " " + keys.get(i) + " " + values.get(i));
                } catch (ExecutionException e) {
                    System.out.println("failed " + keys.get(i) + " " + oneLine(e.getCause() != null ? e.getCause() : e));
                    failed = true;
                } catch (Exception e) {
                    System.out.println("failed " + keys.get(i) + " " + oneLine(e));
                    failed = true;
                }
            }
        } finally {
            producer.close(Duration.ofSeconds(5));
        }
        return failed ? 1 : 0;
    }

    /** A send that threw instead of returning a future. */
    static class FailedFuture implements Future<RecordMetadata> {
        final Exception e;

        FailedFuture(Exception e) {
            this.e = e;
        }

        public boolean cancel(boolean mayInterrupt) {
            return false;
        }

        public boolean isCancelled() {
            return false;
        }

        public boolean isDone() {
            return true;
        }

        public RecordMetadata get() throws ExecutionException {
            throw new ExecutionException(e);
        }

        public RecordMetadata get(long timeout, TimeUnit unit) throws ExecutionException {
            throw new ExecutionException(e);
        }
    }

    static int consume(Args a) throws Exception {
        String topic = a.get("topic");
        String group = a.get("group");
        int max = a.getInt("max");
        int timeoutMs = a.getInt("timeout-ms");
        boolean commit = a.has("commit");

        Properties p = a.client();
        p.put("group.id", group);
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", a.get("reset", "none"));
        p.put("isolation.level", "read_committed");
        p.put("max.poll.records", String.valueOf(Math.max(1, Math.min(max, 500))));
        p.putAll(a.props);

        // next: per assigned partition, the offset after the last record printed, or the
        // position it was assigned at. It is what --commit commits.
        Map<TopicPartition, Long> next = new HashMap<>();
        TreeSet<Integer> missing = new TreeSet<>();
        boolean[] assigned = {false};
        int count = 0;
        KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p);
        try {
            ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    assigned[0] = true;
                    for (TopicPartition tp : sorted(partitions)) {
                        try {
                            long pos = consumer.position(tp);
                            next.put(tp, pos);
                            System.out.println("position " + tp.partition() + " " + pos);
                        } catch (NoOffsetForPartitionException e) {
                            for (TopicPartition m : e.partitions()) {
                                missing.add(m.partition());
                            }
                        }
                    }
                }

                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                    Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                    for (TopicPartition tp : partitions) {
                        Long off = next.remove(tp);
                        if (off != null) {
                            offsets.put(tp, new OffsetAndMetadata(off));
                        }
                    }
                    if (commit && missing.isEmpty() && !offsets.isEmpty()) {
                        commitAndPrint(consumer, offsets);
                    }
                }
            };
            consumer.subscribe(List.of(topic), listener);
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
            poll:
            while (missing.isEmpty() && (count < max || (max == 0 && !assigned[0]))) {
                long left = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
                if (left <= 0) {
                    break;
                }
                ConsumerRecords<String, String> records;
                try {
                    records = consumer.poll(Duration.ofMillis(Math.min(left, 500)));
                } catch (NoOffsetForPartitionException e) {
                    for (TopicPartition m : e.partitions()) {
                        missing.add(m.partition());
                    }
                    break;
                }
                if (!missing.isEmpty()) {
                    break;
                }
                for (ConsumerRecord<String, String> r : records) {
                    if (count >= max) {
                        break poll;
                    }
                    System.out.println("record " + r.partition() + " " + r.offset() + " " + r.key() + " " + r.value());
                    next.put(new TopicPartition(r.topic(), r.partition()), r.offset() + 1);
                    count++;
                }
            }
            if (!missing.isEmpty()) {
                for (int m : missing) {
                    System.out.println("error no-committed-offset " + m);
                }
                return 3;
            }
            if (!assigned[0]) {
                System.out.println("error not-assigned");
                return 4;
            }
            if (commit && !next.isEmpty()) {
                commitNext(consumer, next);
                next.clear(); // close revokes the partitions: nothing more to commit
            }
            System.out.println("done " + count);
        } finally {
            consumer.close(CloseOptions.timeout(Duration.ofSeconds(5)));
        }
        return 0;
    }

    static void commitAndPrint(KafkaConsumer<?, ?> consumer, Map<TopicPartition, OffsetAndMetadata> offsets) {
        consumer.commitSync(offsets);
        for (TopicPartition tp : sorted(offsets.keySet())) {
            System.out.println("commit " + tp.partition() + " " + offsets.get(tp).offset());
        }
    }

    static void commitNext(KafkaConsumer<?, ?> consumer, Map<TopicPartition, Long> next) {
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        next.forEach((tp, off) -> offsets.put(tp, new OffsetAndMetadata(off)));
        commitAndPrint(consumer, offsets);
    }

    static int offsets(Args a) throws Exception {
        String group = a.get("group");
        Properties p = a.client();
        p.putAll(a.props);
        Admin admin = Admin.create(p);
        try {
            Map<TopicPartition, OffsetAndMetadata> offsets = admin.listConsumerGroupOffsets(group)
                .partitionsToOffsetAndMetadata().get(TIMEOUT_MS, TimeUnit.MILLISECONDS);
            for (TopicPartition tp : sorted(offsets.keySet())) {
                OffsetAndMetadata om = offsets.get(tp);
                if (om != null) {
                    System.out.println("committed " + tp.topic() + " " + tp.partition() + " " + om.offset());
                }
            }
        } finally {
            admin.close(Duration.ofSeconds(5));
        }
        return 0;
    }

    static List<TopicPartition> sorted(Collection<TopicPartition> tps) {
        TreeMap<String, TopicPartition> m = new TreeMap<>();
        for (TopicPartition tp : tps) {
            m.put(tp.topic() + "\u0000" + String.format("%010d", tp.partition()), tp);
        }
        return new ArrayList<>(m.values());
    }

    static String oneLine(Throwable e) {
        String msg = e.getClass().getSimpleName() + ": " + e.getMessage();
        return msg.replace('\n', ' ').replace('\r', ' ');
    }
}

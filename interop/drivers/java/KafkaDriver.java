// The Java Kafka client (kafka-clients) driver for python -m interop (interop/clients/java_kafka.py).
//   java KafkaDriver produce|txn|consume BOOTSTRAP TOPIC GROUP N COMPRESSION USER PASSWORD
// (GROUP, N, USER, PASSWORD: "-" when not used). produce and txn read messages from stdin, one
// per line: base64 body, base64 key or "-", then header=base64value fields, tab-separated; txn
// lines start with C (committed) or A (aborted). consume prints READY once partitions are
// assigned and "MSG <body> <key|-> <timestamp> <header=value>..." (base64) per record; it stops
// after N records or at a "stop" line, committing what it printed. Errors: exit 1, stderr.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;

public class KafkaDriver {
    static final Base64.Decoder DEC = Base64.getDecoder();
    static final Base64.Encoder ENC = Base64.getEncoder();

    static Properties common(String bootstrap, String user, String password) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        if (!user.equals("-")) {
            p.put("security.protocol", "SASL_PLAINTEXT");
            p.put("sasl.mechanism", "PLAIN");
            p.put("sasl.jaas.config", "org.apache.kafka.common.security.plain.PlainLoginModule required "
                + "username=\"" + user + "\" password=\"" + password + "\";");
        }
        return p;
    }

    static ProducerRecord<byte[], byte[]> record(String topic, String[] f, int from) {
        byte[] key = f[from + 1].equals("-") ? null : DEC.decode(f[from + 1]);
        ProducerRecord<byte[], byte[]> r = new ProducerRecord<>(topic, null, key, DEC.decode(f[from]));
        for (int i = from + 2; i < f.length; i++) {
            int eq = f[i].indexOf('=');
            r.headers().add(f[i].substring(0, eq), DEC.decode(f[i].substring(eq + 1)));
        }
        return r;
    }

    static KafkaProducer<byte[], byte[]> producer(Properties p, String compression) {
        p.put("key.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
        p.put("value.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
        p.put("compression.type", compression);
        p.put("max.request.size", "4194304");
        p.put("delivery.timeout.ms", "20000");
        p.put("request.timeout.ms", "10000");
        p.put("max.block.ms", "15000");
        p.put("linger.ms", "5");
        return new KafkaProducer<>(p);
    }

    public static void main(String[] a) throws Exception {
        String mode = a[0], bootstrap = a[1], topic = a[2], group = a[3];
        int n = a[4].equals("-") ? -1 : Integer.parseInt(a[4]);
        Properties p = common(bootstrap, a[6], a[7]);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        if (mode.equals("produce")) {
            try (KafkaProducer<byte[], byte[]> producer = producer(p, a[5])) {
                List<Future<RecordMetadata>> sent = new ArrayList<>();
                for (String line; (line = in.readLine()) != null && !line.isEmpty(); ) {
                    sent.add(producer.send(record(topic, line.split("\t"), 0)));
                }
                producer.flush();
                for (Future<RecordMetadata> f : sent) f.get();
            }
            System.out.println("DONE");
        } else if (mode.equals("txn")) {
            p.put("transactional.id", "interop-java-" + topic);
            try (KafkaProducer<byte[], byte[]> producer = producer(p, a[5])) {
                producer.initTransactions();
                List<String> commit = new ArrayList<>(), abort = new ArrayList<>();
                for (String line; (line = in.readLine()) != null && !line.isEmpty(); ) {
                    (line.startsWith("C") ? commit : abort).add(line);
                }
                for (List<String> lines : List.of(commit, abort)) {
                    producer.beginTransaction();
                    for (String line : lines) producer.send(record(topic, line.split("\t"), 1)).get();
                    if (lines == commit) producer.commitTransaction(); else producer.abortTransaction();
                }
            }
            System.out.println("DONE");
        } else {
            p.put("group.id", group);
            p.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
            p.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
            p.put("auto.offset.reset", "earliest");
            p.put("enable.auto.commit", "false");
            p.put("isolation.level", "read_committed");
            p.put("max.partition.fetch.bytes", "4194304");
            p.put("max.poll.records", n >= 0 && n < 100 ? "1" : "500");
            AtomicBoolean stop = new AtomicBoolean(false);
            Thread watcher = new Thread(() -> {
                try { while (in.readLine() != null && !stop.get()) { stop.set(true); } } catch (Exception e) { }
                stop.set(true);
            });
            watcher.setDaemon(true);
            watcher.start();
            Map<TopicPartition, OffsetAndMetadata> done = new HashMap<>();
            int count = 0;
            try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
                consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                    public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                        Map<TopicPartition, OffsetAndMetadata> mine = new HashMap<>();
                        for (TopicPartition tp : parts) if (done.containsKey(tp)) mine.put(tp, done.get(tp));
                        if (!mine.isEmpty()) consumer.commitSync(mine);
                    }
                    public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                        System.out.println("READY");
                        System.out.flush();
                    }
                });
                while (!stop.get() && (n < 0 || count < n)) {
                    for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                        StringBuilder sb = new StringBuilder("MSG\t").append(ENC.encodeToString(r.value() == null ? new byte[0] : r.value()));
                        sb.append('\t').append(r.key() == null ? "-" : ENC.encodeToString(r.key()));
                        sb.append('\t').append(r.timestamp());
                        for (Header h : r.headers()) {
                            sb.append('\t').append(h.key()).append('=').append(ENC.encodeToString(h.value() == null ? new byte[0] : h.value()));
                        }
                        System.out.println(sb);
                        done.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                        count++;
                        if (n >= 0 && count >= n) break;
                    }
                    System.out.flush();
                }
                if (!done.isEmpty()) consumer.commitSync(done);
            }
        }
    }
}

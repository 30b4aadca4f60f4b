// Drives the Java client (kafka-clients, as Spark, Flink and Connect embed it) against the
// broker: an idempotent producer with the given compression, then a group consumer that
// reads everything back, checks keys, values and headers, and commits. Prints "OK <n>".
// Arguments: bootstrap topic group count compression [sasl-user sasl-password].
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class KafkaClientCheck {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2], compression = args[4];
        int count = Integer.parseInt(args[3]);

        Properties p = new Properties();
        sasl(p, args);
        extra(p);
        p.put("bootstrap.servers", bootstrap);
        p.put("compression.type", compression);
        p.put("acks", "all");
        p.put("enable.idempotence", "true");
        p.put("linger.ms", "5");
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < count; i++) {
                ProducerRecord<byte[], byte[]> r = new ProducerRecord<>(topic, bytes("key-" + i), bytes("value-" + i));
                r.headers().add("tag", bytes("TagJ"));
                producer.send(r);
            }
            producer.flush();
        }

        Properties c = new Properties();
        sasl(c, args);
        extra(c);
        c.put("bootstrap.servers", bootstrap);
        c.put("group.id", group);
        c.put("auto.offset.reset", "earliest");
        c.put("enable.auto.commit", "false");
        // -Dgroup.protocol=consumer: KIP-848 (the broker assigns; no client session timeout then)
        String protocol = System.getProperty("group.protocol", "classic");
        c.put("group.protocol", protocol);
        if (protocol.equals("classic")) {
            c.put("session.timeout.ms", "6000");
        }
        c.put("max.poll.interval.ms", "7000");
        c.put("key.deserializer", ByteArrayDeserializer.class.getName());
        c.put("value.deserializer", ByteArrayDeserializer.class.getName());
        int seen = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(c)) {
            consumer.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 30_000;
            while (seen < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    String key = new String(r.key(), StandardCharsets.UTF_8);
                    String value = new String(r.value(), StandardCharsets.UTF_8);
                    String tag = new String(r.headers().lastHeader("tag").value(), StandardCharsets.UTF_8);
                    if (!value.equals("value-" + key.substring(4)) || !tag.equals("TagJ")) {
                        throw new IllegalStateException("bad record " + key + " " + value + " " + tag);
                    }
                    seen++;
                }
            }
            consumer.commitSync();
        }
        System.out.println("OK " + seen);
    }

    private static void sasl(Properties props, String[] args) {
        if (args.length < 7) {
            return;
        }
        props.put("security.protocol", "SASL_PLAINTEXT");
        props.put("sasl.mechanism", "PLAIN");
        props.put("sasl.jaas.config", "org.apache.kafka.common.security.plain.PlainLoginModule required username=\""
                + args[5] + "\" password=\"" + args[6] + "\";");
    }

    /** -Dclient.properties=FILE: more client settings for both (TLS: security.protocol=SSL ...). */
    private static void extra(Properties props) throws Exception {
        String path = System.getProperty("client.properties");
        if (path != null) {
            try (java.io.FileInputStream in = new java.io.FileInputStream(path)) {
                props.load(in);
            }
        }
    }

    private static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }
}

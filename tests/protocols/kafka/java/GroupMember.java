// One member of a consumer group, for the online-migration test: consumes and commits every
// record synchronously, printing "REC <value>" (committed) or "UNCOMMITTED <value>" (the commit
// was refused), and "ASSIGN [p, ...]" whenever its partitions change; closes (leaving the
// group) once the stop file exists, then prints "CLOSED".
// Arguments: bootstrap topic group protocol(classic|consumer) stop-file.
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class GroupMember {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2], protocol = args[3];
        Path stop = Paths.get(args[4]);
        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        c.put("group.id", group);
        c.put("group.protocol", protocol);
        c.put("auto.offset.reset", "earliest");
        c.put("enable.auto.commit", "false");
        c.put("key.deserializer", ByteArrayDeserializer.class.getName());
        c.put("value.deserializer", ByteArrayDeserializer.class.getName());
        if (protocol.equals("classic")) {
            c.put("session.timeout.ms", "6000");
            c.put("heartbeat.interval.ms", "300");
            c.put("partition.assignment.strategy", "org.apache.kafka.clients.consumer.CooperativeStickyAssignor");
        }
        long deadline = System.currentTimeMillis() + 120_000;  // bounded whatever the test does
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(c)) {
            consumer.subscribe(List.of(topic));
            Set<Integer> last = null;
            while (!Files.exists(stop) && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(100))) {
                    String value = new String(r.value(), StandardCharsets.UTF_8);
                    try {
                        consumer.commitSync(Map.of(new TopicPartition(r.topic(), r.partition()),
                                                   new OffsetAndMetadata(r.offset() + 1)));
                        System.out.println("REC " + value);
                    } catch (KafkaException e) {
                        System.out.println("UNCOMMITTED " + value);
                    }
                }
                Set<Integer> now = new TreeSet<>();
                for (TopicPartition tp : consumer.assignment()) {
                    now.add(tp.partition());
                }
                if (!now.equals(last)) {
                    System.out.println("ASSIGN " + now);
                    last = now;
                }
                System.out.flush();
            }
        }
        System.out.println("CLOSED");
    }
}

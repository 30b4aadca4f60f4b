import java.time.Duration;
import java.util.Collections;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/** Reads partition 0 of a topic from its beginning to its end offset, as Kafka Streams
 *  restores a state store from its changelog; prints "offset key value" per record
 *  ("-" for a null value) and "END n" once at the end offset. */
public class CompactedRead {
    public static void main(String[] args) {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        props.put("enable.auto.commit", "false");
        TopicPartition tp = new TopicPartition(args[1], 0);
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            consumer.assign(Collections.singletonList(tp));
            consumer.seekToBeginning(Collections.singletonList(tp));
            long end = consumer.endOffsets(Collections.singletonList(tp)).get(tp);
            int n = 0;
            long deadline = System.currentTimeMillis() + 60_000;
            while (consumer.position(tp) < end && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    System.out.println(r.offset() + " " + r.key() + " " + (r.value() == null ? "-" : r.value()));
                    n++;
                }
            }
            System.out.println("END " + n + " " + consumer.position(tp));
        }
    }
}

// An idempotent producer (acks=all) that goes on producing while the test kills and restarts
// the broker under it: values "j%09d" in order, round robin over the partitions, about
// 5,000 a second, until the stop file exists; then it flushes and prints
//   SENT <n>         records sent
//   UNACKED <ranges> indexes whose send failed ("-" for none, else "a-b,c-d")
//   ERRORS <k> ...   failed sends and the first error
// Arguments: bootstrap topic partitions stop-file.
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.BitSet;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class IdempotentCrashProducer {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        int partitions = Integer.parseInt(args[2]);
        Path stop = Path.of(args[3]);

        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("acks", "all");
        p.put("enable.idempotence", "true");
        p.put("linger.ms", "5");
        p.put("delivery.timeout.ms", "300000");
        p.put("reconnect.backoff.max.ms", "500");
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        BitSet failed = new BitSet();
        AtomicReference<Exception> first = new AtomicReference<>();
        int sent = 0;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            System.out.println("PRODUCING");
            System.out.flush();
            while (!Files.exists(stop)) {
                for (int i = 0; i < 50; i++, sent++) {
                    final int index = sent;
                    byte[] value = String.format("j%09d", index).getBytes(StandardCharsets.UTF_8);
                    producer.send(new ProducerRecord<>(topic, index % partitions, null, value), (meta, error) -> {
                        if (error != null) {
                            synchronized (failed) {
                                failed.set(index);
                            }
                            first.compareAndSet(null, error);
                        }
                    });
                }
                Thread.sleep(10);
            }
            producer.flush();
        }
        StringBuilder ranges = new StringBuilder();
        synchronized (failed) {
            for (int low = failed.nextSetBit(0); low >= 0; low = failed.nextSetBit(failed.nextClearBit(low))) {
                int high = failed.nextClearBit(low) - 1;
                ranges.append(ranges.length() == 0 ? "" : ",").append(low).append('-').append(high);
            }
        }
        System.out.println("SENT " + sent);
        System.out.println("UNACKED " + (ranges.length() == 0 ? "-" : ranges));
        System.out.println("ERRORS " + failed.cardinality() + (first.get() == null ? "" : " " + first.get()));
    }
}

// A transactional producer that runs transactions back to back while the test kills and
// restarts the broker under it: transaction t writes "t%07d-%02d" (i = 0..9) over two
// partitions, then commits; a commit that times out (the broker away) is retried, as the
// client allows; a transaction the client must give up is aborted. Runs until the stop file
// exists, then prints
//   COMMITTED <ranges>  transactions committed ("-" for none, else "a-b,c-d")
//   ABORTED <ranges>    transactions aborted
//   FATAL <error>       only when the producer died (ProducerFenced, OutOfOrderSequence, ...)
// Arguments: bootstrap topic stop-file.
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.BitSet;
import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class TxnCrashProducer {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        Path stop = Path.of(args[2]);

        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("transactional.id", "java-crash-txn");
        p.put("transaction.timeout.ms", "60000");
        p.put("delivery.timeout.ms", "60000");
        p.put("max.block.ms", "10000");
        p.put("linger.ms", "5");
        p.put("reconnect.backoff.max.ms", "500");
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        BitSet committed = new BitSet(), aborted = new BitSet();
        String fatal = null;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            System.out.println("PRODUCING");
            System.out.flush();
            for (int t = 0; !Files.exists(stop); t++) {
                try {
                    producer.beginTransaction();
                    for (int i = 0; i < 10; i++) {
                        byte[] value = String.format("t%07d-%02d", t, i).getBytes(StandardCharsets.UTF_8);
                        producer.send(new ProducerRecord<>(topic, i % 2, null, value));
                    }
                    commit(producer);
                    committed.set(t);
                } catch (ProducerFencedException | OutOfOrderSequenceException | AuthorizationException e) {
                    fatal = e.toString();
                    break;
                } catch (KafkaException e) {  // abortable: the transaction is given up
                    abort(producer);
                    aborted.set(t);
                }
            }
        }
        System.out.println("COMMITTED " + ranges(committed));
        System.out.println("ABORTED " + ranges(aborted));
        if (fatal != null) {
            System.out.println("FATAL " + fatal);
        }
    }

    static void commit(KafkaProducer<byte[], byte[]> producer) {
        for (int attempt = 0; ; attempt++) {
            try {
                producer.commitTransaction();
                return;
            } catch (TimeoutException e) {  // the broker away: the same commit may be retried
                if (attempt >= 12) throw e;
            }
        }
    }

    static void abort(KafkaProducer<byte[], byte[]> producer) {
        for (int attempt = 0; ; attempt++) {
            try {
                producer.abortTransaction();
                return;
            } catch (TimeoutException e) {
                if (attempt >= 12) throw e;
            }
        }
    }

    static String ranges(BitSet set) {
        StringBuilder out = new StringBuilder();
        for (int low = set.nextSetBit(0); low >= 0; low = set.nextSetBit(set.nextClearBit(low))) {
            int high = set.nextClearBit(low) - 1;
            out.append(out.length() == 0 ? "" : ",").append(low).append('-').append(high);
        }
        return out.length() == 0 ? "-" : out.toString();
    }
}

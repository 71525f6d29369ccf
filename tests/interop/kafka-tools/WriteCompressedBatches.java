import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.security.MessageDigest;

import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.record.CompressionType;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.RecordBatch;
import org.apache.kafka.common.record.SimpleRecord;
import org.apache.kafka.common.record.TimestampType;

/**
 * Writes, with Kafka's own client code, one segment file per codec (DIR/CODEC.log) holding one v2 batch of COUNT
 * records, as a producer builds it: record i has key "k<i>", timestamp 1700000000000 + i and a value of the
 * SHA-256 of its key (incompressible) followed by "v<i>:" and 64 dots (compressible).
 */
public class WriteCompressedBatches {
    public static void main(String[] args) throws Exception {
        Path dir = Path.of(args[0]);
        int count = Integer.parseInt(args[1]);
        SimpleRecord[] records = new SimpleRecord[count];
        MessageDigest sha256 = MessageDigest.getInstance("SHA-256");
        for (int i = 0; i < count; i++) {
            byte[] key = ("k" + i).getBytes(StandardCharsets.UTF_8);
            byte[] text = ("v" + i + ":" + ".".repeat(64)).getBytes(StandardCharsets.UTF_8);
            ByteBuffer value = ByteBuffer.allocate(32 + text.length).put(sha256.digest(key)).put(text);
            records[i] = new SimpleRecord(1_700_000_000_000L + i, key, value.array());
        }
        for (String codec : new String[] {"gzip", "snappy", "lz4", "zstd"}) {
            Compression compression = Compression.of(CompressionType.forName(codec)).build();
            MemoryRecords batch = MemoryRecords.withRecords(
                RecordBatch.MAGIC_VALUE_V2, 0L, compression, TimestampType.CREATE_TIME, records);
            try (FileChannel out = FileChannel.open(dir.resolve(codec + ".log"),
                    StandardOpenOption.CREATE, StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING)) {
                batch.writeFullyTo(out);
            }
        }
    }
}

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.spark.SparkConf;
import org.apache.spark.io.CompressionCodec;
import org.apache.spark.io.CompressionCodec$;
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager;
import org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager;
import org.apache.spark.sql.execution.streaming.state.StateStoreChangelogReader;
import org.apache.spark.sql.execution.streaming.state.StateStoreChangelogReaderFactory;
import org.apache.spark.sql.internal.SQLConf;
import org.rocksdb.Options;
import org.rocksdb.RocksDB;
import org.rocksdb.RocksDBException;
import org.rocksdb.SstFileReader;

/**
 * Reads state files as a restart of the job would, with the readers the job itself loads them with: an SST with
 * RocksDB's own SstFileReader (open, then every block's checksum), a changelog with Spark's own changelog reader
 * (its format version detected as Spark detects it, decompressed with the codec Spark's configuration names, every
 * record read to the end marker).
 *
 * Input (stdin): one file a line, "sst<TAB>path" or "changelog<TAB>path". Output (stdout): one line per file, in order:
 * "ok<TAB>path<TAB>records" or "bad<TAB>path<TAB>what is wrong". Exit 0 once every line has been answered.
 * The codec is spark.sql.streaming.stateStore.compression.codec as this Spark's SQLConf gives it (the job does not
 * set it), unless the first argument names another.
 */
public final class StateFiles {
    public static void main(String[] args) throws Exception {
        RocksDB.loadLibrary();
        String codecName = args.length > 0 ? args[0] : SQLConf.get().stateStoreCompressionCodec();
        CompressionCodec codec = CompressionCodec$.MODULE$.createCodec(new SparkConf(false), codecName);
        Configuration hadoop = new Configuration();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) {
                continue;
            }
            int tab = line.indexOf('\t');
            String kind = tab < 0 ? "" : line.substring(0, tab);
            String path = tab < 0 ? line : line.substring(tab + 1);
            String answer;
            try {
                if (kind.equals("sst")) {
                    answer = "ok\t" + path + "\t" + sst(path);
                } else if (kind.equals("changelog")) {
                    answer = "ok\t" + path + "\t" + changelog(path, hadoop, codec);
                } else {
                    answer = "bad\t" + path + "\tunknown kind '" + kind + "': allowed sst, changelog";
                }
            } catch (Throwable error) {  // what the reader throws is what a restart would fail with
                answer = "bad\t" + path + "\t" + oneLine(error);
            }
            System.out.println(answer);
            System.out.flush();
        }
    }

    /** Entries in the file, after its footer and every block's checksum verified. */
    static long sst(String path) throws RocksDBException {
        try (Options options = new Options(); SstFileReader reader = new SstFileReader(options)) {
            reader.open(path);
            reader.verifyChecksum();
            return reader.getTableProperties().getNumEntries();
        }
    }

    /** Records in the changelog, each read by Spark's reader up to its end marker. */
    static long changelog(String path, Configuration hadoop, CompressionCodec codec) {
        Path file = new Path("file://" + path);
        CheckpointFileManager files = new FileSystemBasedCheckpointFileManager(file.getParent(), hadoop);
        StateStoreChangelogReader reader =
                new StateStoreChangelogReaderFactory(files, file, codec).constructChangelogReader();
        try {
            long records = 0;
            while (reader.hasNext()) {
                reader.next();
                records++;
            }
            return records;
        } finally {
            reader.closeIfNeeded();
        }
    }

    static String oneLine(Throwable error) {
        StringBuilder text = new StringBuilder();
        for (Throwable cause = error; cause != null && text.length() < 600; cause = cause.getCause()) {
            if (text.length() > 0) {
                text.append(" <- ");
            }
            text.append(cause.getClass().getSimpleName()).append(": ").append(String.valueOf(cause.getMessage()));
            if (cause.getCause() == cause) {
                break;
            }
        }
        return text.toString().replaceAll("\\s+", " ");
    }
}

package org.peerdirect.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordingFile;

/**
 * {@code ./peerdirect --jfr FILE -c ...}: a demo-like session (ODP on mlx5 with drops, a peer
 * client's invalidation under RDMA WRITE traffic on mlx4) recorded by the launcher holds every
 * event kind such a session makes, each with its fields filled in, and the JDK's {@code jfr print}
 * reads the file. (The dma-buf move and the IOMMU fault, which no shell command provokes, are
 * checked where they are committed: ib-core's through mlx5-provider's {@code Mlx5JfrEventsTest},
 * sim-kernel's {@code KernelEventsTest}.)
 */
class JfrRecordingIT {

    @TempDir
    Path tmp;

    private static final Map<String, Predicate<RecordedEvent>> KINDS = Map.of(
            "org.peerdirect.Mlx5Command", e -> !e.getString("device").isEmpty() && !e.getString("opcode").isEmpty(),
            "org.peerdirect.Mlx4Command", e -> !e.getString("device").isEmpty() && !e.getString("opcode").isEmpty(),
            "org.peerdirect.Mlx5PageFault", e -> e.getString("device").startsWith("mlx5_") // both sides of the pingpong fault (the server side on the next mlx5 device)
                    && (e.getString("subtype").equals("WQE") ? e.getInt("wqNumber") != 0 : e.getLong("address") != 0),
            "org.peerdirect.MmuNotifierInvalidate", e -> !e.getString("process").isEmpty() && e.getLong("endAddress") > e.getLong("startAddress"),
            "org.peerdirect.PeerClientCallback", e -> e.getString("client").equals("example_peer") && !e.getString("callback").isEmpty(),
            "org.peerdirect.PeerInvalidate", e -> e.getString("client").equals("example_peer") && e.getLong("length") > 0);

    @Test
    void aRecordedSessionHoldsEachEventKindWithItsFields() throws Exception {
        Path file = tmp.resolve("session.jfr");
        int rc = Main.run("--home", tmp.resolve("home").toString(), "--jfr", file.toString(), "-c",
                "rdma:pingpong -d mlx5_1 -s 8192 -n 50 -c -o --drop-every 10; rdma:invalidate_test -n 500 --mem example_peer");
        assertEquals(Main.OK, rc);
        assertTrue(Files.size(file) > 0, "written at the end of the session");
        Map<String, Integer> seen = new TreeMap<>();
        for (RecordedEvent e : RecordingFile.readAllEvents(file)) {
            String name = e.getEventType().getName();
            Predicate<RecordedEvent> fields = KINDS.get(name);
            if (fields != null) {
                assertTrue(fields.test(e), "fields of " + e);
                seen.merge(name, 1, Integer::sum);
            }
        }
        assertEquals(KINDS.keySet(), Set.copyOf(seen.keySet()), "every kind recorded: " + seen);

        Path jfr = Path.of(System.getProperty("java.home"), "bin", "jfr");
        Process p = new ProcessBuilder(jfr.toString(), "print", "--categories", "peerdirect", file.toString()).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(60, TimeUnit.SECONDS));
        assertEquals(0, p.exitValue(), out.length() > 2000 ? out.substring(0, 2000) : out);
        for (String kind : List.copyOf(KINDS.keySet())) {
            assertTrue(out.contains(kind + " {"), "jfr print shows " + kind);
        }
        assertTrue(out.contains("callback = \"acquire\""), "with its fields");
    }

    @Test
    void aJfrFileInAMissingFolderIsRefusedBeforeTheContainerStarts() {
        assertEquals(Main.USAGE, Main.run("--home", tmp.resolve("home2").toString(), "--jfr", tmp.resolve("no/such/s.jfr").toString(), "-c", "lb"));
        assertEquals(Main.USAGE, Main.run("--jfr"));
    }
}

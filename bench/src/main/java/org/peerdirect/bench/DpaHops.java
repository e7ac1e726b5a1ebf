package org.peerdirect.bench;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.locks.LockSupport;

import org.peerdirect.hca.dpa.DpaConfig;

import jdk.jfr.Recording;
import jdk.jfr.Timespan;
import jdk.jfr.ValueDescriptor;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordingFile;

/**
 * Issue 43's wake-up chain, hop by hop: runs one of the DOCA DPA rigs for a while under a JFR
 * recording of the DPA's hop events ({@code org.peerdirect.DpaPollWait}, {@code DpaWake},
 * {@code DpaDoorbell}) and prints, per event and hop, the count, p50, p99 and the hop's time per
 * operation (the sum over the run divided by the operations done: where a round trip's time goes).
 *
 * <pre>
 * java --enable-native-access=ALL-UNNAMED -cp 'bench/target/classes:bench/target/lib/*' org.peerdirect.bench.DpaHops \
 *     [pingpong|activations] [seconds] [pollSpinNanos] [--keep file.jfr]
 * </pre>
 * {@code pingpong} is {@link DocaPingPongBench}'s free-running exchange (an operation is a round
 * trip, the host looking at the count every 200 µs as the bench does); {@code activations} is
 * {@link DocaDpaBench#activations} (an operation is one notify of its workers). {@code pollSpinNanos}
 * sets {@link DpaConfig#pollSpin} for the run (the rigs make their own devices: through
 * {@value DpaConfig#POLL_SPIN_PROPERTY}).
 */
public final class DpaHops {

    static final List<String> EVENTS = List.of("org.peerdirect.DpaPollWait", "org.peerdirect.DpaWake",
            "org.peerdirect.DpaDoorbell");

    private DpaHops() {
    }

    public static void main(String[] args) throws Exception {
        String rig = args.length > 0 ? args[0] : "pingpong";
        long seconds = args.length > 1 ? Long.parseLong(args[1]) : 5;
        if (args.length > 2) {
            System.setProperty(DpaConfig.POLL_SPIN_PROPERTY, args[2]);
        }
        Path keep = args.length > 4 && args[3].equals("--keep") ? Path.of(args[4]) : null;
        Path file = keep != null ? keep : Files.createTempFile("peerdirect-dpahops", ".jfr");
        long[] ops = new long[1];
        long wall = switch (rig) {
            case "pingpong" -> pingPong(seconds, file, ops);
            case "activations" -> activations(seconds, file, ops);
            default -> throw new IllegalArgumentException("rig " + rig + ": pingpong or activations");
        };
        System.out.printf(Locale.ROOT, "%s: %d operations in %.2f s, %.1f µs each; pollSpin %s%n", rig, ops[0], wall / 1e9,
                ops[0] == 0 ? Double.NaN : wall / 1e3 / ops[0], DpaConfig.bluefield3().pollSpin());
        for (String line : report(RecordingFile.readAllEvents(file), ops[0])) {
            System.out.println(line);
        }
        if (keep == null) {
            Files.delete(file);
        }
    }

    private static Recording recording() {
        Recording r = new Recording();
        EVENTS.forEach(e -> r.enable(e).withoutThreshold());
        return r;
    }

    /** The ping-pong runs free; the recording covers {@code seconds} of it; returns the recorded wall time. */
    static long pingPong(long seconds, Path file, long[] ops) throws Exception {
        DocaPingPongBench.Host h = new DocaPingPongBench.Host();
        h.elidePolls = true;
        h.up();
        try {
            settle(h::count, Duration.ofSeconds(1));
            try (Recording r = recording()) {
                r.start();
                long c0 = h.count();
                long t0 = System.nanoTime();
                long end = t0 + seconds * 1_000_000_000L;
                while (System.nanoTime() < end) {
                    LockSupport.parkNanos(200_000); // as the bench looks
                    h.count();
                }
                ops[0] = h.count() - c0;
                long wall = System.nanoTime() - t0;
                r.stop();
                r.dump(file);
                return wall;
            }
        } finally {
            h.down();
        }
    }

    /** {@link DocaDpaBench#activations} back to back under the recording. */
    static long activations(long seconds, Path file, long[] ops) throws Exception {
        DocaDpaBench b = new DocaDpaBench();
        DocaDpaBench.Host h = new DocaDpaBench.Host();
        h.up();
        try {
            long warm = System.nanoTime() + 1_000_000_000L;
            while (System.nanoTime() < warm) {
                b.activations(h);
            }
            try (Recording r = recording()) {
                r.start();
                long t0 = System.nanoTime();
                long end = t0 + seconds * 1_000_000_000L;
                long n = 0;
                while (System.nanoTime() < end) {
                    b.activations(h);
                    n++;
                }
                long wall = System.nanoTime() - t0;
                ops[0] = n;
                r.stop();
                r.dump(file);
                return wall;
            }
        } finally {
            h.down();
        }
    }

    private static void settle(java.util.function.LongSupplier count, Duration warm) {
        long end = System.nanoTime() + warm.toNanos();
        while (System.nanoTime() < end) {
            LockSupport.parkNanos(200_000);
            count.getAsLong();
        }
    }

    /**
     * One line per (event, grouping, hop): count, p50, p99 and the hop's sum per operation. Poll
     * waits are grouped by outcome, doorbells by register; a doorbell's hop is its duration.
     */
    static List<String> report(List<RecordedEvent> events, long ops) {
        Map<String, List<Long>> hops = new TreeMap<>();
        for (RecordedEvent e : events) {
            String type = e.getEventType().getName();
            if (!EVENTS.contains(type)) {
                continue;
            }
            String name = type.substring(type.lastIndexOf('.') + 1);
            String group = e.hasField("outcome") ? e.getString("outcome") : e.hasField("register") ? e.getString("register")
                    : e.hasField("how") ? e.getString("how") : "";
            String key = name + " " + group + " ";
            if (name.equals("DpaDoorbell")) {
                hops.computeIfAbsent(key + "duration", k -> new ArrayList<>()).add(e.getDuration().toNanos());
                continue;
            }
            for (ValueDescriptor f : e.getEventType().getFields()) {
                if (f.getAnnotation(Timespan.class) != null && !f.getName().equals("duration")) {
                    hops.computeIfAbsent(key + f.getName(), k -> new ArrayList<>()).add(e.getLong(f.getName()));
                }
            }
        }
        List<String> out = new ArrayList<>();
        out.add(String.format(Locale.ROOT, "  %-40s %9s %11s %11s %13s", "event / group / hop", "count", "p50 µs", "p99 µs",
                "µs per op"));
        hops.forEach((k, v) -> {
            long[] s = v.stream().mapToLong(Long::longValue).sorted().toArray();
            long sum = Arrays.stream(s).sum();
            out.add(String.format(Locale.ROOT, "  %-40s %9d %11.2f %11.2f %13.2f", k, s.length, pct(s, 50) / 1e3,
                    pct(s, 99) / 1e3, ops == 0 ? Double.NaN : sum / 1e3 / ops));
        });
        return out;
    }

    /** Nearest-rank percentile of sorted {@code s}. */
    static long pct(long[] s, double p) {
        if (s.length == 0) {
            return 0;
        }
        return s[Math.min(s.length - 1, Math.max(0, (int) Math.ceil(p / 100 * s.length) - 1))];
    }
}

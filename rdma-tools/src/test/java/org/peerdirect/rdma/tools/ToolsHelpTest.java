package org.peerdirect.rdma.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Test;
import org.peerdirect.kernel.shell.UsageException;

/**
 * Every {@code rdma:*} function reaches its tool's option table: {@code --help} prints that
 * table (and nothing runs: no device or kernel is given here), and a bad value is refused, named,
 * before any device is looked up.
 */
class ToolsHelpTest {

    /** No device list and no kernel: a tool that got past its options would fail on them. */
    private final RdmaTools tools = new RdmaTools(null, null);

    interface Call {
        String run(RdmaTools t, Object... args) throws Exception;
    }

    private static Map<String, Call> functions() {
        Map<String, Call> f = new LinkedHashMap<>();
        f.put("devinfo", RdmaTools::devinfo);
        f.put("pingpong", RdmaTools::pingpong);
        f.put("ud_pingpong", RdmaTools::ud_pingpong);
        f.put("xsrq_pingpong", RdmaTools::xsrq_pingpong);
        f.put("asyncwatch", RdmaTools::asyncwatch);
        f.put("write_bw", RdmaTools::write_bw);
        f.put("read_bw", RdmaTools::read_bw);
        f.put("send_bw", RdmaTools::send_bw);
        f.put("write_lat", RdmaTools::write_lat);
        f.put("atomic_bw", RdmaTools::atomic_bw);
        f.put("invalidate_test", RdmaTools::invalidate_test);
        f.put("put", RdmaTools::put);
        f.put("doctor", RdmaTools::doctor);
        return f;
    }

    private String printed(Call c, Object... args) throws Exception {
        PrintStream old = System.out;
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        System.setOut(new PrintStream(buf, true, StandardCharsets.UTF_8));
        try {
            assertNull(c.run(tools, args), "--help prints its usage (the completion reads printed output) and returns nothing");
        } finally {
            System.setOut(old);
        }
        return buf.toString(StandardCharsets.UTF_8);
    }

    @Test
    void everyToolPrintsItsOwnOptionsWithDefaults() throws Exception {
        for (Map.Entry<String, Call> e : functions().entrySet()) {
            String out = printed(e.getValue(), "--help");
            assertTrue(out.startsWith("usage: rdma:" + e.getKey() + " [OPTIONS]\n"), out);
            assertTrue(out.contains("-? --help"), out);
        }
        assertTrue(printed(RdmaTools::write_bw, "--help").contains("-s SIZE          message size in bytes (K/M suffixes) (default=65536)"));
        assertTrue(printed(RdmaTools::write_lat, "--help").contains("-s SIZE          message size in bytes (K/M suffixes) (default=2)"));
        assertTrue(printed(RdmaTools::write_lat, "--help").contains("-q QPS           number of QPs (1 for latency) (default=1)"));
        assertTrue(printed(RdmaTools::pingpong, "-?").contains("--mem MEM        memory: host, a peer client (peermem:clients), "
                + "or client:device (nv_mem:1: GPU 1) (default=host)"));
        assertTrue(printed(RdmaTools::atomic_bw, "-h").contains("-A TYPE          FETCH_AND_ADD, CMP_AND_SWAP or ATOMIC_WRITE (default=FETCH_AND_ADD)"));
        assertTrue(printed(RdmaTools::read_bw, "--help").contains("  RDMA_Read BW Test between two simulated processes, as perftest's ib_read_bw."));
    }

    @Test
    void badValuesAreRefusedNamingToolOptionAndValue() {
        Map<List<Object>, String> cases = new LinkedHashMap<>();
        cases.put(List.of("write_bw", "-q", "17"), "rdma:write_bw: option -q (number of QPs, up to 16) must be from 1 to 16, got 17");
        cases.put(List.of("write_lat", "-q", "2"), "rdma:write_lat: option -q (number of QPs (1 for latency)) must be from 1 to 1, got 2");
        cases.put(List.of("send_bw", "-s", "9M"), "rdma:send_bw: option -s (message size in bytes (K/M suffixes)) must be from 1 to 8388608, got 9M");
        cases.put(List.of("read_bw", "-n", "4"), "rdma:read_bw: option -n (iterations per QP) must be from 5 to 100000000, got 4");
        cases.put(List.of("pingpong", "-s", "abc"),
                "rdma:pingpong: expected option -s (message size in bytes (K/M suffixes)) (an integer, 0x hex, or with a K/M/G/T suffix), got 'abc'");
        cases.put(List.of("pingpong", "--drop-every", "2"), "rdma:pingpong: --drop-every drops pages under an ODP registration: give -o too");
        cases.put(List.of("ud_pingpong", "-s", "8K"), "rdma:ud_pingpong: option -s (message size in bytes, at most the path MTU (4096)) "
                + "must be from 1 to 4096, got 8K");
        cases.put(List.of("xsrq_pingpong", "-c", "65"), "rdma:xsrq_pingpong: option -c (client processes, each with its own XRC domain and SRQ) "
                + "must be from 1 to 64, got 65");
        cases.put(List.of("asyncwatch", "-t", "-1"), "rdma:asyncwatch: option -t (watch this long at most) must be from 0 to 3600000, got -1");
        cases.put(List.of("devinfo", "-i", "2"), "rdma:devinfo: option -i (only this port (the models have one port)) must be from 1 to 1, got 2");
        cases.put(List.of("invalidate_test", "-s", "4"), "rdma:invalidate_test: option -s (bytes per write) must be from 8 to 1048576, got 4");
        cases.put(List.of("put", "--mem", "ssd_mem"), "rdma:put needs --mem <peer client> and --text <text> (rdma:put --help)");
        cases.put(List.of("atomic_bw", "-A", "SWAP"), "rdma:atomic_bw: -A SWAP is not an atomic operation (FETCH_AND_ADD, CMP_AND_SWAP, ATOMIC_WRITE)");
        cases.put(List.of("write_bw", "--use_hugepages", "--mem", "nv_mem"), "rdma:write_bw: --use_hugepages backs host memory; --mem nv_mem is device memory");
        cases.put(List.of("read_bw", "-z"), "rdma:read_bw: unknown option '-z' (rdma:read_bw --help lists its options)");
        cases.put(List.of("devinfo", "--server-dev", "mlx4_0"), "rdma:devinfo: unknown option '--server-dev' (rdma:devinfo --help lists its options)");
        cases.put(List.of("doctor", "7", "0x1000"), "rdma:doctor: give PID ADDR LEN (got 2 of them: [7, 0x1000]); for example rdma:doctor 7 0x10000000 1M");
        cases.put(List.of("doctor", "7", "0x1000", "4K", "--access", "ON_DEMAND"), "rdma:doctor: --access ON_DEMAND: leave it out, the doctor "
                + "tries on-demand paging itself (the ODP explicit and implicit paths)");
        cases.put(List.of("doctor", "7", "0x1000", "4K", "--access", "LOCAL_WRITE|REMOTE_WRIT"), "rdma:doctor: --access: unknown access flag "
                + "'REMOTE_WRIT' (LOCAL_WRITE, REMOTE_WRITE, REMOTE_READ, REMOTE_ATOMIC, MW_BIND, ZERO_BASED, HUGETLB, FLUSH_GLOBAL, "
                + "FLUSH_PERSISTENT, RELAXED_ORDERING)");
        cases.putAll(optionsNotHonoured());
        Map<String, Call> f = functions();
        cases.forEach((call, message) -> {
            Object[] args = call.subList(1, call.size()).toArray();
            UsageException e = assertThrows(UsageException.class, () -> f.get((String) call.get(0)).run(tools, args), call.toString());
            assertEquals(message, e.getMessage(), call.toString());
        });
    }

    /**
     * Issue 45 item 8: an option a tool would accept and ignore is refused naming it, as perftest
     * refuses what does not apply to the test (its latency tests have no {@code -t}, its atomic
     * test no {@code -s}/{@code -a}), and so are two options of which only one would count.
     */
    private static Map<List<Object>, String> optionsNotHonoured() {
        Map<List<Object>, String> cases = new LinkedHashMap<>();
        cases.put(List.of("write_lat", "-t", "5"), "rdma:write_lat: option -t (TX depth) is not supported: a latency test has one write "
                + "in flight at a time (perftest's latency tests have no -t)");
        cases.put(List.of("atomic_bw", "-s", "64"), "rdma:atomic_bw: option -s (message size) is not supported: an atomic operation moves "
                + "8 bytes (ib_atomic_bw has no -s)");
        cases.put(List.of("atomic_bw", "-a"), "rdma:atomic_bw: option -a (all sizes) is not supported: an atomic operation moves 8 bytes "
                + "(ib_atomic_bw has no -a)");
        cases.put(List.of("write_bw", "-s", "64K", "-a"), "rdma:write_bw: options -s and -a cannot be used together: -a runs every size "
                + "from 2 bytes to 8 MiB; give one of them");
        cases.put(List.of("write_lat", "-a", "-s", "8"), "rdma:write_lat: options -s and -a cannot be used together: -a runs every size "
                + "from 2 bytes to 8 MiB; give one of them");
        return cases;
    }

    @Test
    void optionsNotHonouredAreNotOffered() throws Exception {
        String lat = printed(RdmaTools::write_lat, "--help");
        assertTrue(!lat.contains("-t ") && !lat.contains("TX depth"), lat);
        assertTrue(printed(RdmaTools::write_bw, "--help").contains("-t DEPTH         TX depth: work requests in flight per QP (default=128)"));
        String atomic = printed(RdmaTools::atomic_bw, "--help");
        assertTrue(!atomic.contains("-s ") && !atomic.contains("\n  -a "), atomic);
        for (String twoEnds : List.of("pingpong", "ud_pingpong", "xsrq_pingpong", "write_bw", "read_bw", "send_bw", "write_lat", "atomic_bw",
                "invalidate_test", "put")) {
            assertTrue(printed(functions().get(twoEnds), "--help").contains("--server-dev DEVICE server device (default: the next device of "
                    + "DEVICE's link layer that can serve the run, else DEVICE itself: loopback)"), twoEnds);
        }
    }

    /**
     * The component description bnd generated lists as {@code osgi.command.function} exactly the
     * public methods Gogo can call with a description: a function registered without its method,
     * or a tool method left unregistered, fails here.
     */
    @Test
    void theRegisteredFunctionsAreTheDescribedMethods() throws Exception {
        String xml;
        try (java.io.InputStream in = RdmaTools.class.getClassLoader().getResourceAsStream("OSGI-INF/" + RdmaTools.class.getName() + ".xml")) {
            assertTrue(in != null, "bnd generated the component description");
            xml = new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("name=\"osgi.command.function\" type=\"String\">([^<]*)<").matcher(xml);
        assertTrue(m.find(), xml);
        java.util.Set<String> registered = new java.util.TreeSet<>(List.of(m.group(1).trim().split("\\s+")));
        java.util.Set<String> described = new java.util.TreeSet<>();
        for (java.lang.reflect.Method meth : RdmaTools.class.getDeclaredMethods()) {
            if (java.lang.reflect.Modifier.isPublic(meth.getModifiers())
                    && meth.isAnnotationPresent(org.apache.felix.service.command.Descriptor.class)) {
                described.add(meth.getName());
            }
        }
        assertEquals(14, registered.size(), registered.toString());
        assertEquals(registered, described);
        assertTrue(xml.contains("<property name=\"osgi.command.scope\" type=\"String\" value=\"rdma\"/>"), xml);
    }

    @Test
    void perftestSweepsPowersOfTwoAndCapsEachSize() {
        List<Integer> s = PerftestParameters.sweep(PerftestParameters.MAX_SWEEP);
        assertEquals(23, s.size());
        assertEquals(2, s.get(0));
        assertEquals(8 << 20, s.get(22));
        PerftestParameters p = PerftestParameters.bw("write_bw", "RDMA_Write BW Test", org.peerdirect.ib.core.verbs.IbvWrOpcode.RDMA_WRITE,
                new Object[] {"-a", "-n", "100000"});
        p.parse();
        assertEquals(s, p.sizes);
        assertEquals(8 << 20, p.maxSize());
        assertEquals(100_000, p.itersFor(2), "small sizes run -n iterations");
        assertEquals(64, p.itersFor(8 << 20), "8 MiB moves at most 512 MiB: 64 iterations");
    }
}

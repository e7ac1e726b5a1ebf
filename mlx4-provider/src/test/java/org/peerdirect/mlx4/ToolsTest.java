package org.peerdirect.mlx4;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.example.peermem.ExamplePeerMemory;
import org.peerdirect.rdma.tools.RdmaTools;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvDeviceList;
import org.peerdirect.kernel.mm.KernelException;

/** The rdma:* tools over two ConnectX-3 models, as a user runs them in the shell. */
class ToolsTest {

    @TempDir
    Path tmp;
    Lab lab;
    RdmaTools tools;

    @BeforeEach
    void up() {
        lab = new Lab(tmp, 2);
        tools = lab.tools();
    }

    @AfterEach
    void down() {
        lab.close();
    }

    /** rdma:send_bw -a failed with "transport retry counter exceeded": receive completions piled up across sizes. */
    @Test
    void sendBwSweepsEverySize() {
        String out = tools.send_bw("-a", "-n", "300");
        assertTrue(out.contains(" 8388608 ") && out.contains(" 2 "), out);
        assertTrue(out.contains("per size and QP"), out);
    }

    /** Ctrl-C interrupts the command's thread: a tool stops at once instead of running on for minutes. */
    @Test
    void aToolStopsWhenItsThreadIsInterrupted() throws Exception {
        java.util.concurrent.atomic.AtomicReference<Throwable> ended = new java.util.concurrent.atomic.AtomicReference<>();
        java.util.concurrent.CountDownLatch done = new java.util.concurrent.CountDownLatch(1);
        Thread t = Thread.ofPlatform().start(() -> {
            try {
                tools.write_bw("-n", "100000000");
            } catch (Throwable e) {
                ended.set(e);
            } finally {
                done.countDown();
            }
        });
        // let it run until traffic flows, then interrupt as the shell does on Ctrl-C
        long deadline = System.nanoTime() + 20_000_000_000L;
        while (lab.mm.processes().stream().noneMatch(p -> p.name().equals("perftest-client") && p.pinnedPages() > 0)
                && System.nanoTime() < deadline) {
            Thread.onSpinWait();
        }
        t.interrupt();
        assertTrue(done.await(10, java.util.concurrent.TimeUnit.SECONDS), "the tool ended within 10 s of the interrupt");
        assertTrue(ended.get() != null && ended.get().getMessage().contains("interrupted"), String.valueOf(ended.get()));
        assertEquals(0, lab.mm.processes().stream().filter(p -> p.name().startsWith("perftest")).count(), "its processes exited");
        String again = tools.pingpong("-n", "10", "-c");
        assertTrue(again.contains("no mismatch"), again);
    }

    /**
     * The PMA counters through MAD_IFC (what sysfs's counters/ shows): what the ports sent the
     * ports received, in 4-byte words, and at least the pingpong's payload both ways.
     */
    @Test
    void thePortCountersCountAPingpongsBytes() throws Exception {
        long[] before = pma("port_xmit_data", "port_rcv_data", "port_xmit_packets", "port_rcv_packets");
        String out = tools.pingpong("-s", "4096", "-n", "100", "-c");
        assertTrue(out.contains("no mismatch"), out);
        long[] after = pma("port_xmit_data", "port_rcv_data", "port_xmit_packets", "port_rcv_packets");
        long sentWords = after[0] - before[0];
        assertTrue(sentWords * 4 >= 2L * 100 * 4096, "100 SENDs of 4096 bytes each way, in words: " + sentWords);
        assertEquals(sentWords, after[1] - before[1], "what the ports sent, they received (one fabric)");
        assertEquals(after[2] - before[2], after[3] - before[3], "packets alike");
        assertTrue(after[2] - before[2] >= 200, "one packet per SEND at least");
    }

    /** The named PMA counters of port 1, summed over both devices. */
    long[] pma(String... names) {
        long[] v = new long[names.length];
        for (Mlx4Device d : lab.devs) {
            java.util.Map<String, Long> m = d.queryPmaCounters(1);
            for (int i = 0; i < names.length; i++) {
                v[i] += m.get(names[i]);
            }
        }
        return v;
    }

    @Test
    void pingpongPrintsIbvRcPingpongLines() throws Exception {
        String out = tools.pingpong("-s", "4096", "-n", "1000", "-c");
        System.out.println(out + "\nrnr=" + lab.machine.engine(0).rnrNaks() + "/" + lab.machine.engine(1).rnrNaks()
                + " retries=" + lab.machine.engine(0).transportRetries() + "/" + lab.machine.engine(1).transportRetries());
        assertTrue(out.matches("(?s).*8192000 bytes in \\d+\\.\\d\\d seconds = \\d+\\.\\d\\d Mbit/sec.*"), out);
        assertTrue(out.matches("(?s).*1000 iters in \\d+\\.\\d\\d seconds = \\d+\\.\\d\\d usec/iter.*"), out);
        assertTrue(out.contains("local address:  LID 0x0001"), out);
        String ev = tools.pingpong("-s", "1024", "-n", "300", "-c", "-e");
        assertTrue(ev.contains("614400 bytes in") && ev.contains("completion channels (-e)"), ev);
    }

    @Test
    void pingpongOverPeerMemory() throws Exception {
        ExamplePeerMemory gpu = new ExamplePeerMemory(lab.mm, "example_peer", 4096, false);
        lab.core.peerMemory().register(gpu, true);
        tools.addAllocatorForTests(gpu);
        String out = tools.pingpong("-s", "8192", "-n", "200", "-c", "--mem", "example_peer");
        assertTrue(out.contains("3276800 bytes in"), out);
        assertEquals(0, gpu.regionCount(), "the tool freed its device memory");
        String inv = tools.invalidate_test("-n", "400");
        assertTrue(inv.contains("the first write after the free failed"), inv);
        assertTrue(inv.contains("SUCCESS        200") && inv.contains("REM_ACCESS_ERR 1") && inv.contains("WR_FLUSH_ERR   199"), inv);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> tools.pingpong("--mem", "nope"));
        assertTrue(e.getMessage().contains("no peer memory client"), e.getMessage());
    }

    @Test
    void perftestTablesAndDevices() {
        String d = tools.devices();
        assertTrue(d.contains("mlx4_0          \t0002c90300001000"), d);
        String bw = tools.write_bw("-s", "65536", "-n", "2000");
        System.out.println(bw);
        assertTrue(bw.contains(" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]"), bw);
        assertTrue(bw.matches("(?s).*\\n 65536\\s+2000\\s+\\d+\\.\\d\\d\\s+\\d+\\.\\d\\d\\s+\\d+\\.\\d{6}\\n.*"), bw);
        String sweep = tools.write_bw("-a", "-n", "200", "-q", "2");
        assertEquals(23, sweep.lines().filter(l -> l.matches(" \\d+\\s+\\d+\\s+.*")).count(), sweep);
        String rd = tools.read_bw("-s", "4096", "-n", "1000");
        assertTrue(rd.contains("RDMA_Read BW Test") && rd.matches("(?s).*\\n 4096\\s+1000\\s+\\d+\\.\\d\\d\\s+\\d+\\.\\d\\d\\s+\\d+\\.\\d{6}\\n.*"), rd);
        String sd = tools.send_bw("-s", "4096", "-n", "1000", "-q", "2");
        assertTrue(sd.contains("Send BW Test") && sd.contains("Number of qps   : 2")
                && sd.matches("(?s).*\\n 4096\\s+1000\\s+\\d+\\.\\d\\d\\s+\\d+\\.\\d\\d\\s+\\d+\\.\\d{6}\\n.*"), sd);
        String lat = tools.write_lat("-n", "300");
        System.out.println(lat);
        assertTrue(lat.contains("t_typical[usec]"), lat);
        assertThrows(IllegalArgumentException.class, () -> tools.write_bw("-x"));
        String info = tools.devinfo("-v", "-d", "mlx4_1");
        assertTrue(info.contains("hca_id:\tmlx4_1") && info.contains("NO SUPPORT") && info.contains("port_lid:\t\t2"), info);
    }
}

package org.peerdirect.dpa.samples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import java.util.Objects;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvDeviceList;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.shell.UsageException;

/**
 * {@code dpa:sample} on a BlueField-3 through mlx5_core/mlx5_ib (outside OSGi): each sample's key
 * lines, its mistakes caught, bad arguments named; the machine's close checks that no DevX or DPA
 * object, firmware page or IOMMU mapping is left after each.
 */
class SamplesTest {

    @TempDir
    Path tmp;
    SampleMachine m;
    IbvDeviceList devices;

    @BeforeEach
    void up() {
        m = new SampleMachine(tmp);
        devices = new IbvDeviceList() {
            @Override
            public List<IbvDevice> devices() {
                return List.of(m.devCx4, m.dev);
            }

            @Override
            public IbvDevice device(String name) {
                return devices().stream().filter(d -> name == null || d.name().equals(name)).findFirst()
                        .orElseThrow(() -> new KernelException(KernelException.Errno.ENODEV, "no device " + name));
            }
        };
    }

    @AfterEach
    void down() {
        m.close();
    }

    /** The bench's findings, as {@code dpa:mm} prints them, for the fence sample. */
    String run(Object... args) {
        return Samples.run(devices, m.mm, id -> DpaSamples.processLines(String.join("\n", m.bf3.dpaFindings()), id), args);
    }

    @Test
    void withoutANameItListsTheSamples() {
        String l = run();
        assertTrue(l.contains("rpc ") && l.contains("echo ") && l.contains("fence ") && l.contains("kernel_launch ") && l.contains("initiator_target ") && l.contains("ping_pong ") && l.contains("nvqual ") && l.contains("usage"), l);
    }

    @Test
    void rpcPrintsTheSumTheDeviceReturned() {
        String out = run("rpc", "-d", "mlx5_2");
        assertTrue(out.contains("rpc_calculate(7, 35) = 42\n"), out);
        assertTrue(out.contains("rpc_calculate(-1, 1099511627776) = 1099511627775\n"), out);
        assertTrue(out.contains("FLEXIO_ERR_STATUS_NO_ERROR") && out.contains("flexio_process_destroy"), out);
        assertTrue(!out.contains("WRONG"), out);
        assertEquals(List.of(), m.dpa().stream().filter(l -> l.contains("process ")).toList(), "no DPA process left");
    }

    @Test
    void echoBringsEveryMessageBackUpperCasedInOrder() {
        String out = run("echo", "-n", "20");
        for (int i = 0; i < 20; i++) {
            assertTrue(out.contains("sent \"msg-" + i + "-echo\"  came back \"MSG-" + i + "-ECHO\"\n"), "message " + i + ":\n" + out);
        }
        assertTrue(out.contains("20 of 20 messages echoed in order; echo_count 20"), out);
        assertTrue(out.contains("FLEXIO_ERR_STATUS_NO_ERROR"), out);
    }

    @Test
    void fenceShowsTheCheckersFindingWithTheHandlersLine() {
        String out = run("fence");
        assertTrue(out.contains("no echo came back"), out);
        assertTrue(out.contains("FLEXIO_ERR_STATUS_FATAL_ERROR"), out);
        assertTrue(out.contains("C1 thread") && out.contains("without __dpa_thread_memory_writeback before the doorbell")
                && out.contains("(called from org.peerdirect.dpa.samples.dev.EchoDev."), out);
    }

    /** A DOCA log line of the sample: {@code [time][pid][DOCA][LEVEL][file:line][function] message}. */
    private static final java.util.regex.Pattern DOCA_LINE = java.util.regex.Pattern.compile(
            "\\[\\d\\d:\\d\\d:\\d\\d:\\d{6}]\\[\\d+]\\[DOCA]\\[(INF|ERR)]\\[([a-z_]+\\.c):(\\d+)]\\[([a-z_]+)] (.*)");

    /** Each line as {@code LEVEL file:line [function] message}, without the time and pid that vary; other lines as they are. */
    private static List<String> docaLines(String out) {
        return out.lines().map(l -> {
            java.util.regex.Matcher m = DOCA_LINE.matcher(l);
            return m.matches() ? m.group(1) + " " + m.group(2) + ":" + m.group(3) + " [" + m.group(4) + "] " + m.group(5) : l;
        }).toList();
    }

    /**
     * DOCA's {@code dpa_kernel_launch}: exactly the real sample's lines, in its order (its two
     * {@code DOCA_LOG_INFO}s of main and the kernel's line between them), on the first device with
     * a DPA though the ConnectX-4 is listed first; the DPA process is gone afterwards.
     */
    @Test
    void kernelLaunchPrintsWhatTheRealSamplePrints() {
        String out = run("kernel_launch", "-w", "300");
        assertEquals(List.of(
                "INF dpa_kernel_launch_main.c:68 [main] Starting the sample",
                "Hello from kernel",
                "INF dpa_kernel_launch_main.c:112 [main] Sample finished successfully"), docaLines(out), out);
        assertEquals(List.of(), m.dpa().stream().filter(l -> l.contains("process ")).toList(), "no DPA process left");
    }

    /**
     * DOCA's {@code dpa_initiator_target}: the real sample's host lines in its order (with the C
     * file's lines), the connection ids, buffers and immediates of the four sends, then the two
     * threads' lines: thread 1 once per receive (each value 1..4 once, immediates 10..13, the
     * receive's connection as user data, re-posting and rescheduling three times, finishing after
     * the 4th), thread 2 once setting the event to 10. The DPA process is gone afterwards.
     */
    @Test
    void initiatorTargetPrintsWhatTheRealSamplePrints() {
        String out = run("initiator_target");
        List<String> lines = docaLines(out);
        String s = "dpa_initiator_target_sample.c:";
        List<String> host = new java.util.ArrayList<>(List.of(
                "INF dpa_initiator_target_main.c:64 [main] Starting the sample",
                "INF " + s + "205 [dpa_initiator_target] Create Initiator DOCA DPA Completion",
                "INF " + s + "214 [dpa_initiator_target] Initialize Initiator DOCA RDMA",
                "INF " + s + "59 [rdma_obj_create] Create DOCA RDMA",
                "INF " + s + "77 [rdma_obj_create] Start DOCA RDMA",
                "INF " + s + "221 [dpa_initiator_target] Allocate Target DPA thread #1 device argument",
                "INF " + s + "228 [dpa_initiator_target] Create Target DOCA DPA Thread #1",
                "INF " + s + "238 [dpa_initiator_target] Create Target DOCA DPA Completion",
                "INF " + s + "248 [dpa_initiator_target] Initialize Target DOCA RDMA",
                "INF " + s + "59 [rdma_obj_create] Create DOCA RDMA",
                "INF " + s + "77 [rdma_obj_create] Start DOCA RDMA",
                "INF " + s + "131 [rdma_objs_connect] Connect Initiator DOCA RDMA connection #1 to Target DOCA RDMA connection #1",
                "INF " + s + "141 [rdma_objs_connect] Connect Target DOCA RDMA connection #1 to Initiator DOCA RDMA connection #1",
                "INF " + s + "151 [rdma_objs_connect] Connect Initiator DOCA RDMA connection #2 to Target DOCA RDMA connection #2",
                "INF " + s + "161 [rdma_objs_connect] Connect Target DOCA RDMA connection #2 to Initiator DOCA RDMA connection #2",
                "INF " + s + "261 [dpa_initiator_target] Run Target DOCA DPA Thread #1",
                "INF " + s + "268 [dpa_initiator_target] Allocate Target DPA thread #2 device argument",
                "INF " + s + "275 [dpa_initiator_target] Create Target DOCA DPA Thread #2",
                "INF " + s + "285 [dpa_initiator_target] Create Target DOCA DPA Notification Completion",
                "INF " + s + "295 [dpa_initiator_target] Run Target DOCA DPA Thread #2",
                "INF " + s + "302 [dpa_initiator_target] Create completion DOCA sync event",
                "INF " + s + "313 [dpa_initiator_target] Update Target DPA thread #2 device argument",
                "INF " + s + "325 [dpa_initiator_target] Create Target DOCA MMAP on DPA for Target DOCA RDMA received buffer",
                "INF " + s + "351 [dpa_initiator_target] Update Target DPA thread #1 device argument",
                "INF " + s + "368 [dpa_initiator_target] Create Initiator DOCA MMAP for send buffer on Host",
                "INF " + s + "382 [dpa_initiator_target] Trigger an RPC to prepare Target DPA receive memory"));
        java.util.regex.Matcher conn = java.util.regex.Pattern.compile("RDMA connection #(\\d+) with buffer 1 and").matcher(out);
        assertTrue(conn.find(), out);
        int c0 = Integer.parseInt(conn.group(1));
        for (int i = 0; i < 4; i++) {
            host.add("INF " + s + "397 [dpa_initiator_target] Trigger an RPC to post send on Initiator DOCA RDMA connection #"
                    + (c0 + i % 2) + " with buffer " + (i + 1) + " and immediate value " + (10 + i));
        }
        host.addAll(List.of(
                "INF " + s + "422 [dpa_initiator_target] Waiting for Target Thread #2 to set completion Sync Event value to be greater than 9",
                "INF " + s + "430 [dpa_initiator_target] Tear down",
                "INF " + s + "108 [rdma_obj_destroy] Destroy Target DOCA RDMA",
                "INF " + s + "108 [rdma_obj_destroy] Destroy Initiator DOCA RDMA"));
        assertEquals(host, lines.subList(0, host.size()), out);
        assertEquals("INF dpa_initiator_target_main.c:110 [main] Sample finished successfully", lines.getLast(), out);

        List<String> dev = lines.subList(host.size(), lines.size() - 1);
        String t1 = "thread1_kernel: ";
        assertEquals(4, dev.stream().filter(l -> l.equals(t1 + "Hello from Thread #1")).count(), out);
        assertEquals(4, dev.stream().filter(l -> l.equals(t1 + "doca_dpa_dev_get_completion() returned 1")).count(), out);
        for (int v = 1; v <= 4; v++) {
            String value = t1 + "Value of DPA received buffer is " + v;
            assertEquals(1, dev.stream().filter(value::equals).count(), "value " + v + " once:\n" + out);
        }
        java.util.Set<String> imms = new java.util.HashSet<>();
        dev.stream().filter(l -> l.startsWith(t1 + "doca_dpa_dev_get_completion_immediate() returned ")).forEach(l -> imms.add(l.substring(l.lastIndexOf(' ') + 1)));
        assertEquals(java.util.Set.of("10", "11", "12", "13"), imms, out);
        assertEquals(3, dev.stream().filter(l -> l.equals(t1 + "Reschedule")).count(), "rescheduled after receives 1..3:\n" + out);
        assertEquals(3, dev.stream().filter(l -> l.startsWith(t1 + "Repost RDMA receive on DPA Mmap handle 0x")).count(), out);
        int notify = dev.indexOf(t1 + "Received all data values, Notify Thread #2");
        // thread 2 runs as soon as it is notified: its lines may come before thread 1's last, and the
        // host tears down once thread 2 set the event, so thread 1's "Finish" may never be printed
        // (as with the real sample: the threads are destroyed); if it is, it comes after the notify
        assertTrue(notify >= 0, out);
        int fin = dev.indexOf(t1 + "Finish");
        assertTrue(fin < 0 || fin > notify && fin == dev.lastIndexOf(t1 + "Finish"), out);
        // thread 2's "Finish" comes after its update of the event the host waits for: the host may
        // tear down (the C sample's order) before it is printed, as DOCA's best-effort printing allows
        List<String> t2 = dev.stream().filter(l -> l.startsWith("thread2_kernel: ")).toList();
        List<String> t2Expected = List.of("thread2_kernel: Hello from Thread #2", "thread2_kernel: Set sync event value to 10", "thread2_kernel: Finish");
        assertTrue(t2.equals(t2Expected) || t2.equals(t2Expected.subList(0, 2)), out);
        assertTrue(dev.stream().allMatch(l -> l.startsWith(t1) || l.startsWith("thread2_kernel: ")), "only the threads' lines:\n" + out);
        assertEquals(List.of(), m.dpa().stream().filter(l -> l.contains("process ")).toList(), "no DPA process left");
    }

    /**
     * DOCA's {@code dpa_ping_pong}: main's two lines around the threads' lines, 100 iteration lines
     * per side numbered 1..100 (Ping --> Pong from ping, Pong --> Ping from pong), no error line.
     */
    @Test
    void pingPongPrintsWhatTheRealSamplePrints() {
        String out = run("ping_pong");
        List<String> lines = docaLines(out);
        assertEquals("INF dpa_ping_pong_main.c:64 [main] Starting the sample", lines.getFirst(), out);
        assertEquals("INF dpa_ping_pong_main.c:110 [main] Sample finished successfully", lines.getLast(), out);
        List<String> dev = lines.subList(1, lines.size() - 1);
        for (String side : List.of("Ping --> Pong", "Pong --> Ping")) {
            List<String> want = java.util.stream.IntStream.rangeClosed(1, 100).mapToObj(i -> side + " Iteration #" + i).toList();
            assertEquals(want, dev.stream().filter(l -> l.startsWith(side)).toList(), out);
        }
        assertEquals(200, dev.size(), out);
        assertEquals(List.of(), m.dpa().stream().filter(l -> l.contains("process ")).toList(), "no DPA process left");
    }

    /**
     * DOCA's {@code dpa_nvqual} as a command: the sample's JSON (every EU but the DPA OS's, the
     * excluded ones unused, a cycle count per used EU) and the verdict; the mutant's failures and
     * the checker's C1 naming the store; no DPA process left after either.
     */
    @Test
    void nvqualPrintsTheSamplesJsonAndTheMutantItsFinding() {
        String out = run("nvqual", "-e", "5,17,200");
        assertTrue(out.contains("\"device\": \"mlx5_2\"") && out.contains("\"total_harts\": 256") && out.contains("\"unreachable_harts\": [1]")
                && out.contains("\"unused_harts\": [5, 17, 200]"), out);
        assertTrue(out.contains("qualification passed: 251 EUs"), out);
        java.util.regex.Matcher cycles = java.util.regex.Pattern.compile("\"cycles\": \\[([0-9, ]+)]").matcher(out);
        assertTrue(cycles.find(), out);
        assertEquals(251, cycles.group(1).split(", ").length, out);
        assertEquals(List.of(), m.dpa().stream().filter(l -> l.contains("process ")).toList(), "no DPA process left");

        String fence = run("nvqual_fence");
        assertTrue(fence.contains("\"used_harts\": [2, 3, 16]") && fence.contains("qualification failed: EU "), fence);
        assertTrue(fence.contains("C1") && fence.contains("NvqualDev.report:"), fence);
        assertEquals(List.of(), m.dpa().stream().filter(l -> l.contains("process ")).toList(), "no DPA process left");
        UsageException x = assertThrows(UsageException.class, () -> run("nvqual", "-e", "256"));
        assertTrue(x.getMessage().contains("-e 256"), x.getMessage());
    }

    /** all_to_all runs across two devices with a DPA: on a host with one it says so (itest runs it on two). */
    @Test
    void allToAllWantsTwoBlueField3s() {
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> run("all_to_all", "-n", "1"));
        assertTrue(e.getMessage().contains("dpa:sample all_to_all failed") && e.getMessage().contains("1 device(s) with a DPA")
                && e.getMessage().contains("bluefield3=2"), e.getMessage());
        assertEquals(List.of(), m.dpa().stream().filter(l -> l.contains("process ")).toList(), "no DPA process left");
    }

    /**
     * On a host whose only device has no DPA the sample fails as the real one does: open_dpa_device's
     * and main's error lines, "finished with errors", and the command's error names the reason.
     */
    @Test
    void kernelLaunchWithoutADpaFailsAsTheSampleDoes() {
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> run("kernel_launch", "-d", "mlx5_0", "-w", "0"));
        List<String> lines = docaLines(e.getMessage());
        assertEquals(List.of(
                "INF dpa_kernel_launch_main.c:68 [main] Starting the sample",
                "ERR dpa_common.c:320 [open_dpa_device] Couldn't find PF DOCA device",
                "ERR dpa_common.c:751 [allocate_dpa_resources] Function open_doca_device() failed",
                "ERR dpa_kernel_launch_main.c:90 [main] Failed to Allocate DPA Resources: Resource Not Found",
                "INF dpa_kernel_launch_main.c:114 [main] Sample finished with errors"), lines.subList(0, 5), e.getMessage());
        assertTrue(lines.get(5).contains("dpa:sample kernel_launch failed on mlx5_0: no device with a DPA named mlx5_0"), e.getMessage());
    }

    /**
     * On a device without DevX the echo sample fails at {@code flexio_process_create}, after its host
     * PD, CQ, MR and QP were made: the error names the device and the refusal, and nothing stays
     * (the machine's close checks the ConnectX-4's pages, the DMA pages and the audit).
     */
    @Test
    void aSampleThatFailsMidwayLeavesNothing() {
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> run("echo", "-d", "mlx5_0"));
        assertTrue(e.getMessage().contains("dpa:sample echo failed on mlx5_0") && e.getMessage().contains("flexio_process_create")
                && e.getMessage().contains("DevX"), e.getMessage());
        // what the ConnectX-4 still holds now is mlx5_ib's own (its UMR CQ and QP, a cached mkey), made at the
        // first registration; the machine's close checks that nothing else stays (pages, DMA pages, the audit)
        String ps = String.join("\n", m.dpa());
        assertTrue(!ps.contains("process "), "no DPA process on the BlueField-3 either: " + ps);
    }

    @Test
    void badArgumentsAreNamed() {
        UsageException name = assertThrows(UsageException.class, () -> run("nosuch"));
        assertTrue(name.getMessage().contains("no sample nosuch") && name.getMessage().contains("fence"), name.getMessage());
        UsageException n = assertThrows(UsageException.class, () -> run("echo", "-n", "0"));
        assertTrue(n.getMessage().contains("-n 0"), n.getMessage());
        UsageException opt = assertThrows(UsageException.class, () -> run("echo", "-x", "1"));
        assertTrue(opt.getMessage().contains("unknown option -x"), opt.getMessage());
        UsageException w = assertThrows(UsageException.class, () -> run("kernel_launch", "-w", "-1"));
        assertTrue(w.getMessage().contains("-w -1"), w.getMessage());
        KernelException dev = assertThrows(KernelException.class, () -> run("rpc", "-d", "mlx5_9"));
        assertTrue(Objects.requireNonNull(dev.getMessage()).contains("mlx5_9"), dev.getMessage());
    }
}

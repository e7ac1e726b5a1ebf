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
        assertTrue(l.contains("rpc ") && l.contains("echo ") && l.contains("fence ") && l.contains("kernel_launch ") && l.contains("usage"), l);
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

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
        assertTrue(l.contains("rpc ") && l.contains("echo ") && l.contains("fence ") && l.contains("usage"), l);
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
        KernelException dev = assertThrows(KernelException.class, () -> run("rpc", "-d", "mlx5_9"));
        assertTrue(Objects.requireNonNull(dev.getMessage()).contains("mlx5_9"), dev.getMessage());
    }
}

package org.peerdirect.ib.core.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

import javax.management.MBeanServer;
import javax.management.MBeanServerFactory;

import org.peerdirect.example.peermem.ExamplePeerMemory;
import org.peerdirect.ib.core.peer.PeerMemoryController;
import org.peerdirect.ib.core.umem.impl.UmemCore;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.iommu.IommuAudit;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.sysfs.impl.SysfsTree;
import org.peerdirect.peermem.PeerMemoryRegistration;

/**
 * A simulated machine for ib-core's umem and controller tests: memory, IOMMU, sysfs, a JMX
 * server, the controller, the umem service, the test DMA device ({@link TestDmaDevice}) and one
 * process. {@link #close} checks that the test left nothing behind: no IOMMU fault or violation,
 * no mapping, no pin, no frame, no client.
 */
public final class Rig implements AutoCloseable {

    public final Mm mm;
    public final Iommu iommu;
    public final SysfsTree sysfs;
    public final MBeanServer mbeans = MBeanServerFactory.newMBeanServer();
    public final PeerMemoryController controller;
    public final UmemCore umems;
    public final TestDmaDevice dev;
    public final AddressSpace proc;
    public final List<String> warnings = new CopyOnWriteArrayList<>();
    private final List<ExamplePeerMemory> clients = new ArrayList<>();

    public Rig(Path tmp, long memory) {
        mm = new Mm(memory, true, tmp.resolve("swap"), 16 << 20);
        iommu = new Iommu(mm);
        sysfs = new SysfsTree(tmp.resolve("sys"), warnings::add);
        controller = new PeerMemoryController(sysfs, mbeans);
        controller.setWarnSink(warnings::add);
        controller.setUnregisterLogInterval(Duration.ofMillis(20));
        umems = new UmemCore(controller);
        dev = new TestDmaDevice("umem_test0", iommu, umems);
        proc = mm.createProcess("app");
        proc.setMemlockLimit(1L << 40);
    }

    public Rig(Path tmp) {
        this(tmp, 64 << 20);
    }

    /** An example client (not registered). */
    public ExamplePeerMemory client(String name, long pageSize, boolean unmaps) {
        ExamplePeerMemory c = new ExamplePeerMemory(mm, name, pageSize, unmaps);
        clients.add(c);
        return c;
    }

    /** Audit and leak checks; every test ends here. */
    @Override
    public void close() {
        dev.close();
        for (PeerMemoryRegistration r : controller.knownClients()) {
            r.unregister();
        }
        for (ExamplePeerMemory c : clients) {
            c.freeAll();
        }
        IommuAudit a = iommu.audit();
        assertEquals(0, a.faults(), "no IOMMU fault: " + a);
        assertTrue(a.clean(), "IOMMU audit clean: " + a);
        assertEquals(0, iommu.leakedAtDestroy(), "no mapping left at domain destroy");
        assertEquals(0, proc.pinnedPages(), "memlock charge returned");
        assertEquals(0, mm.pinnedFrames(), "no pinned frame");
        proc.exit();
        assertEquals(mm.totalFrames(), mm.freeFrames(), "every frame free");
        assertTrue(controller.knownClients().isEmpty(), "no client left");
        assertEquals(List.of(), sysfs.exists(PeerMemoryController.SYSFS_DIR) ? sysfs.list(PeerMemoryController.SYSFS_DIR) : List.of(),
                "no statistics directory left");
        mm.close();
    }
}

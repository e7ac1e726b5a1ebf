package org.peerdirect.bench;

import java.nio.file.Files;
import java.nio.file.Path;

import org.peerdirect.ib.core.peer.PeerMemoryController;
import org.peerdirect.ib.core.umem.impl.UmemCore;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.umem.IbUmem;
import org.peerdirect.ib.core.umem.UmemService;
import org.peerdirect.umemtest.UmemTestDevice;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.Mm;

/** The machine the Peer-Direct benchmarks run on: memory, IOMMU, controller, test device, one process. */
final class PeerRig implements AutoCloseable {

    static final int RW = IbAccess.LOCAL_WRITE | IbAccess.REMOTE_READ | IbAccess.REMOTE_WRITE;
    static final int PEER = UmemService.IB_PEER_MEM_ALLOW | UmemService.IB_PEER_MEM_INVAL_SUPP;

    final Path swap;
    final Mm mm;
    final Iommu iommu;
    final PeerMemoryController controller;
    final UmemCore umems;
    final UmemTestDevice dev;
    final AddressSpace as;

    PeerRig(long memory) throws Exception {
        swap = Files.createTempFile("pd-bench-swap", "");
        mm = new Mm(memory, false, swap, 16L << 20);
        iommu = new Iommu(mm);
        controller = new PeerMemoryController(null, null);
        umems = new UmemCore(controller);
        dev = new UmemTestDevice("bench0", iommu, umems);
        as = mm.createProcess("bench");
        as.setMemlockLimit(1L << 40);
    }

    /** A whole driver registration cycle: get, arm, stop, release (what reg_mr + dereg_mr do to the umem). */
    long regDereg(long va, long len) {
        IbUmem u = umems.umemGet(as, dev, va, len, RW, PEER);
        long first = u.dmaBlocks().dmaAddress(0);
        u.activateInvalidationNotifier(x -> { });
        u.stopInvalidationNotifier();
        u.release();
        return first;
    }

    @Override
    public void close() throws Exception {
        dev.close();
        controller.close(java.time.Duration.ofSeconds(1));
        mm.close();
        Files.deleteIfExists(swap);
    }
}

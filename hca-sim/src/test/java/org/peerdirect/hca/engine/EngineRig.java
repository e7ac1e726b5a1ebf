package org.peerdirect.hca.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.hca.boards.Fabric;
import org.peerdirect.kernel.dma.DmaDirection;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.iommu.IommuDomain;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.mm.PinnedPages;

/**
 * The rig of the engine's unit tests: the engine driven the way a driver drives it and nothing
 * more (firmware commands, WQE slots, doorbell records, CQEs). Devices on one fabric, each with its
 * IOMMU domain; every test ends with the IOMMU audit clean and every frame free.
 */
abstract class EngineRig {

    static final int ALL = HcaDevice.PERM_LOCAL_READ | HcaDevice.PERM_LOCAL_WRITE | HcaDevice.PERM_REMOTE_READ
            | HcaDevice.PERM_REMOTE_WRITE | HcaDevice.PERM_ATOMIC;

    @TempDir
    Path tmp;
    Mm mm;
    Iommu iommu;
    final Fabric fabric = new Fabric();
    final List<HcaDevice> devs = new ArrayList<>();
    final List<IommuDomain> domains = new ArrayList<>();
    AddressSpace proc;
    final List<PinnedPages> pins = new ArrayList<>();
    final List<long[]> mapped = new ArrayList<>();

    /** One side: a device, a CQ, an RC QP, 64 KiB of pinned memory mapped, an MPT over it. */
    class Side {
        final HcaDevice dev;
        final IommuDomain domain;
        final HwCq cq;
        final HwQp qp;
        final long va;
        int key;
        final long iova;
        final long[] pfns;
        long cqCi;
        long sqPi;
        long rqPi;

        Side(int i) {
            this(i, java.util.function.UnaryOperator.identity());
        }

        /** A side whose device reaches memory through {@code port} applied to its domain (a test's wrapper). */
        Side(int i, java.util.function.UnaryOperator<org.peerdirect.kernel.dma.DmaPort> port) {
            this(i, port, false);
        }

        /** A side on an Ethernet (RoCE) device: its port may go on a wire. */
        Side(int i, boolean ethernet) {
            this(i, java.util.function.UnaryOperator.identity(), ethernet);
        }

        Side(int i, java.util.function.UnaryOperator<org.peerdirect.kernel.dma.DmaPort> port, boolean ethernet) {
            domain = iommu.createDomain("0000:0" + (i + 3) + ":00.0");
            domains.add(domain);
            dev = new HcaDevice(domain.name(), port.apply(domain), fabric, 1, ethernet);
            devs.add(dev);
            cq = dev.sw2hwCq(16);
            qp = dev.createQp(1, HcaDevice.ST_RC, new QpCaps(8, 8, 2, 2, 64, false), cq, cq, null);
            va = proc.mmap(1 << 16);
            proc.populate(va, 1 << 16, true);
            PinnedPages p = proc.pinUserPages(va, 1 << 16, true);
            pins.add(p);
            pfns = p.pfns();
            iova = domain.dmaMapSg(p.pfns(), DmaDirection.BIDIRECTIONAL);
            mapped.add(new long[] {domains.indexOf(domain), iova, p.npages()});
            key = dev.sw2hwMpt(1, va, 1 << 16, ALL, new long[] {iova}, new long[] {1L << 16});
        }

        void rekey() {
            key = dev.sw2hwMpt(1, va, 1 << 16, ALL, new long[] {iova}, new long[] {1L << 16});
        }

        int lid() {
            return dev.port(1).lid();
        }

        void connect(Side peer) {
            connect(peer, 1);
        }

        void connect(Side peer, int rnrRetry) {
            QpContext c = new QpContext();
            c.remoteAccess = QpContext.BIT_RRE | QpContext.BIT_RWE | QpContext.BIT_RAE;
            c.retryCount = 3;
            c.rnrRetry = rnrRetry;
            c.minRnrTimer = 1;
            c.ackTimeout = 1;
            qp.modify(QpCommand.RST2INIT, c);
            c.dlid = peer.lid();
            c.remoteQpn = peer.qp.qpn;
            qp.modify(QpCommand.INIT2RTR, c);
            qp.modify(QpCommand.RTR2RTS, c);
        }

        SendWqe wqe(int opcode, long local, int len) {
            SendWqe w = qp.sqSlot(sqPi);
            w.opcode = opcode;
            w.ctrl = Wqe.CTRL_CQ_UPDATE;
            w.numSge = 1;
            w.addr[0] = local;
            w.byteCount[0] = len;
            w.lkey[0] = key;
            w.length = len;
            return w;
        }

        void ring() {
            qp.sqDoorbellRecord(++sqPi);
            qp.ringSqDoorbell();
        }

        void recv(long local, int len) {
            RecvWqe r = qp.recvQueue().slot(rqPi);
            r.numSge = 1;
            r.addr[0] = local;
            r.byteCount[0] = len;
            r.lkey[0] = key;
            qp.rqDoorbell(++rqPi);
        }

        /** The next CQE (the requester runs in the posting thread: it is there already). */
        Cqe cqe() {
            assertTrue(cq.producerIndex() > cqCi, "a CQE was written");
            Cqe c = cq.cqe(cqCi++);
            cq.consumerIndex(cqCi);
            return c;
        }
    }

    @BeforeEach
    void up() {
        mm = new Mm(64L << 20, true, tmp.resolve("swap"), 1 << 20);
        iommu = new Iommu(mm);
        proc = mm.createProcess("engine-test");
        proc.setMemlockLimit(1L << 30);
    }

    @AfterEach
    void audit() {
        long engineFailures = 0;
        for (HcaDevice d : devs) {
            engineFailures += d.engineFailures();
            d.remove();
        }
        for (long[] m : mapped) {
            domains.get((int) m[0]).dmaUnmap(m[1], (int) m[2]);
        }
        for (PinnedPages p : pins) {
            p.unpin(true);
        }
        for (IommuDomain d : domains) {
            assertEquals(0, iommu.destroyDomain(d));
        }
        assertEquals(0, iommu.audit().faults(), "no IOMMU fault");
        assertTrue(iommu.audit().violationFree());
        proc.exit();
        assertEquals(mm.totalFrames(), mm.freeFrames(), "every frame free");
        mm.close();
        assertEquals(0, engineFailures, "the engine failed on an exception of its own (see the log)");
    }

}

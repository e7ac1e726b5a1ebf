package org.peerdirect.mlx5.ib;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.hca.cx4.ConnectX4Device;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvWcStatus;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.kernel.pci.PciFunction;
import org.peerdirect.peermem.PeerMemoryRegistration;
import org.peerdirect.ssd.model.NvmeSsd;
import org.peerdirect.ssd.nvme.NvmePmr;
import org.peerdirect.ssd.peermem.SsdPeerMem;

/**
 * RDMA into an SSD's persistent memory region on mlx5: the PMR mapped into the process and
 * registered through ssd_mem; RDMA WRITEs land in the SSD through its PMR BAR (peer to peer in the
 * HCA's IOMMU domain), survive a power loss once the write barrier ran and are lost without it;
 * unmapping a registered range revokes the mkey before the range goes.
 */
class Mlx5SsdTest extends Mlx5Machine {

    @TempDir
    Path tmp;
    NvmeSsd ssd;
    PciFunction fn;
    NvmePmr pmr;
    SsdPeerMem client;
    PeerMemoryRegistration reg;

    void up() {
        startMachine(tmp, "storage-app", ConnectX4Device.DEVICE_CONNECTX4, ConnectX4Device.DEVICE_CONNECTX4);
        proc.setMemlockLimit(1L << 30);
        powerOn();
        client = new SsdPeerMem(() -> List.of(pmr));
        reg = core.peerMemory().register(client, true);
    }

    private void powerOn() {
        ssd = new NvmeSsd("Samsung PM173X NVMe SSD", tmp.resolve("nvme0.pmr"), 4L << 20);
        fn = bus.register(ssd.spec());
        pmr = new NvmePmr(mm, fn, 0);
    }

    @AfterEach
    void down() throws InterruptedException {
        if (pmr == null) {
            return;
        }
        List<String> ssdLeft = pmr.shutdown();
        List<String> left = stopMachine();
        boolean unregistered = reg.unregister(java.time.Duration.ofSeconds(10));
        fn.remove();
        ssd.close();
        assertTrue(unregistered, "ssd_mem unregistered");
        assertEquals(List.of(), ssdLeft);
        assertEquals(0, client.inUse(), "no module reference left");
        assertEquals(List.of(), left, "IOMMU clean, every DMA page and frame free");
    }

    @Test
    void rdmaWritesLandInThePmrThroughItsBarAndSurvivePowerLossOnlyOnceFlushed() {
        up();
        RcEnd[] p = {new RcEnd(0), new RcEnd(1)};
        connect(p);
        long va = pmr.mmap(proc, 0x10000, 0x20000);
        IbvMr smr = p[1].pd.regMr(va, 0x20000, RW);
        assertTrue(smr.isPeer(), "a device mapping: ssd_mem claimed it");
        long bar = iommu.barBytes();
        byte[] durable = fill(p[0].buf, 8192, 5);
        p[0].qp.postSend(write(p[0], p[0].buf, 8192, va, smr.rkey()));
        assertEquals(IbvWcStatus.SUCCESS, Mlx5VerbsTest.one(p[0].cq).status);
        assertEquals(8192, iommu.barBytes() - bar, "every byte crossed the PMR BAR");
        assertArrayEquals(durable, pmr.read(0x10000, 8192), "the bytes are in the SSD");
        pmr.flush();

        byte[] lost = new byte[4096];
        java.util.Arrays.fill(lost, (byte) 0x77);
        proc.write(p[0].buf, lost, 0, lost.length);
        p[0].qp.postSend(write(p[0], p[0].buf, 4096, va + 0x18000, smr.rkey()));
        assertEquals(IbvWcStatus.SUCCESS, Mlx5VerbsTest.one(p[0].cq).status);
        assertArrayEquals(lost, pmr.read(0x28000, 4096), "posted: visible at once");

        IbvSendWr r = Mlx5VerbsTest.wr(IbvWrOpcode.RDMA_READ, p[0].buf + 0x10000, 8192, p[0].mr.lkey(), 2);
        r.remoteAddr = va;
        r.rkey = smr.rkey();
        p[0].qp.postSend(r);
        assertEquals(IbvWcStatus.SUCCESS, Mlx5VerbsTest.one(p[0].cq).status);
        assertArrayEquals(durable, read(p[0].buf + 0x10000, 8192), "an RDMA READ takes it back out");

        smr.dereg();
        pmr.munmap(proc.pid(), va);
        // power loss: the card pulled without the driver's shutdown
        fn.remove();
        ssd.close();
        powerOn();
        assertArrayEquals(durable, pmr.read(0x10000, 8192), "flushed: on the media after the power loss");
        assertArrayEquals(new byte[4096], pmr.read(0x28000, 4096), "not flushed: lost with the power");
        p[0].close();
        p[1].close();
    }

    /**
     * IBA 1.5 RDMA FLUSH with the persistent placement type as the SSD's write barrier: the
     * responder HCA's flushing read reaches the PMR through its IOMMU (PMRWBM bit 0) and persists
     * the flushed range only; after a power loss the flushed write is on the media and the write
     * outside the range is lost. The MR needs IB_ACCESS_FLUSH_PERSISTENT, granted over the PMR
     * (persistent memory) only.
     */
    @Test
    void anRdmaFlushPersistsTheRangeItNamesInTheSsd() {
        up();
        int flushRights = org.peerdirect.ib.core.umem.IbAccess.FLUSH_GLOBAL | org.peerdirect.ib.core.umem.IbAccess.FLUSH_PERSISTENT;
        RcEnd[] p = {new RcEnd(0), new RcEnd(1)};
        connect(p, RW | flushRights);
        long va = pmr.mmap(proc, 0x10000, 0x20000);
        IbvMr smr = p[1].pd.regMr(va, 0x20000, RW | flushRights);
        assertTrue(smr.isPeer());
        byte[] durable = fill(p[0].buf, 8192, 21);
        p[0].qp.postSend(write(p[0], p[0].buf, 8192, va, smr.rkey()));
        assertEquals(IbvWcStatus.SUCCESS, Mlx5VerbsTest.one(p[0].cq).status);
        byte[] lost = new byte[4096];
        java.util.Arrays.fill(lost, (byte) 0x55);
        proc.write(p[0].buf + 0x10000, lost, 0, lost.length);
        p[0].qp.postSend(write(p[0], p[0].buf + 0x10000, 4096, va + 0x18000, smr.rkey()));
        assertEquals(IbvWcStatus.SUCCESS, Mlx5VerbsTest.one(p[0].cq).status);
        assertEquals(3, ssd.unpersistedPages(), "three pages posted");
        long barriers = ssd.barriers();

        IbvSendWr f = Mlx5VerbsTest.wr(IbvWrOpcode.FLUSH, 0, 0, 0, 3);
        f.numSge = 0;
        f.remoteAddr = va;
        f.rkey = smr.rkey();
        f.flushLength = 8192;
        f.flushType = IbvSendWr.FLUSH_PERSISTENT;
        f.flushLevel = IbvSendWr.FLUSH_RANGE;
        p[0].qp.postSend(f);
        org.peerdirect.ib.core.verbs.IbvWc c = Mlx5VerbsTest.one(p[0].cq);
        assertEquals(IbvWcStatus.SUCCESS, c.status, c.toString());
        assertEquals(org.peerdirect.ib.core.verbs.IbvWcOpcode.FLUSH, c.opcode);
        assertEquals(barriers + 1, ssd.barriers(), "one flushing read, one barrier of the PMR");
        assertEquals(1, ssd.unpersistedPages(), "the two flushed pages are on the media, the third is still posted");

        smr.dereg();
        pmr.munmap(proc.pid(), va);
        fn.remove(); // power loss
        ssd.close();
        powerOn();
        assertArrayEquals(durable, pmr.read(0x10000, 8192), "flushed by RDMA FLUSH: on the media after the power loss");
        assertArrayEquals(new byte[4096], pmr.read(0x28000, 4096), "outside the flushed range: lost with the power");
        p[0].close();
        p[1].close();
    }

    @Test
    void unmappingARegisteredRangeRevokesTheMkeyBeforeTheRangeGoes() {
        up();
        RcEnd[] p = {new RcEnd(0), new RcEnd(1)};
        connect(p);
        long va = pmr.alloc(proc, 64 << 10);
        IbvMr smr = p[1].pd.regMr(va, 64 << 10, RW);
        fill(p[0].buf, 4096, 1);
        p[0].qp.postSend(write(p[0], p[0].buf, 4096, va, smr.rkey()));
        assertEquals(IbvWcStatus.SUCCESS, Mlx5VerbsTest.one(p[0].cq).status);
        assertEquals(1, client.inUse());
        assertEquals(1, client.module().refcount(), "the registration holds the module");
        assertFalse(client.module().tryStop(), "rmmod ssd_peer_mem: EBUSY");
        pmr.munmap(proc.pid(), va);
        assertTrue(smr.invalidated(), "the unmap invalidated the MR first");
        assertEquals(1, pmr.info().invalidations());
        long uaf = iommu.audit().useAfterFree();
        p[0].qp.postSend(write(p[0], p[0].buf, 4096, va, smr.rkey()));
        assertEquals(IbvWcStatus.REM_ACCESS_ERR, Mlx5VerbsTest.one(p[0].cq).status, "the mkey is revoked");
        assertEquals(uaf, iommu.audit().useAfterFree(), "no access reached the PMR after the unmap");
        assertEquals(1, client.module().refcount(), "an invalidated MR still holds the module until its dereg");
        smr.dereg(); // only cleans up
        assertEquals(0, client.inUse());
        assertEquals(0, client.module().refcount());
        p[0].close();
        p[1].close();
    }

    /**
     * The SSD as a dma-buf exporter: an RDMA WRITE through a dma-buf MR over the PMR lands in the
     * SSD through BAR2; the exported range stays reserved after the process unmaps it (no new
     * mapping gets those bytes); the controller going revokes the buffer and later writes fail.
     */
    @Test
    void aDmabufMrOverThePmrWritesIntoTheSsdAndIsRevokedWhenTheControllerGoes() throws Exception {
        up();
        RcEnd[] p = {new RcEnd(0), new RcEnd(1)};
        connect(p);
        long va = pmr.mmap(proc, 0, 64 << 10);
        int fd = pmr.exportDmabuf(proc, va, 64 << 10);
        IbvMr dmr = p[1].pd.regDmabufMr(0, 64 << 10, va, fd, RW);
        long bar = iommu.barBytes();
        byte[] sent = fill(p[0].buf, 4096, 11);
        p[0].qp.postSend(write(p[0], p[0].buf, 4096, va + 8192, dmr.rkey()));
        assertEquals(IbvWcStatus.SUCCESS, Mlx5VerbsTest.one(p[0].cq).status);
        assertArrayEquals(sent, pmr.read(8192, 4096), "in the PMR");
        assertEquals(4096, iommu.barBytes() - bar, "through BAR2");
        pmr.munmap(proc.pid(), va);
        org.peerdirect.kernel.mm.KernelException busy = org.junit.jupiter.api.Assertions.assertThrows(
                org.peerdirect.kernel.mm.KernelException.class, () -> pmr.mmap(proc, 0, 4096));
        assertEquals(org.peerdirect.kernel.mm.KernelException.Errno.EBUSY, busy.errno(), "the exported range stays reserved");
        assertEquals(List.of(), pmr.shutdown(), "the controller goes: the buffer is revoked");
        long uaf = iommu.audit().useAfterFree();
        p[0].qp.postSend(write(p[0], p[0].buf, 4096, va, dmr.rkey()));
        org.junit.jupiter.api.Assertions.assertNotEquals(IbvWcStatus.SUCCESS, Mlx5VerbsTest.one(p[0].cq).status);
        assertEquals(uaf, iommu.audit().useAfterFree(), "nothing reached the SSD after the revocation");
        dmr.dereg();
        proc.close(fd);
        p[0].close();
        p[1].close();
    }
}

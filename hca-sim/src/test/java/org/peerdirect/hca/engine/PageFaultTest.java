package org.peerdirect.hca.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Random;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.BooleanSupplier;

import org.junit.jupiter.api.Test;
import org.peerdirect.kernel.dma.DmaDirection;
import org.peerdirect.kernel.mm.Mm;

/**
 * The ConnectX-4+ seam for on-demand paging, on the engine alone: an on-demand mkey starts with
 * nothing present; a translation miss is an event, not an error; the requester stalls until
 * {@code PAGE_FAULT_RESUME}, the responder answers RNR NAKs meanwhile; a zap returns only when no
 * DMA through the zapped pages is in flight. The test plays the driver: it reads the faulting WQE,
 * writes translations by UMR and resumes.
 */
class PageFaultTest extends EngineRig {

    static final long RW = HcaDevice.MTT_READ | HcaDevice.MTT_WRITE;

    /** Faults as the page-fault EQ delivers them: queued, served by the test thread. */
    final BlockingQueue<PageFault> faults = new LinkedBlockingQueue<>();

    PageFault nextFault() throws InterruptedException {
        PageFault f = faults.poll(10, TimeUnit.SECONDS);
        assertNotNull(f, "a page-fault event within 10 s");
        return f;
    }

    /** An on-demand key over the side's 64 KiB, 4 KiB pages, nothing present. */
    int odpKey(Side s) {
        s.dev.setPageFaultHandler(faults::add);
        int k = s.dev.sw2hwMptOnDemand(1, s.va, 1 << 16, ALL, 12);
        assertEquals(0, s.dev.mttPresent(k));
        return k;
    }

    /** UMR: pages [first, first+n) of the side's key present with {@code bits}, at the side's pinned IOVAs. */
    static void present(Side s, int key, int first, int n, long bits) {
        long[] mtt = new long[n];
        for (int i = 0; i < n; i++) {
            mtt[i] = s.iova + (long) (first + i) * Mm.PAGE_SIZE | bits;
        }
        s.dev.umrUpdate(key, first, mtt, n);
    }

    /** A DMA port that forwards everything to {@code port}; a test overrides what it watches. */
    static class Forwarding implements org.peerdirect.kernel.dma.DmaPort {
        final org.peerdirect.kernel.dma.DmaPort port;

        Forwarding(org.peerdirect.kernel.dma.DmaPort port) {
            this.port = port;
        }

        @Override
        public String name() {
            return port.name();
        }

        @Override
        public void read(long iova, java.lang.foreign.MemorySegment dst, long off, long len) {
            port.read(iova, dst, off, len);
        }

        @Override
        public void write(long iova, java.lang.foreign.MemorySegment src, long off, long len) {
            port.write(iova, src, off, len);
        }

        @Override
        public void copyTo(long srcIova, org.peerdirect.kernel.dma.DmaPort dst, long dstIova, long len) {
            port.copyTo(srcIova, dst instanceof Forwarding f ? f.port : dst, dstIova, len);
        }

        @Override
        public long fetchAdd(long iova, long delta) {
            return port.fetchAdd(iova, delta);
        }

        @Override
        public long compareAndSwap(long iova, long expect, long update) {
            return port.compareAndSwap(iova, expect, update);
        }

        @Override
        public void atomicWrite(long iova, long value) {
            port.atomicWrite(iova, value);
        }

        @Override
        public void flush(long iova, long len) {
            port.flush(iova, len);
        }

        @Override
        public void writeDescriptor(long iova, java.lang.foreign.MemorySegment src, long off, int len) {
            port.writeDescriptor(iova, src, off, len);
        }
    }

    /**
     * A DMA port whose first device-to-device copy signals {@code inDma} and waits (bounded) for
     * {@code release}: a transfer held in flight, with the read locks of its keys taken.
     */
    static org.peerdirect.kernel.dma.DmaPort holdingFirstCopy(org.peerdirect.kernel.dma.DmaPort port, java.util.concurrent.CountDownLatch inDma,
            java.util.concurrent.CountDownLatch release) {
        AtomicBoolean first = new AtomicBoolean(true);
        return new Forwarding(port) {
            @Override
            public void copyTo(long srcIova, org.peerdirect.kernel.dma.DmaPort dst, long dstIova, long len) {
                if (first.getAndSet(false)) {
                    inDma.countDown();
                    try {
                        assertTrue(release.await(10, TimeUnit.SECONDS));
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                }
                super.copyTo(srcIova, dst, dstIova, len);
            }
        };
    }

    /**
     * IBA 1.5 RDMA FLUSH at the responder: the persistent type issues flushing reads over exactly
     * the present pages of the range (coalesced where IOVAs follow on; an on-demand key's absent
     * pages skipped, no page fault), the whole key at level MR (the range unchecked); the global
     * type alone issues none; the QP without the type's bit refuses it as an invalid request, a
     * key without the right or a range outside it as a remote access error. The completion carries
     * the flush length.
     */
    @Test
    void aFlushReachesThePresentPagesOfItsRangeAndIsRefusedWithoutTheRights() throws Exception {
        java.util.List<String> flushes = new java.util.concurrent.CopyOnWriteArrayList<>();
        Side[] p = flushPair(0, QpContext.BIT_FLUSH_PERSISTENT, flushes);
        Side a = p[0];
        Side b = p[1];
        b.dev.setPageFaultHandler(faults::add);
        int odp = b.dev.sw2hwMptOnDemand(1, b.va, 1 << 16, ALL | HcaDevice.PERM_FLUSH_GLOBAL | HcaDevice.PERM_FLUSH_PERSISTENT, 12);
        present(b, odp, 2, 3, RW); // pages 2, 3, 4
        present(b, odp, 9, 1, RW);

        // range over pages 1..9, ending 100 bytes into page 9: runs 2..4 and the head of 9
        assertEquals(0, flush(a, odp, b.va + 4096 + 100, 8 * 4096, Wqe.FLUSH_PERSISTENT, Wqe.FLUSH_RANGE));
        assertEquals(java.util.List.of("2+12288", "9+100"), flushes);
        flushes.clear();
        // level MR: the whole key, whatever the range says (here empty and at address 0)
        assertEquals(0, flush(a, odp, 0, 0, Wqe.FLUSH_PERSISTENT, Wqe.FLUSH_MR));
        assertEquals(java.util.List.of("2+12288", "9+4096"), flushes);
        flushes.clear();
        assertTrue(faults.isEmpty(), "a flush raises no page fault");
        // the QP accepts only the persistent type: global is an invalid request
        assertEquals(Cqe.SYNDROME_REMOTE_INVAL_REQ_ERR, flush(a, odp, b.va, 4096, Wqe.FLUSH_GLOBAL, Wqe.FLUSH_RANGE));

        // the global type alone on a QP that takes it: a fence, no flushing read
        p = flushPair(2, QpContext.BIT_FLUSH_GLOBAL | QpContext.BIT_FLUSH_PERSISTENT, flushes);
        int pinnedFlush = p[1].dev.sw2hwMpt(1, p[1].va, 1 << 16, ALL | HcaDevice.PERM_FLUSH_GLOBAL, new long[] {p[1].iova},
                new long[] {1L << 16});
        assertEquals(0, flush(p[0], pinnedFlush, p[1].va, 1 << 16, Wqe.FLUSH_GLOBAL, Wqe.FLUSH_RANGE));
        assertEquals(java.util.List.of(), flushes);
        // ... but the persistent type on that key (global right only), or on a key without FLUSH rights: remote access errors
        assertEquals(Cqe.SYNDROME_REMOTE_ACCESS_ERR, flush(p[0], pinnedFlush, p[1].va, 4096, Wqe.FLUSH_PERSISTENT, Wqe.FLUSH_RANGE));
        p = flushPair(4, QpContext.BIT_FLUSH_GLOBAL, flushes);
        assertEquals(Cqe.SYNDROME_REMOTE_ACCESS_ERR, flush(p[0], p[1].key, p[1].va, 4096, Wqe.FLUSH_GLOBAL, Wqe.FLUSH_RANGE));
        // a range past the key's end (level RANGE checks it)
        p = flushPair(6, QpContext.BIT_FLUSH_GLOBAL, flushes);
        int k = p[1].dev.sw2hwMpt(1, p[1].va, 1 << 16, ALL | HcaDevice.PERM_FLUSH_GLOBAL, new long[] {p[1].iova}, new long[] {1L << 16});
        assertEquals(Cqe.SYNDROME_REMOTE_ACCESS_ERR, flush(p[0], k, p[1].va + (1 << 16) - 4096, 8192, Wqe.FLUSH_GLOBAL, Wqe.FLUSH_RANGE));
        assertEquals(java.util.List.of(), flushes);
    }

    /**
     * Sides {@code i} and {@code i+1}: a connected to b as usual; b's QP accepts remote writes and
     * the FLUSH bits {@code flushBits}, its DMA port records every flushing read (page of b's
     * pinned IOVA + bytes) into {@code flushes}.
     */
    private Side[] flushPair(int i, int flushBits, java.util.List<String> flushes) {
        Side a = new Side(i);
        long[] bIova = {0};
        Side b = new Side(i + 1, d -> new Forwarding(d) {
            @Override
            public void flush(long iova, long len) {
                flushes.add((iova - bIova[0]) / 4096 + "+" + len);
                super.flush(iova, len);
            }
        });
        bIova[0] = b.iova;
        a.connect(b);
        QpContext c = new QpContext();
        c.remoteAccess = QpContext.BIT_RWE | flushBits;
        c.minRnrTimer = 1;
        c.dlid = a.lid();
        c.remoteQpn = a.qp.qpn;
        b.qp.modify(QpCommand.RST2INIT, c);
        b.qp.modify(QpCommand.INIT2RTR, c);
        b.qp.modify(QpCommand.RTR2RTS, c);
        return new Side[] {a, b};
    }

    /** Posts one FLUSH on {@code a}'s QP; the CQE's syndrome (0 = success, the byte count checked then). */
    private int flush(Side a, int rkey, long va, long len, int type, int level) {
        SendWqe w = a.wqe(Wqe.OP_FLUSH, 0, 0);
        w.numSge = 0;
        w.length = len;
        w.remoteAddr = va;
        w.rkey = rkey;
        w.flushType = type;
        w.flushLevel = level;
        a.ring();
        Cqe c = a.cqe();
        if (c.opcode != Cqe.OPCODE_ERROR) {
            assertEquals(Wqe.OP_FLUSH, c.opcode);
            assertEquals(len, c.byteCnt, "byte_len is the flush length");
            return 0;
        }
        return c.syndrome;
    }

    static void waitFor(BooleanSupplier c, String what) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!c.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, what + " within 10 s");
            Thread.onSpinWait();
        }
    }

    @Test
    void aRequesterMissStallsTheSendQueueUntilResumeAndTheWqeRunsAgain() throws Exception {
        Side a = new Side(0);
        Side b = new Side(1);
        a.connect(b);
        b.connect(a);
        int ak = odpKey(a);
        proc.write(a.va + 4096, new byte[] {7, 8, 9}, 0, 3);
        proc.write(a.va + 8192 + 100, new byte[] {42}, 0, 1);
        SendWqe w = a.wqe(Wqe.OP_RDMA_WRITE, a.va + 4096, 8192);
        w.lkey[0] = ak;
        w.remoteAddr = b.va;
        w.rkey = b.key;
        a.ring();
        SendWqe second = a.wqe(Wqe.OP_RDMA_WRITE, a.va, 4); // pinned: runs only after the first
        second.remoteAddr = b.va + 20000;
        second.rkey = b.key;
        a.ring();

        PageFault f = nextFault();
        assertEquals(PageFault.SUBTYPE_WQE, f.subtype());
        assertTrue(f.requestor());
        assertFalse(f.write(), "the source is read");
        assertEquals(a.qp.qpn, f.wqNum());
        assertEquals(0, f.wqeIndex());
        assertEquals(ak, f.key());
        assertEquals(a.va + 4096, f.va());
        assertEquals(8192, f.length());
        assertEquals(0, a.cq.producerIndex(), "nothing completes while the send queue waits");
        assertEquals(2, a.qp.outstandingSends(), "the WQE behind waits too: the queue is in order");
        assertEquals(1, a.dev.pendingPageFaults());

        // the driver reads the WQE, makes the first page present only, resumes: the WQE faults again
        SendWqe faulted = a.qp.sqSlot(f.wqeIndex());
        assertEquals(ak, faulted.lkey[0]);
        present(a, ak, 1, 1, HcaDevice.MTT_READ);
        a.dev.pageFaultResume(f.token(), false);
        PageFault g = nextFault();
        assertEquals(a.va + 8192, g.va(), "the next missing page");
        assertEquals(4096, g.length());
        assertEquals(0, a.cq.producerIndex());
        present(a, ak, 2, 1, HcaDevice.MTT_READ);
        a.dev.pageFaultResume(g.token(), false);

        waitFor(() -> a.cq.producerIndex() == 2, "both WQEs complete");
        Cqe c = a.cqe();
        assertEquals(Wqe.OP_RDMA_WRITE, c.opcode);
        assertEquals(0, c.wqeIndex);
        assertEquals(1, a.cqe().wqeIndex);
        byte[] got = new byte[3];
        proc.read(b.va, got, 0, 3);
        assertEquals(9, got[2]);
        proc.read(b.va + 4096 + 100, got, 0, 1);
        assertEquals(42, got[0], "the second page moved after its fault");
        assertEquals(2, a.dev.requesterPageFaults());
        assertEquals(0, a.dev.pendingPageFaults());
        assertEquals(2, a.dev.mttPresent(ak));
        a.dev.freeMpt(ak);
    }

    @Test
    void aResponderMissNaksRnrWithOneEventUntilTheDriverResumes() throws Exception {
        Side a = new Side(0);
        Side b = new Side(1);
        a.connect(b, 7); // rnr_retry 7: retry for ever, as ODP responders need
        b.connect(a, 7);
        int bk = odpKey(b);
        proc.write(a.va, new byte[] {1, 2, 3, 4}, 0, 4);
        SendWqe w = a.wqe(Wqe.OP_RDMA_WRITE, a.va, 4096);
        w.remoteAddr = b.va + 3 * 4096;
        w.rkey = bk;
        a.ring();

        PageFault f = nextFault();
        assertEquals(PageFault.SUBTYPE_RDMA, f.subtype());
        assertFalse(f.requestor());
        assertEquals(PageFault.FLAG_WRITE | PageFault.FLAG_RDMA, f.flags());
        assertEquals(b.qp.qpn, f.wqNum());
        assertEquals(-1, f.wqeIndex());
        assertEquals(bk, f.key());
        assertEquals(b.va + 3 * 4096, f.va());
        assertEquals(4096, f.length());
        waitFor(() -> a.dev.rnrNaks() >= 3, "the requester retrying on RNR NAKs");
        assertEquals(1, b.dev.responderPageFaults(), "NAKs while the fault is served raise no new event");
        assertEquals(0, a.cq.producerIndex());

        present(b, bk, 3, 1, RW);
        b.dev.pageFaultResume(f.token(), false);
        waitFor(() -> a.cq.producerIndex() == 1, "the write completes after the resume");
        assertEquals(Wqe.OP_RDMA_WRITE, a.cqe().opcode);
        byte[] got = new byte[4];
        proc.read(b.va + 3 * 4096, got, 0, 4);
        assertEquals(4, got[3]);
        assertTrue(faults.isEmpty());
        b.dev.freeMpt(bk);
    }

    @Test
    void aPagePresentReadOnlyServesReadsAndFaultsWritesWithTheWriteFlag() throws Exception {
        Side a = new Side(0);
        Side b = new Side(1);
        a.connect(b, 7);
        b.connect(a, 7);
        int bk = odpKey(b);
        present(b, bk, 0, 1, HcaDevice.MTT_READ);
        proc.write(b.va + 8, new byte[] {55}, 0, 1);
        SendWqe r = a.wqe(Wqe.OP_RDMA_READ, a.va, 16);
        r.remoteAddr = b.va;
        r.rkey = bk;
        a.ring();
        assertEquals(Wqe.OP_RDMA_READ, a.cqe().opcode, "a read of a page present for reading does not fault");
        byte[] got = new byte[1];
        proc.read(a.va + 8, got, 0, 1);
        assertEquals(55, got[0]);
        assertTrue(faults.isEmpty());

        SendWqe w = a.wqe(Wqe.OP_RDMA_WRITE, a.va, 16);
        w.remoteAddr = b.va;
        w.rkey = bk;
        a.ring();
        PageFault f = nextFault();
        assertTrue(f.write(), "a write needs the MTT write bit");
        assertEquals(b.va, f.va());
        // the driver cannot make it writable (say, a read-only mapping): resume with the error flag
        b.dev.pageFaultResume(f.token(), true);
        waitFor(() -> a.cq.producerIndex() > a.cqCi, "the write completes with an error");
        Cqe c = a.cqe();
        assertEquals(Cqe.OPCODE_ERROR, c.opcode);
        assertEquals(Cqe.SYNDROME_REMOTE_ACCESS_ERR, c.syndrome);
        assertEquals(HwQpState.ERR, a.qp.state());
        assertEquals(HwQpState.ERR, b.qp.state(), "a remote access error moves the responder to ERR too");
        b.dev.freeMpt(bk);
    }

    @Test
    void aSendIntoAMissingReceiveBufferLeavesTheReceiveWqeForTheRetry() throws Exception {
        Side a = new Side(0);
        Side b = new Side(1);
        a.connect(b, 7);
        b.connect(a, 7);
        int bk = odpKey(b);
        RecvWqe rw = b.qp.recvQueue().slot(0);
        rw.numSge = 1;
        rw.addr[0] = b.va + 5 * 4096;
        rw.byteCount[0] = 64;
        rw.lkey[0] = bk;
        b.qp.rqDoorbell(++b.rqPi);
        proc.write(a.va, new byte[] {11, 12, 13}, 0, 3);
        a.wqe(Wqe.OP_SEND, a.va, 16);
        a.ring();

        PageFault f = nextFault();
        assertEquals(PageFault.SUBTYPE_WQE, f.subtype());
        assertFalse(f.requestor());
        assertTrue(f.write());
        assertEquals(b.qp.qpn, f.wqNum());
        assertEquals(0, f.wqeIndex(), "the receive WQE the driver reads to find the buffer");
        assertEquals(bk, f.key());
        assertEquals(b.va + 5 * 4096, f.va());
        assertEquals(0, b.qp.recvQueue().consumerIndex(), "the receive WQE is not consumed");

        present(b, bk, 5, 1, RW);
        b.dev.pageFaultResume(f.token(), false);
        waitFor(() -> b.cq.producerIndex() == 1, "the receive completes");
        Cqe c = b.cqe();
        assertEquals(Cqe.RECV_SEND, c.opcode);
        assertEquals(0, c.wqeIndex);
        assertEquals(16, c.byteCnt);
        byte[] got = new byte[3];
        proc.read(b.va + 5 * 4096, got, 0, 3);
        assertEquals(13, got[2]);
        // the retry (on the requester's timer thread) writes the receive's CQE first, then its own
        waitFor(() -> a.cq.producerIndex() == 1, "the send completes");
        assertEquals(Wqe.OP_SEND, a.cqe().opcode);
        b.dev.freeMpt(bk);
    }

    @Test
    void anAtomicWhoseResultPageIsMissingExecutesOnceAndIsReplayed() throws Exception {
        Side a = new Side(0);
        Side b = new Side(1);
        a.connect(b);
        b.connect(a);
        int ak = odpKey(a);
        java.lang.foreign.MemorySegment v = java.lang.foreign.MemorySegment.ofArray(new long[] {100});
        byte[] init = v.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
        proc.write(b.va + 64, init, 0, 8);
        SendWqe w = a.wqe(Wqe.OP_ATOMIC_FA, a.va + 4096, 8);
        w.lkey[0] = ak;
        w.remoteAddr = b.va + 64;
        w.rkey = b.key;
        w.compareAdd = 5;
        a.ring();

        PageFault f = nextFault();
        assertTrue(f.requestor());
        assertTrue(f.write(), "the response is written into the local buffer");
        assertEquals(105, readLong(b.va + 64), "the responder executed the atomic before the response met the miss");
        present(a, ak, 1, 1, RW);
        a.dev.pageFaultResume(f.token(), false);
        waitFor(() -> a.cq.producerIndex() == 1, "the atomic completes");
        assertEquals(Wqe.OP_ATOMIC_FA, a.cqe().opcode);
        assertEquals(100, readLong(a.va + 4096), "the original value, from the responder's saved response");
        assertEquals(105, readLong(b.va + 64), "executed once, not again on the retry");

        // the PSNs are in step again: the next atomic executes normally
        SendWqe w2 = a.wqe(Wqe.OP_ATOMIC_FA, a.va + 4096, 8);
        w2.lkey[0] = ak;
        w2.remoteAddr = b.va + 64;
        w2.rkey = b.key;
        w2.compareAdd = 1;
        a.ring();
        assertEquals(Wqe.OP_ATOMIC_FA, a.cqe().opcode);
        assertEquals(106, readLong(b.va + 64));
        assertEquals(105, readLong(a.va + 4096));
        a.dev.freeMpt(ak);
    }

    long readLong(long va) {
        byte[] b = new byte[8];
        proc.read(va, b, 0, 8);
        return java.lang.foreign.MemorySegment.ofArray(b).get(java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED, 0);
    }

    @Test
    void aResumeWithTheErrorFlagFailsTheWqeAndFlushesTheRest() throws Exception {
        Side a = new Side(0);
        Side b = new Side(1);
        a.connect(b);
        b.connect(a);
        int ak = odpKey(a);
        SendWqe w = a.wqe(Wqe.OP_RDMA_WRITE, a.va, 64);
        w.lkey[0] = ak;
        w.remoteAddr = b.va;
        w.rkey = b.key;
        a.ring();
        SendWqe next = a.wqe(Wqe.OP_RDMA_WRITE, a.va, 64);
        next.remoteAddr = b.va;
        next.rkey = b.key;
        a.ring();
        PageFault f = nextFault();
        a.dev.pageFaultResume(f.token(), true);
        waitFor(() -> a.cq.producerIndex() == 2, "both WQEs complete");
        Cqe c = a.cqe();
        assertEquals(Cqe.SYNDROME_LOCAL_PROT_ERR, c.syndrome);
        assertEquals(0, c.wqeIndex);
        assertEquals(Cqe.SYNDROME_WR_FLUSH_ERR, a.cqe().syndrome);
        assertEquals(HwQpState.ERR, a.qp.state());
        HwCommandException e = assertThrows(HwCommandException.class, () -> a.dev.pageFaultResume(f.token(), false));
        assertEquals(HwCommandException.STAT_BAD_PARAM, e.status(), "a token resumed twice names no fault");
        assertTrue(e.getMessage().contains("no such fault pending"), e.getMessage());
        a.dev.freeMpt(ak);
    }

    @Test
    void withoutAPageFaultHandlerAMissIsAProtectionError() {
        Side a = new Side(0);
        Side b = new Side(1);
        a.connect(b);
        b.connect(a);
        int ak = a.dev.sw2hwMptOnDemand(1, a.va, 1 << 16, ALL, 12);
        SendWqe w = a.wqe(Wqe.OP_RDMA_WRITE, a.va, 64);
        w.lkey[0] = ak;
        w.remoteAddr = b.va;
        w.rkey = b.key;
        a.ring();
        assertEquals(Cqe.SYNDROME_LOCAL_PROT_ERR, a.cqe().syndrome);
        assertEquals(0, a.dev.pendingPageFaults());
        a.dev.freeMpt(ak);
    }

    @Test
    void umrIsCheckedAgainstTheKeyAndItsEntries() {
        Side a = new Side(0);
        int ak = odpKey(a);
        HwCommandException e = assertThrows(HwCommandException.class, () -> present(a, ak, 15, 2, RW));
        assertEquals(HwCommandException.STAT_BAD_PARAM, e.status(), "16 entries: 15..17 is outside");
        e = assertThrows(HwCommandException.class, () -> a.dev.umrUpdate(ak, 0, new long[] {a.iova + 8 | RW}, 1));
        assertEquals(HwCommandException.STAT_BAD_PARAM, e.status(), "not page aligned");
        e = assertThrows(HwCommandException.class, () -> a.dev.umrUpdate(a.key, 0, new long[] {a.iova | RW}, 1));
        assertEquals(HwCommandException.STAT_BAD_RESOURCE, e.status(), "a pinned key has a fixed MTT");
        e = assertThrows(HwCommandException.class, () -> a.dev.sw2hwMptOnDemand(1, a.va, 0, ALL, 12));
        assertEquals(HwCommandException.STAT_BAD_PARAM, e.status());
        assertEquals(0, a.dev.mttPresent(ak), "a refused UMR changes nothing");
        // a 1 TiB key costs its chunk directory, not one entry per page
        int huge = a.dev.sw2hwMptOnDemand(1, 0x10_0000_0000L, 1L << 40, ALL, 12);
        assertEquals(1L << 28, a.dev.mpt(huge).pages());
        a.dev.freeMpt(huge);
        a.dev.freeMpt(ak);
    }

    /**
     * The lock protocol, deterministically: a DMA through a page has started (the device's port is
     * held inside the copy); a zap of that page must not return until the copy finished, and the
     * next access to the page misses.
     */
    @Test
    void aZapWaitsForTheDmaInFlightThroughItsPagesAndTheNextAccessMisses() throws Exception {
        java.util.concurrent.CountDownLatch inDma = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
        Side a = new Side(0, port -> holdingFirstCopy(port, inDma, release));
        Side b = new Side(1);
        a.connect(b);
        b.connect(a);
        int ak = odpKey(a);
        present(a, ak, 0, 1, RW);
        proc.write(a.va, new byte[] {77}, 0, 1);
        SendWqe w = a.wqe(Wqe.OP_RDMA_WRITE, a.va, 4096);
        w.lkey[0] = ak;
        w.remoteAddr = b.va;
        w.rkey = b.key;
        Thread poster = Thread.ofPlatform().start(a::ring);
        assertTrue(inDma.await(10, TimeUnit.SECONDS), "the DMA started");
        AtomicBoolean zapped = new AtomicBoolean();
        Thread zapper = Thread.ofPlatform().start(() -> {
            a.dev.umrZap(ak, 0, 1);
            zapped.set(true);
        });
        waitFor(() -> zapper.getState() == Thread.State.WAITING, "the zap blocked on the DMA in flight");
        assertFalse(zapped.get(), "the zap did not return while the DMA runs");
        release.countDown();
        poster.join(10_000);
        zapper.join(10_000);
        assertTrue(zapped.get());
        assertEquals(Wqe.OP_RDMA_WRITE, a.cqe().opcode, "the DMA that started before the zap completes");
        byte[] got = new byte[1];
        proc.read(b.va, got, 0, 1);
        assertEquals(77, got[0]);
        assertEquals(0, a.dev.mttPresent(ak));

        SendWqe again = a.wqe(Wqe.OP_RDMA_WRITE, a.va, 4096);
        again.lkey[0] = ak;
        again.remoteAddr = b.va;
        again.rkey = b.key;
        a.ring();
        PageFault f = nextFault();
        assertEquals(a.va, f.va(), "after the zap the page misses");
        a.dev.pageFaultResume(f.token(), true);
        waitFor(() -> a.cq.producerIndex() == 2, "the failed WQE completes");
        a.dev.freeMpt(ak);
    }

    /**
     * Regression (found by the mlx5 invalidation storm): a UMR that only writes translations (no
     * mkey mask: an ODP fault or prefetch of other pages of the MR) must not fail a transfer that
     * was admitted before it. Only a change of the key's rights, range or state may (the
     * generation check); a translation change is caught page by page by the present check under
     * the read lock. Before the fix every UMR advanced the generation, so a WRITE crossing into a
     * second page after a fault of another QP elsewhere in the MR completed with a protection error.
     */
    @Test
    void aTranslationOnlyUmrDoesNotFailATransferAdmittedBeforeIt() throws Exception {
        java.util.concurrent.CountDownLatch inDma = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
        Side a = new Side(0, port -> holdingFirstCopy(port, inDma, release));
        Side b = new Side(1);
        a.connect(b);
        b.connect(a);
        long[] mtt = { a.iova | RW, a.iova + Mm.PAGE_SIZE | RW, 0, 0 };
        int ak = a.dev.createUmrMpt(1, a.va, 4 * Mm.PAGE_SIZE, ALL, 12, 4, false, mtt, 4, 0, false);
        byte[] data = new byte[8192];
        new Random(5).nextBytes(data);
        proc.write(a.va, data, 0, data.length);
        SendWqe w = a.wqe(Wqe.OP_RDMA_WRITE, a.va, 8192); // two pages: two chunks, the first one held
        w.lkey[0] = ak;
        w.remoteAddr = b.va;
        w.rkey = b.key;
        Thread poster = Thread.ofPlatform().start(a::ring);
        assertTrue(inDma.await(10, TimeUnit.SECONDS), "the DMA of the first page started");
        UmrWqe u = new UmrWqe(); // translations only: page 3 made present, no mkey mask
        u.mkey = ak;
        u.flags = UmrWqe.FLAG_TRANSLATION_OFFSET_EN;
        u.xltOffset = 3;
        u.xltEntries = 1;
        AtomicBoolean umrDone = new AtomicBoolean();
        Thread umr = Thread.ofPlatform().start(() -> {
            assertEquals(Outcome.SUCCESS, a.dev.mpt(ak).umr(u, new long[] { a.iova + 3 * Mm.PAGE_SIZE | RW }, u.xltOffset, u.xltEntries));
            umrDone.set(true);
        });
        waitFor(() -> umr.getState() == Thread.State.WAITING || umrDone.get(), "the UMR waits for the DMA in flight");
        release.countDown();
        poster.join(10_000);
        umr.join(10_000);
        assertTrue(umrDone.get());
        Cqe c = a.cqe();
        assertEquals(Wqe.OP_RDMA_WRITE, c.opcode, "the WRITE admitted before the UMR completes: " + c);
        byte[] got = new byte[8192];
        proc.read(b.va, got, 0, got.length);
        assertTrue(java.util.Arrays.equals(data, got), "both pages arrived");
        a.dev.freeMpt(ak);
    }

    /**
     * The invariant the project exists to prove, at the device: after a zap returns, no DMA
     * touches the zapped pages. A requester writes 64 KiB again and again into an on-demand key; a
     * fault thread makes pages present with fresh single-page IOVA mappings; an invalidation thread
     * zaps random ranges and unmaps their IOVAs at once. A DMA that ran after its zap returned would
     * hit an unmapped IOVA: the audit counts it as a fault.
     */
    @Test
    void noDmaTouchesAPageAfterItsZapReturned() throws Exception {
        Side a = new Side(0);
        Side b = new Side(1);
        a.connect(b, 7);
        b.connect(a, 7);
        int bk = odpKey(b);
        final int pages = 16;
        long[] iovaOf = new long[pages]; // 0: not mapped; guarded by driverLock, as the umem mutex guards the ODP umem
        ReentrantLock driverLock = new ReentrantLock();
        AtomicBoolean stop = new AtomicBoolean();
        Thread faultWork = Thread.ofPlatform().name("fault-work").start(() -> {
            while (!stop.get()) {
                PageFault f;
                try {
                    f = faults.poll(10, TimeUnit.MILLISECONDS);
                } catch (InterruptedException e) {
                    return;
                }
                if (f == null) {
                    continue;
                }
                driverLock.lock();
                try {
                    int first = (int) ((f.va() - b.va) >>> 12);
                    int n = (int) Math.min(pages - first, (f.length() + 4095) >>> 12);
                    long[] mtt = new long[n];
                    for (int i = 0; i < n; i++) {
                        if (iovaOf[first + i] == 0) {
                            iovaOf[first + i] = b.domain.dmaMapPage(b.pfns[first + i], DmaDirection.BIDIRECTIONAL);
                        }
                        mtt[i] = iovaOf[first + i] | RW;
                    }
                    b.dev.umrUpdate(bk, first, mtt, n);
                    b.dev.pageFaultResume(f.token(), false);
                } finally {
                    driverLock.unlock();
                }
            }
        });
        Thread invalidator = Thread.ofPlatform().name("invalidator").start(() -> {
            Random rnd = new Random(42);
            while (!stop.get()) {
                int first = rnd.nextInt(pages);
                int n = 1 + rnd.nextInt(pages - first);
                driverLock.lock();
                try {
                    b.dev.umrZap(bk, first, n); // returns with no DMA through these pages in flight
                    for (int i = first; i < first + n; i++) {
                        if (iovaOf[i] != 0) {
                            b.domain.dmaUnmap(iovaOf[i], 1);
                            iovaOf[i] = 0;
                        }
                    }
                } finally {
                    driverLock.unlock();
                }
                Thread.yield();
            }
        });
        try {
            for (int i = 0; i < 1500; i++) {
                SendWqe w = a.wqe(Wqe.OP_RDMA_WRITE, a.va, 1 << 16);
                w.remoteAddr = b.va;
                w.rkey = bk;
                a.ring();
                long want = i + 1;
                waitFor(() -> a.cq.producerIndex() >= want, "write " + want);
                Cqe c = a.cqe();
                assertEquals(Wqe.OP_RDMA_WRITE, c.opcode, "write " + want + ": syndrome 0x" + Integer.toHexString(c.syndrome));
            }
        } finally {
            stop.set(true);
            faultWork.join(10_000);
            invalidator.join(10_000);
        }
        assertEquals(0, iommu.audit().faults(), "no DMA after a zap returned");
        assertTrue(b.dev.responderPageFaults() > 0);
        b.dev.umrZap(bk, 0, pages);
        for (int i = 0; i < pages; i++) {
            if (iovaOf[i] != 0) {
                b.domain.dmaUnmap(iovaOf[i], 1);
            }
        }
        b.dev.freeMpt(bk);
    }

    /**
     * An indirect (KSM) key, as implicit ODP's parent: a block without a target faults on the
     * indirect key and address (the responder NAKs meanwhile); once UMR points the block at a
     * direct key, writes, reads and atomics move through that key's translation at the block's
     * address; a block beyond the key's entries is a protection error, not a fault.
     */
    @Test
    void anIndirectKeyFaultsOnBlocksWithoutTargetAndMovesThroughItsTargets() throws Exception {
        Side a = new Side(0);
        Side b = new Side(1);
        a.connect(b, 7);
        b.connect(a, 7);
        b.dev.setPageFaultHandler(faults::add);
        // the target: b's 64 KiB as a UMR-enabled key, every page present
        long[] mtt = new long[16];
        for (int i = 0; i < 16; i++) {
            mtt[i] = b.iova + (long) i * Mm.PAGE_SIZE | RW;
        }
        int child = b.dev.createUmrMpt(1, b.va, 1 << 16, ALL, 12, 16, false, mtt, 16, 0, false);
        // the parent: blocks of 32 KiB from b.va - 64 KiB, four of them, over eight blocks' length
        long base = b.va - (1 << 16);
        int parent = b.dev.createUmrMpt(1, base, 8L << 15, ALL, 15, 4, false, new long[0], 0, 0, true);
        assertThrows(HwCommandException.class, () -> b.dev.createUmrMpt(1, base, 1 << 16, ALL, 15, 4, false, mtt, 1, 0, true),
                "an indirect key is created without targets");

        proc.write(a.va, new byte[] {5, 6, 7, 8}, 0, 4);
        SendWqe w = a.wqe(Wqe.OP_RDMA_WRITE, a.va, 4);
        w.remoteAddr = base + 10; // block 0: no target
        w.rkey = parent;
        a.ring();
        PageFault f = nextFault();
        assertEquals(parent, f.key(), "the fault names the key the request used");
        assertEquals(base + 10, f.va());
        waitFor(() -> a.dev.rnrNaks() >= 1, "the requester retrying on RNR NAKs");
        UmrWqe u = new UmrWqe(); // translations only: blocks 0..2 → the target at b.va, b.va + 32 KiB; block 3 stays empty
        Mpt pm = b.dev.mpt(parent);
        assertEquals(Outcome.SUCCESS, pm.umr(u, new long[] { child & 0xffff_ffffL, b.va, child & 0xffff_ffffL, b.va + (1 << 15), 0, 0 }, 0, 3));
        b.dev.pageFaultResume(f.token(), false);
        waitFor(() -> a.cq.producerIndex() == 1, "the write completes after the resume");
        assertEquals(Wqe.OP_RDMA_WRITE, a.cqe().opcode);
        byte[] got = new byte[4];
        proc.read(b.va + 10, got, 0, 4);
        assertEquals(8, got[3], "landed at the target's address for the block");

        // a write across blocks 0 and 1 moves through both targets (b.va + 32 KiB - 2 .. + 2)
        proc.write(a.va + 100, new byte[] {1, 2, 3, 4}, 0, 4);
        SendWqe across = a.wqe(Wqe.OP_RDMA_WRITE, a.va + 100, 4);
        across.remoteAddr = base + (1 << 15) - 2;
        across.rkey = parent;
        a.ring();
        assertEquals(Wqe.OP_RDMA_WRITE, a.cqe().opcode);
        proc.read(b.va + (1 << 15) - 2, got, 0, 4);
        assertEquals(1, got[0]);
        assertEquals(4, got[3]);

        // an atomic through the parent
        proc.write(b.va + (1 << 15) + 64, new byte[] {40, 0, 0, 0, 0, 0, 0, 0}, 0, 8);
        SendWqe fa = a.wqe(Wqe.OP_ATOMIC_FA, a.va + 512, 8);
        fa.remoteAddr = base + (1 << 15) + 64;
        fa.rkey = parent;
        fa.compareAdd = 2;
        a.ring();
        assertEquals(Wqe.OP_ATOMIC_FA, a.cqe().opcode);
        proc.read(b.va + (1 << 15) + 64, got, 0, 1);
        assertEquals(42, got[0]);

        // block 5 is inside the key's length but beyond its four entries: a protection error
        SendWqe beyond = a.wqe(Wqe.OP_RDMA_WRITE, a.va, 4);
        beyond.remoteAddr = base + 5L * (1 << 15);
        beyond.rkey = parent;
        a.ring();
        waitFor(() -> a.cq.producerIndex() > a.cqCi, "the write beyond the entries completes");
        Cqe c = a.cqe();
        assertEquals(Cqe.OPCODE_ERROR, c.opcode);
        assertEquals(Cqe.SYNDROME_REMOTE_ACCESS_ERR, c.syndrome);
        assertTrue(faults.isEmpty(), "no fault for a block beyond the entries");
        b.dev.freeMpt(parent);
        b.dev.freeMpt(child);
    }
}

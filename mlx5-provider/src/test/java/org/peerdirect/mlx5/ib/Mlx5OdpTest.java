package org.peerdirect.mlx5.ib;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.hca.cx4.ConnectX4Device;
import org.peerdirect.hca.cx4.ifc.Mkey;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.umem.IbUmemOdp;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvCq;
import org.peerdirect.ib.core.verbs.IbvDeviceAttr;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.ib.core.verbs.IbvAh;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvQpAttr;
import org.peerdirect.ib.core.verbs.IbvQpState;
import org.peerdirect.ib.core.verbs.IbvSrq;
import org.peerdirect.ib.core.verbs.IbvQpInitAttr;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvRecvWr;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvSge;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWcOpcode;
import org.peerdirect.ib.core.verbs.IbvWcStatus;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.Vma;
import org.peerdirect.rdma.RcConnect;

/**
 * Explicit ODP MRs on mlx5 against two ConnectX-4 models: nothing is mapped for the device until it
 * faults; every page fault travels as an EQE to mlx5_ib's fault work, is resolved through the ODP
 * umem and a UMR, and answered by {@code PAGE_FAULT_RESUME}; every {@code madvise(DONTNEED)} zaps
 * the translation by UMR before the pages go. Each test ends with the IOMMU audit clean and
 * nothing left behind.
 */
class Mlx5OdpTest extends Mlx5Machine {

    static final int ODP = IbAccess.LOCAL_WRITE | IbAccess.REMOTE_READ | IbAccess.REMOTE_WRITE | IbAccess.REMOTE_ATOMIC | IbAccess.ON_DEMAND;
    static final int LEN = 1 << 20;

    @TempDir
    Path tmp;

    @BeforeEach
    void up() {
        startMachine(tmp, "odp-app", ConnectX4Device.DEVICE_CONNECTX4, ConnectX4Device.DEVICE_CONNECTX4);
    }

    @AfterEach
    void down() {
        assertEquals(List.of(), stopMachine(), "every DMA page freed, no page with the firmware, IOMMU clean, every frame free");
    }

    /** One side: a context, a CQ, an RC QP and 1 MiB of anonymous memory registered on demand (never touched by the CPU). */
    final class End {
        final int dev;
        final IbvContext ctx;
        final IbvPd pd;
        final IbvCq cq;
        final IbvQp qp;
        final IbvSrq srq;
        final long buf;
        final IbvMr mr;
        final int lid;

        End(int dev, int access) {
            this(dev, access, IbvQpType.RC, false);
        }

        /** With {@code withSrq}, the QP receives through an SRQ of this PD. */
        End(int dev, int access, IbvQpType type, boolean withSrq) {
            this(dev, access, type, withSrq, false);
        }

        /** With {@code implicit}, the MR is an implicit ODP MR (address 0, length SIZE_MAX) and the buffer lies in it. */
        End(int dev, int access, IbvQpType type, boolean withSrq, boolean implicit) {
            this.dev = dev;
            ctx = devs.get(dev).open(proc);
            pd = ctx.allocPd();
            cq = ctx.createCq(256, null);
            srq = withSrq ? pd.createSrq(63, 2) : null;
            IbvQpInitAttr a = new IbvQpInitAttr();
            a.sendCq = cq;
            a.recvCq = cq;
            a.srq = srq;
            a.qpType = type;
            a.maxSendWr = 64;
            a.maxRecvWr = 64;
            a.maxSendSge = 4;
            a.maxRecvSge = 4;
            qp = pd.createQp(a);
            buf = proc.mmap(LEN);
            mr = implicit ? pd.regMr(0, -1L, access) : pd.regMr(buf, LEN, access);
            lid = ctx.queryPort(1).lid();
        }

        /** The explicit ODP MR of {@link #mr}. */
        Mlx5OdpMr odpMr() {
            return ibs.get(dev).odpIfStarted().odpMkey(mr.lkey(), Mlx5OdpMr.class);
        }

        /** The explicit or implicit ODP MR of {@link #mr}. */
        Mlx5Odp.OdpMkey odp() {
            return ibs.get(dev).odpIfStarted().odpMkey(mr.lkey(), Mlx5Odp.OdpMkey.class);
        }

        /** The implicit ODP MR of {@link #mr}. */
        Mlx5ImplicitMr implicitMr() {
            return ibs.get(dev).odpIfStarted().odpMkey(mr.lkey(), Mlx5ImplicitMr.class);
        }
    }

    /** Both QPs take remote read, write, atomics and RDMA FLUSH with the global placement type. */
    void connect(End a, End b) {
        connect(a, b, ODP & ~IbAccess.ON_DEMAND | IbAccess.FLUSH_GLOBAL);
    }

    void connect(End a, End b, int qpAccess) {
        new RcConnect().access(qpAccess).minRnrTimer(1).timeout(14, 7).connect(a.qp, b.lid, b.qp.qpNum());
        new RcConnect().access(qpAccess).minRnrTimer(1).timeout(14, 7).connect(b.qp, a.lid, a.qp.qpNum());
    }

    @Test
    void theDeviceReportsOdpAsMlx5FillsIt() {
        IbvDeviceAttr.OdpCaps c = devs.get(0).open(proc).queryDeviceEx().odpCaps();
        assertEquals(IbvDeviceAttr.ODP_SUPPORT | IbvDeviceAttr.ODP_SUPPORT_IMPLICIT, c.generalCaps(),
                "ODP and implicit ODP (fixed_buffer_size, null_mkey and umr_extended_translation_offset reported)");
        int all = IbvDeviceAttr.OdpCaps.SUPPORT_SEND | IbvDeviceAttr.OdpCaps.SUPPORT_RECV | IbvDeviceAttr.OdpCaps.SUPPORT_WRITE
                | IbvDeviceAttr.OdpCaps.SUPPORT_READ | IbvDeviceAttr.OdpCaps.SUPPORT_ATOMIC | IbvDeviceAttr.OdpCaps.SUPPORT_SRQ_RECV
                | IbvDeviceAttr.OdpCaps.SUPPORT_ATOMIC_WRITE | IbvDeviceAttr.OdpCaps.SUPPORT_FLUSH;
        assertEquals(all, c.rcOdpCaps(), "RC: every operation (ATOMIC WRITE faults as a write does, FLUSH never faults), SRQ receives"
                + " enabled by SET_HCA_CAP");
        long flush = IbvDeviceAttr.DEVICE_FLUSH_GLOBAL | IbvDeviceAttr.DEVICE_FLUSH_PERSISTENT;
        assertEquals(flush, devs.get(0).open(proc).queryDeviceEx().deviceCapFlagsEx() & flush, "both FLUSH placement types");
        assertEquals(IbvDeviceAttr.DEVICE_ATOMIC_WRITE, devs.get(0).open(proc).queryDeviceEx().deviceCapFlagsEx() & IbvDeviceAttr.DEVICE_ATOMIC_WRITE,
                "the model's atomic_write cap reaches device_cap_flags_ex");
        assertEquals(IbvDeviceAttr.OdpCaps.SUPPORT_SEND | IbvDeviceAttr.OdpCaps.SUPPORT_SRQ_RECV, c.udOdpCaps());
        assertEquals(IbvDeviceAttr.OdpCaps.SUPPORT_SEND | IbvDeviceAttr.OdpCaps.SUPPORT_WRITE | IbvDeviceAttr.OdpCaps.SUPPORT_READ
                | IbvDeviceAttr.OdpCaps.SUPPORT_ATOMIC | IbvDeviceAttr.OdpCaps.SUPPORT_SRQ_RECV, c.xrcOdpCaps(),
                "XRC: the RC operations, receiving into XRC SRQs only (an XRC QP has no receive queue)");
        assertEquals(-1L, c.maxOdpSize(), "umr_extended_translation_offset: unbounded");
        String info = tools().devinfo("-d", "mlx5_0", "-v");
        assertTrue(info.contains("ODP_SUPPORT"), "rdma:devinfo -v prints the ODP caps");
        assertTrue(info.contains("0x1c000000000\n\t\t\t\t\tFLUSH_GLOBAL\n\t\t\t\t\tFLUSH_PERSISTENT\n\t\t\t\t\tATOMIC_WRITE")
                && info.contains("SUPPORT_ATOMIC_WRITE") && info.contains("SUPPORT_FLUSH"),
                "rdma:devinfo -v prints device_cap_flags_ex and the RC ODP bit: " + info);
    }

    /**
     * The reliability loop of the issue: before every iteration both sides' buffers are dropped
     * ({@code madvise(DONTNEED)}), so every operation re-faults on both sides; the data is checked
     * every time; the fault and invalidation counters move on both MRs.
     */
    @Test
    void everyOperationOverOdpOnBothSidesRefaultsAfterEveryDrop() {
        End a = new End(0, ODP);
        End b = new End(1, ODP);
        everyOperationRefaultsAfterEveryDrop(a, b);
    }

    /** The same loop over implicit ODP MRs on both sides: every drop takes each side's child with its last page, every operation re-creates it. */
    @Test
    void everyOperationOverImplicitOdpOnBothSidesRefaultsAfterEveryDrop() {
        End a = new End(0, ODP, IbvQpType.RC, false, true);
        End b = new End(1, ODP, IbvQpType.RC, false, true);
        everyOperationRefaultsAfterEveryDrop(a, b);
        int iterations = Integer.getInteger("peerdirect.odp.iterations", 12);
        for (End e : new End[] { a, b }) {
            Mlx5ImplicitMr m = e.implicitMr();
            awaitChildren(m, 1);
            assertTrue(m.childrenCreated.get() >= iterations, "a child per iteration at least: " + m);
        }
        // the children are reached through the parent's key only: none of them is in odp_mkeys
        for (int d = 0; d < 2; d++) {
            assertTrue(ibs.get(d).odpIfStarted().odpMkeys().stream().noneMatch(m -> m instanceof Mlx5OdpMr), "odp_mkeys holds no explicit"
                    + " MR nor child: " + ibs.get(d).odpStats());
        }
    }

    /** Waits (bounded) until the background work has destroyed every child whose last page went, leaving at most {@code max}. */
    static void awaitChildren(Mlx5ImplicitMr m, int max) {
        long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(10);
        while (m.children.size() > max || m.childrenCreated.get() - m.childrenDestroyed.get() != m.children.size()) {
            assertTrue(System.nanoTime() < deadline, "children settled within 10 s: " + m);
            Thread.onSpinWait();
        }
    }

    void everyOperationRefaultsAfterEveryDrop(End a, End b) {
        connect(a, b);
        // a second MR over b's memory with the FLUSH right (explicit or implicit as b's; never on a cached mkey)
        boolean implicit = b.odp() instanceof Mlx5ImplicitMr;
        IbvMr flushMr = implicit ? b.pd.regMr(0, -1L, ODP | IbAccess.FLUSH_GLOBAL) : b.pd.regMr(b.buf, LEN, ODP | IbAccess.FLUSH_GLOBAL);
        Mlx5Odp bOdp = ibs.get(b.dev).odpIfStarted();
        Mlx5Odp.OdpMkey flushOdp = implicit ? bOdp.odpMkey(flushMr.lkey(), Mlx5ImplicitMr.class) : bOdp.odpMkey(flushMr.lkey(), Mlx5OdpMr.class);
        int iterations = Integer.getInteger("peerdirect.odp.iterations", 12);
        for (int i = 0; i < iterations; i++) {
            proc.madvise(a.buf, LEN, AddressSpace.Advice.MADV_DONTNEED);
            proc.madvise(b.buf, LEN, AddressSpace.Advice.MADV_DONTNEED);
            // RDMA WRITE: requester reads a's pages, responder writes b's
            byte[] data = fill(a.buf + 4096 * (i % 7), 3 * 4096 + 100, i); // CPU-present again, device-absent
            IbvSendWr w = Mlx5VerbsTest.wr(IbvWrOpcode.RDMA_WRITE, a.buf + 4096 * (i % 7), data.length, a.mr.lkey(), 1);
            w.remoteAddr = b.buf + 65536;
            w.rkey = b.mr.rkey();
            a.qp.postSend(w);
            assertOk(a.cq, IbvWcOpcode.RDMA_WRITE);
            assertArrayEquals(data, read(b.buf + 65536, data.length), "iteration " + i + ": RDMA WRITE");

            // SEND into a posted receive on b: b's receive buffer dropped again, a's send buffer too
            proc.madvise(b.buf, LEN, AddressSpace.Advice.MADV_DONTNEED);
            IbvRecvWr r = new IbvRecvWr().sge(b.buf + 200_000, 5000, b.mr.lkey());
            r.wrId = 10 + i;
            b.qp.postRecv(r);
            byte[] msg = fill(a.buf + 300_000, 4500, 40 + i);
            IbvSendWr s = Mlx5VerbsTest.wr(IbvWrOpcode.SEND, a.buf + 300_000, msg.length, a.mr.lkey(), 2);
            a.qp.postSend(s);
            assertOk(a.cq, IbvWcOpcode.SEND);
            IbvWc rc = Mlx5VerbsTest.one(b.cq);
            assertEquals(IbvWcStatus.SUCCESS, rc.status, rc.toString());
            assertEquals(msg.length, rc.byteLen);
            assertArrayEquals(msg, read(b.buf + 200_000, msg.length), "iteration " + i + ": SEND");

            // RDMA READ: a's local buffer written by the device, b's read
            byte[] remote = fill(b.buf + 500_000, 8192, 80 + i);
            proc.madvise(a.buf, LEN, AddressSpace.Advice.MADV_DONTNEED);
            IbvSendWr rd = Mlx5VerbsTest.wr(IbvWrOpcode.RDMA_READ, a.buf + 600_000, 8192, a.mr.lkey(), 3);
            rd.remoteAddr = b.buf + 500_000;
            rd.rkey = b.mr.rkey();
            a.qp.postSend(rd);
            assertOk(a.cq, IbvWcOpcode.RDMA_READ);
            assertArrayEquals(remote, read(a.buf + 600_000, 8192), "iteration " + i + ": RDMA READ");

            // fetch-and-add and compare-and-swap on dropped pages (the remote page is zero after the drop)
            proc.madvise(a.buf, LEN, AddressSpace.Advice.MADV_DONTNEED);
            proc.madvise(b.buf, LEN, AddressSpace.Advice.MADV_DONTNEED);
            IbvSendWr fa = Mlx5VerbsTest.wr(IbvWrOpcode.ATOMIC_FETCH_AND_ADD, a.buf + 700_000, 8, a.mr.lkey(), 4);
            fa.remoteAddr = b.buf + 800_000;
            fa.rkey = b.mr.rkey();
            fa.compareAdd = 5 + i;
            a.qp.postSend(fa);
            assertOk(a.cq, IbvWcOpcode.FETCH_ADD);
            assertEquals(0, proc.readLong(a.buf + 700_000));
            assertEquals(5 + i, proc.readLong(b.buf + 800_000));
            IbvSendWr cs = Mlx5VerbsTest.wr(IbvWrOpcode.ATOMIC_CMP_AND_SWP, a.buf + 700_008, 8, a.mr.lkey(), 5);
            cs.remoteAddr = b.buf + 800_000;
            cs.rkey = b.mr.rkey();
            cs.compareAdd = 5 + i;
            cs.swap = 1000 + i;
            a.qp.postSend(cs);
            assertOk(a.cq, IbvWcOpcode.COMP_SWAP);
            assertEquals(5 + i, proc.readLong(a.buf + 700_008));
            assertEquals(1000 + i, proc.readLong(b.buf + 800_000));

            // ATOMIC WRITE (IBA 1.5) into a dropped remote page: the responder faults, NAKs, stores after the resume
            proc.madvise(b.buf, LEN, AddressSpace.Advice.MADV_DONTNEED);
            IbvSendWr aw = Mlx5VerbsTest.wr(IbvWrOpcode.ATOMIC_WRITE, 0, 0, 0, 6);
            aw.numSge = 0;
            aw.remoteAddr = b.buf + 900_000;
            aw.rkey = b.mr.rkey();
            aw.compareAdd = 0x1122_3344_5566_7700L + i;
            a.qp.postSend(aw);
            assertOk(a.cq, IbvWcOpcode.ATOMIC_WRITE);
            assertEquals(0x1122_3344_5566_7700L + i, proc.readLong(b.buf + 900_000), "iteration " + i + ": ATOMIC WRITE");

            // RDMA FLUSH (IBA 1.5, global visibility) over the whole dropped buffer and over the whole MR: no fault, a completion
            proc.madvise(b.buf, LEN, AddressSpace.Advice.MADV_DONTNEED);
            long faultsBefore = flushOdp.stats().pageFaults.get();
            IbvWc fr = flush(a, b.buf, LEN, flushMr.rkey(), IbvSendWr.FLUSH_GLOBAL, IbvSendWr.FLUSH_RANGE);
            assertEquals(IbvWcStatus.SUCCESS, fr.status, "iteration " + i + ": FLUSH " + fr);
            assertEquals(IbvWcOpcode.FLUSH, fr.opcode);
            assertEquals(LEN, fr.byteLen, "byte_len is the flush length");
            IbvWc fm = flush(a, 0, 0, flushMr.rkey(), IbvSendWr.FLUSH_GLOBAL, IbvSendWr.FLUSH_MR);
            assertEquals(IbvWcStatus.SUCCESS, fm.status, "iteration " + i + ": FLUSH of the MR " + fm);
            assertEquals(faultsBefore, flushOdp.stats().pageFaults.get(), "a FLUSH faults nothing in");
        }
        flushMr.dereg();
        Mlx5Odp.OdpMkey ma = a.odp();
        Mlx5Odp.OdpMkey mb = b.odp();
        assertTrue(ma.stats().pageFaultsHandled.get() >= 4L * iterations, "a's MR faulted in every iteration: " + ma);
        assertTrue(mb.stats().pageFaultsHandled.get() >= 4L * iterations, "b's MR faulted in every iteration: " + mb);
        assertTrue(ma.stats().pageInvalidationsHandled.get() >= iterations && mb.stats().pageInvalidationsHandled.get() >= iterations,
                "every drop of mapped pages zapped them by UMR: " + ma + " / " + mb);
        assertTrue(models.get(0).pageFaultsDescribe().contains("lost 0"), models.get(0).pageFaultsDescribe());
        assertEquals(0, ibs.get(0).odpIfStarted().faultErrors.get());
        assertEquals(0, ibs.get(1).odpIfStarted().faultErrors.get());
    }

    static void assertOk(IbvCq cq, IbvWcOpcode op) {
        IbvWc c = Mlx5VerbsTest.one(cq);
        assertEquals(IbvWcStatus.SUCCESS, c.status, c.toString());
        assertEquals(op, c.opcode);
    }

    /**
     * One {@code odp_mkeys} table ({@code dev->odp_mkeys}): an explicit and an implicit ODP MR are
     * in it, each an {@code MLX5_MKEY_MR}, a pinned MR is not; {@code find_odp_mkey} finds an
     * entry by its whole key only (another key byte on the same index is EFAULT, and the fault
     * path fails that segment) and a key of no entry is "skipping non ODP MR" (counted as mapped);
     * a child type is never stored. Deregistration erases the key first, then waits for the use
     * count a fault holds ({@code mlx5r_deref_wait_odp_mkey}), and finishes when it drops.
     */
    @Test
    void oneOdpMkeyTableHoldsEveryOdpMrByTypeAndDeregistrationWaitsForItsUseCount() throws Exception {
        End a = new End(0, ODP);
        IbvMr implicit = a.pd.regMr(0, -1L, ODP);
        long pinnedBuf = proc.mmap(8192);
        IbvMr pinned = a.pd.regMr(pinnedBuf, 8192, IbAccess.LOCAL_WRITE);
        Mlx5Odp o = ibs.get(0).odpIfStarted();
        assertEquals(java.util.Set.of(a.mr.lkey(), implicit.lkey()),
                o.odpMkeys().stream().map(Mlx5Odp.OdpMkey::mkey).collect(java.util.stream.Collectors.toSet()), ibs.get(0).odpStats().toString());
        assertTrue(o.odpMkeys().stream().allMatch(m -> m.type() == Mlx5Odp.MkeyType.MR), ibs.get(0).odpStats().toString());
        assertEquals(null, o.findOdpMkey(pinned.lkey()), "a pinned MR is not in odp_mkeys");
        assertEquals(4096, o.singleDataSegment(pinned.lkey(), pinnedBuf, 4096, 0), "a key of no entry counts as mapped");
        int stale = a.mr.lkey() ^ 0x5a; // the same index, another key byte
        assertEquals(KernelException.Errno.EFAULT, assertThrows(KernelException.class, () -> o.findOdpMkey(stale)).errno());
        assertEquals(-1, o.singleDataSegment(stale, a.buf, 4096, 0), "a stale key fails its segment");
        Mlx5OdpMr odp = o.odpMkey(a.mr.lkey(), Mlx5OdpMr.class);
        Mlx5OdpMr fakeChild = new Mlx5OdpMr(odp.pd(), odp.umem, odp.mkey, null, false, o, o.odpMkey(implicit.lkey(), Mlx5ImplicitMr.class));
        assertEquals(Mlx5Odp.MkeyType.IMPLICIT_CHILD, fakeChild.type());
        assertThrows(IllegalArgumentException.class, () -> o.storeOdpMkey(fakeChild), "a child faults under its parent's key, never its own");

        Mlx5Odp.OdpMkey held = o.findOdpMkey(a.mr.lkey()); // a fault working on the MR
        assertTrue(held == odp);
        Thread dereg = Thread.ofPlatform().name("dereg").start(a.mr::dereg);
        long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(10);
        while (o.odpMkeys().contains(held) || dereg.getState() != Thread.State.TIMED_WAITING) {
            assertTrue(System.nanoTime() < deadline, "the key left odp_mkeys and deregistration waits, within 10 s: " + dereg.getState());
            Thread.onSpinWait();
        }
        assertEquals(null, o.findOdpMkey(a.mr.lkey()), "no new fault finds the key");
        assertTrue(dereg.isAlive(), "deregistration waits while a fault holds the use count");
        held.put();
        dereg.join(10_000);
        assertTrue(!dereg.isAlive(), "the last use dropped: deregistration finished");
        assertTrue(!odp.get(), "the use count is closed");
        implicit.dereg();
        pinned.dereg();
        proc.munmap(pinnedBuf, 8192);
        assertTrue(o.odpMkeys().isEmpty(), ibs.get(0).odpStats().toString());
    }

    /** A TiB registered on demand costs the device nothing until touched; one write faults one page in. */
    /**
     * ODP over hugetlb memory ({@code IBV_ACCESS_HUGETLB}): the umem works in 2 MiB granules; an
     * RDMA WRITE straddling 4 KiB pages inside the second huge page faults, lands, and after the
     * huge pages are dropped ({@code madvise(DONTNEED)} drops whole huge pages) faults again.
     */
    @Test
    void aHugetlbOdpMrFaultsAndRefaultsIn2MiBGranules() {
        End a = new End(0, ODP);
        End b = new End(1, ODP);
        connect(a, b);
        long huge = proc.mmap(0, 4L << 20, Vma.PROT_READ | Vma.PROT_WRITE, Vma.Kind.HUGETLB, "[hugetlb]");
        IbvMr mr = b.pd.regMr(huge, 4L << 20, ODP | IbAccess.HUGETLB);
        Mlx5OdpMr m = ibs.get(1).odpIfStarted().odpMkey(mr.lkey(), Mlx5OdpMr.class);
        assertEquals(21, m.umem.pageShift(), "2 MiB granules");
        long at = huge + (2L << 20) + 4096 - 100;
        for (int i = 0; i < 3; i++) {
            proc.madvise(huge, 4L << 20, AddressSpace.Advice.MADV_DONTNEED);
            byte[] data = fill(a.buf, 8192, 70 + i);
            IbvSendWr w = Mlx5VerbsTest.wr(IbvWrOpcode.RDMA_WRITE, a.buf, data.length, a.mr.lkey(), 1);
            w.remoteAddr = at;
            w.rkey = mr.rkey();
            a.qp.postSend(w);
            assertOk(a.cq, IbvWcOpcode.RDMA_WRITE);
            assertArrayEquals(data, read(at, data.length), "iteration " + i);
        }
        assertTrue(m.stats().pageFaults.get() >= 3, "faulted again after every drop: " + m.counters());
        assertTrue(m.stats().pageInvalidations.get() > 0, "the drops invalidated the device's translation: " + m.counters());
        mr.dereg();
        proc.munmap(huge, 4L << 20);
    }

    @Test
    void aTebibyteOdpMrCostsNothingUntilAWriteFaultsOnePage() {
        End a = new End(0, ODP);
        End b = new End(1, ODP);
        connect(a, b);
        long tib = 1L << 40;
        long big = proc.mmap(tib);
        IbvMr mr = b.pd.regMr(big, tib, ODP);
        Mlx5OdpMr m = ibs.get(1).odpIfStarted().odpMkey(mr.lkey(), Mlx5OdpMr.class);
        assertEquals(0, m.umem.mappedPages(), "nothing mapped at registration");
        byte[] data = fill(a.buf, 256, 3);
        IbvSendWr w = Mlx5VerbsTest.wr(IbvWrOpcode.RDMA_WRITE, a.buf, 256, a.mr.lkey(), 1);
        w.remoteAddr = big + (tib / 2) + 100;
        w.rkey = mr.rkey();
        a.qp.postSend(w);
        assertOk(a.cq, IbvWcOpcode.RDMA_WRITE);
        assertArrayEquals(data, read(big + tib / 2 + 100, 256));
        assertEquals(1, m.umem.mappedPages(), "one page in the middle of the TiB, nothing else");
        mr.dereg();
        proc.munmap(big, tib);
    }

    /** Posts an ATOMIC WRITE of {@code value} from {@code a} to {@code b}'s {@code rkey} at {@code addr}; returns its completion. */
    static IbvWc atomicWrite(End a, long addr, int rkey, long value) {
        IbvSendWr aw = Mlx5VerbsTest.wr(IbvWrOpcode.ATOMIC_WRITE, 0, 0, 0, 7);
        aw.numSge = 0;
        aw.remoteAddr = addr;
        aw.rkey = rkey;
        aw.compareAdd = value;
        a.qp.postSend(aw);
        return Mlx5VerbsTest.one(a.cq);
    }

    /** Posts an RDMA FLUSH from {@code a} of [addr, addr+len) under {@code rkey}; returns its completion. */
    static IbvWc flush(End a, long addr, long len, int rkey, int type, int level) {
        IbvSendWr f = Mlx5VerbsTest.wr(IbvWrOpcode.FLUSH, 0, 0, 0, 9);
        f.numSge = 0;
        f.remoteAddr = addr;
        f.rkey = rkey;
        f.flushLength = len;
        f.flushType = type;
        f.flushLevel = level;
        a.qp.postSend(f);
        return Mlx5VerbsTest.one(a.cq);
    }

    /**
     * IBA 1.5 RDMA FLUSH over host memory (the SSD test has the persistent type): it completes like
     * a zero-length RDMA READ with the flush length as byte_len; level MR ignores the range; the
     * refusals follow rxe (a QP without the placement type's right: invalid request; a key without
     * it, a range past the key: remote access error; the persistent type on a key registered for
     * global visibility only: remote access error, as rdma-core's test expects); the library refuses
     * what it cannot encode; registration refuses the persistent right on host RAM and on ODP.
     */
    @Test
    void rdmaFlushCompletesLikeAZeroLengthReadAndIsRefusedWhereRxeRefusesIt() {
        int pinned = IbAccess.LOCAL_WRITE | IbAccess.REMOTE_READ | IbAccess.REMOTE_WRITE;
        int qpAll = pinned | IbAccess.FLUSH_GLOBAL | IbAccess.FLUSH_PERSISTENT;
        End a = new End(0, pinned);
        End b = new End(1, pinned | IbAccess.FLUSH_GLOBAL);
        connect(a, b, qpAll);
        IbvWc c = flush(a, b.buf + 100, 4096, b.mr.rkey(), IbvSendWr.FLUSH_GLOBAL, IbvSendWr.FLUSH_RANGE);
        assertEquals(IbvWcStatus.SUCCESS, c.status, c.toString());
        assertEquals(IbvWcOpcode.FLUSH, c.opcode);
        assertEquals(4096, c.byteLen);
        c = flush(a, 0, 0, b.mr.rkey(), IbvSendWr.FLUSH_GLOBAL, IbvSendWr.FLUSH_MR);
        assertEquals(IbvWcStatus.SUCCESS, c.status, "level MR: the range (address 0) is not checked " + c);
        c = flush(a, b.buf + LEN, 0, b.mr.rkey(), IbvSendWr.FLUSH_GLOBAL, IbvSendWr.FLUSH_RANGE);
        assertEquals(IbvWcStatus.SUCCESS, c.status, "an empty range at the MR's end is inside it " + c);
        // the library refuses what it cannot encode, before the device sees anything (the QP stays usable)
        IbvSendWr sg = Mlx5VerbsTest.wr(IbvWrOpcode.FLUSH, a.buf, 8, a.mr.lkey(), 8);
        sg.remoteAddr = b.buf;
        sg.rkey = b.mr.rkey();
        assertErrno(KernelException.Errno.EINVAL, "no SGE", () -> a.qp.postSend(sg));
        for (int[] bad : new int[][] {{4, 0, 4096}, {1, 2, 4096}, {1, 0, -1}}) {
            IbvSendWr f = Mlx5VerbsTest.wr(IbvWrOpcode.FLUSH, 0, 0, 0, 8);
            f.numSge = 0;
            f.remoteAddr = b.buf;
            f.rkey = b.mr.rkey();
            f.flushType = bad[0];
            f.flushLevel = bad[1];
            f.flushLength = bad[2];
            assertErrno(KernelException.Errno.EINVAL, "FLUSH type", () -> a.qp.postSend(f));
        }
        IbvSendWr huge = Mlx5VerbsTest.wr(IbvWrOpcode.FLUSH, 0, 0, 0, 8);
        huge.numSge = 0;
        huge.flushType = IbvSendWr.FLUSH_GLOBAL;
        huge.flushLength = 0x8000_0001L;
        assertErrno(KernelException.Errno.EINVAL, "2^31", () -> a.qp.postSend(huge));
        // the persistent type on a key with the global right only
        c = flush(a, b.buf, 4096, b.mr.rkey(), IbvSendWr.FLUSH_PERSISTENT, IbvSendWr.FLUSH_RANGE);
        assertEquals(IbvWcStatus.REM_ACCESS_ERR, c.status, c.toString());

        End e = new End(0, pinned);
        End f = new End(1, pinned | IbAccess.FLUSH_GLOBAL);
        connect(e, f, qpAll);
        c = flush(e, f.buf + LEN - 4096, 8192, f.mr.rkey(), IbvSendWr.FLUSH_GLOBAL, IbvSendWr.FLUSH_RANGE);
        assertEquals(IbvWcStatus.REM_ACCESS_ERR, c.status, "past the MR's end " + c);

        End g = new End(0, pinned);
        End h = new End(1, pinned);
        connect(g, h, qpAll);
        c = flush(g, h.buf, 4096, h.mr.rkey(), IbvSendWr.FLUSH_GLOBAL, IbvSendWr.FLUSH_RANGE);
        assertEquals(IbvWcStatus.REM_ACCESS_ERR, c.status, "an MR without FLUSH rights " + c);

        End k = new End(0, pinned);
        End m = new End(1, pinned | IbAccess.FLUSH_GLOBAL);
        connect(k, m, pinned);
        c = flush(k, m.buf, 4096, m.mr.rkey(), IbvSendWr.FLUSH_GLOBAL, IbvSendWr.FLUSH_RANGE);
        assertEquals(IbvWcStatus.REM_INV_REQ_ERR, c.status, "a QP without the FLUSH right: rxe's unsupported opcode " + c);

        // persistence is promised only over persistent memory: host RAM and ODP are refused at registration
        KernelException ram = assertThrows(KernelException.class, () -> m.pd.regMr(m.buf, LEN, pinned | IbAccess.FLUSH_PERSISTENT));
        assertEquals(KernelException.Errno.EINVAL, ram.errno());
        assertTrue(ram.getMessage().contains("not persistent"), ram.getMessage());
        KernelException odp = assertThrows(KernelException.class, () -> m.pd.regMr(m.buf, LEN, ODP | IbAccess.FLUSH_PERSISTENT));
        assertEquals(KernelException.Errno.EINVAL, odp.errno());
        assertTrue(odp.getMessage().contains("ODP"), odp.getMessage());
    }

    /**
     * IBA 1.5 ATOMIC WRITE over pinned memory (ODP is in the reliability loops): the 8 bytes land
     * with the requester's completion; what rxe's responder refuses is refused here with the same
     * class of error: a misaligned address (invalid request), a key without remote write (remote
     * access error; the atomic right is not what it needs, remote write is), a QP without remote
     * write; and the post-time checks of the library (a gather list, a UD QP, inline) and of mlx4,
     * which has no such WQE.
     */
    @Test
    void atomicWriteStoresEightBytesOverPinnedMemoryAndIsRefusedWhereRxeRefusesIt() {
        int pinned = IbAccess.LOCAL_WRITE | IbAccess.REMOTE_READ | IbAccess.REMOTE_WRITE;
        End a = new End(0, pinned);
        End b = new End(1, pinned);
        connect(a, b);
        for (int i = 0; i < 4; i++) {
            IbvWc c = atomicWrite(a, b.buf + 8L * i, b.mr.rkey(), -1L - i);
            assertEquals(IbvWcStatus.SUCCESS, c.status, c.toString());
            assertEquals(IbvWcOpcode.ATOMIC_WRITE, c.opcode);
            assertEquals(-1L - i, proc.readLong(b.buf + 8L * i));
        }
        assertEquals(0, proc.readLong(b.buf + 32), "nothing beyond the 8 bytes");
        // the library refuses what it cannot encode, before the device sees anything (the QP stays usable)
        IbvSendWr sg = Mlx5VerbsTest.wr(IbvWrOpcode.ATOMIC_WRITE, a.buf, 8, a.mr.lkey(), 8);
        sg.remoteAddr = b.buf;
        sg.rkey = b.mr.rkey();
        assertErrno(KernelException.Errno.EINVAL, "no SGE", () -> a.qp.postSend(sg));
        // a key whose MR lacks remote write: the atomic right would not do either
        IbvMr readOnly = b.pd.regMr(b.buf, LEN, IbAccess.LOCAL_WRITE | IbAccess.REMOTE_READ | IbAccess.REMOTE_ATOMIC);
        IbvWc denied = atomicWrite(a, b.buf + 64, readOnly.rkey(), 42);
        assertEquals(IbvWcStatus.REM_ACCESS_ERR, denied.status, denied.toString());
        assertEquals(0, proc.readLong(b.buf + 64), "a refused store stores nothing");
        readOnly.dereg();

        End c = new End(0, pinned);
        End d = new End(1, pinned);
        connect(c, d);
        IbvWc misaligned = atomicWrite(c, d.buf + 4, d.mr.rkey(), 42);
        assertEquals(IbvWcStatus.REM_INV_REQ_ERR, misaligned.status, misaligned.toString());
        assertEquals(0, proc.readLong(d.buf), "a misaligned store stores nothing");

        // a responder QP without remote write refuses it as it refuses an RDMA WRITE: an invalid request (rxe's
        // check_op_valid), not the key's remote access error
        End e = new End(0, pinned);
        End f = new End(1, pinned);
        new RcConnect().access(IbAccess.REMOTE_READ).minRnrTimer(1).timeout(14, 7).connect(e.qp, f.lid, f.qp.qpNum());
        new RcConnect().access(IbAccess.REMOTE_READ | IbAccess.REMOTE_ATOMIC).minRnrTimer(1).timeout(14, 7).connect(f.qp, e.lid, e.qp.qpNum());
        IbvWc noRwe = atomicWrite(e, f.buf, f.mr.rkey(), 42);
        assertEquals(IbvWcStatus.REM_INV_REQ_ERR, noRwe.status, noRwe.toString());
        assertEquals(0, proc.readLong(f.buf));
    }

    /** A responder fault that cannot be served (no memory behind the address) ends in a remote access error at the requester. */
    @Test
    void aFaultThatCannotBeServedEndsInAnErrorCompletionNotAHang() {
        End a = new End(0, ODP);
        End b = new End(1, ODP);
        connect(a, b);
        proc.munmap(b.buf + 65536, 65536); // a hole inside b's ODP MR
        fill(a.buf, 4096, 1);
        IbvSendWr w = Mlx5VerbsTest.wr(IbvWrOpcode.RDMA_WRITE, a.buf, 4096, a.mr.lkey(), 1);
        w.remoteAddr = b.buf + 65536;
        w.rkey = b.mr.rkey();
        a.qp.postSend(w);
        IbvWc c = Mlx5VerbsTest.one(a.cq);
        assertEquals(IbvWcStatus.REM_ACCESS_ERR, c.status, c.toString());
        assertTrue(ibs.get(1).odpIfStarted().faultErrors.get() >= 1);

        // the requester's own ODP lkey over a hole: a local protection error
        End c2 = new End(0, ODP);
        End d = new End(1, ODP);
        connect(c2, d);
        proc.munmap(c2.buf, 8192);
        IbvSendWr w2 = Mlx5VerbsTest.wr(IbvWrOpcode.RDMA_WRITE, c2.buf, 4096, c2.mr.lkey(), 2);
        w2.remoteAddr = d.buf;
        w2.rkey = d.mr.rkey();
        c2.qp.postSend(w2);
        IbvWc e = Mlx5VerbsTest.one(c2.cq);
        assertEquals(IbvWcStatus.LOC_PROT_ERR, e.status, e.toString());
    }

    /** ibv_rc_pingpong -o with the client's buffer dropped every 5 messages: validated, and both devices faulted and invalidated. */
    @Test
    void pingpongOverOdpWithDropsValidatesAndTheCountersMove() throws Exception {
        String out = tools().pingpong("-d", "mlx5_0", "-s", "8192", "-n", "40", "-c", "-o", "--drop-every", "5");
        assertTrue(out.contains("validated 40 received buffers") && out.contains("dropped its buffer 8 times"), out);
        Mlx5Odp client = ibs.get(0).odpIfStarted();
        Mlx5Odp server = ibs.get(1).odpIfStarted();
        assertTrue(client.faults.get() >= 8 && client.invalidations.get() >= 7, "the client re-faulted after every drop (the first drop found nothing mapped): " + client.describe());
        assertTrue(server.faults.get() >= 1, "the server's pages faulted in (once: it never drops them): " + server.describe());
        assertEquals(0, client.faultErrors.get() + server.faultErrors.get());
        assertTrue(client.odpMkeys().isEmpty() && server.odpMkeys().isEmpty(), "the tool deregistered its ODP MRs");
        Exception e = assertThrows(Exception.class, () -> tools().pingpong("-d", "mlx5_0", "--drop-every", "5"));
        assertTrue(e.getMessage().contains("give -o too"), e.getMessage());
    }

    /**
     * perftest {@code --use_hugepages}: the buffers are whole 2 MiB huge pages; pinned, each one
     * DMA mapping takes one 2 MiB IOMMU entry; over ODP (the MRs with {@code IB_ACCESS_HUGETLB})
     * each faulted 2 MiB granule does too; nothing is left mapped after the tool. Peer memory has
     * no huge pages to offer: refused by name.
     */
    @Test
    void perftestOverHugePagesMapsEachHugePageWithOne2MiBEntry() {
        org.peerdirect.rdma.tools.RdmaTools t = tools();
        t.setIommuForTests(iommu);
        String pinned = t.write_bw("-d", "mlx5_0", "-s", "64K", "-n", "300", "--use_hugepages");
        assertTrue(pinned.contains("host, 2 MiB huge pages") && pinned.contains("IOMMU: 2 2 MiB entries map the buffers"), pinned);
        String odp = t.write_bw("-d", "mlx5_0", "-s", "64K", "-n", "300", "--use_hugepages", "--odp");
        assertTrue(odp.contains("registered on demand (ODP)") && odp.contains("IOMMU: 2 2 MiB entries map the buffers"), odp);
        assertTrue(ibs.get(0).odpIfStarted().faults.get() >= 1, "the ODP run faulted its huge page in");
        assertEquals(0, iommu.domains().stream().mapToLong(org.peerdirect.kernel.iommu.IommuDomain::mappedSuperpages).sum(), "nothing left mapped");
        String plain = t.write_bw("-d", "mlx5_0", "-s", "64K", "-n", "100");
        assertTrue(!plain.contains("2 MiB entries"), plain);
        Exception e = assertThrows(Exception.class, () -> t.write_bw("-d", "mlx5_0", "--use_hugepages", "--mem", "nv_mem"));
        assertTrue(e.getMessage().contains("--use_hugepages backs host memory; --mem nv_mem is device memory"), e.getMessage());
    }

    /** ibv_rc_pingpong -o -P: the buffers prefetched (the client's again after each drop), so neither device faults once. */
    @Test
    void pingpongWithPrefetchNeverFaults() throws Exception {
        String out = tools().pingpong("-d", "mlx5_0", "-s", "8192", "-n", "40", "-c", "-o", "-P", "--drop-every", "5");
        assertTrue(out.contains("validated 40 received buffers") && out.contains("buffers prefetched") && !out.contains("Couldn't prefetch"), out);
        Mlx5Odp client = ibs.get(0).odpIfStarted();
        Mlx5Odp server = ibs.get(1).odpIfStarted();
        assertEquals(0, client.faults.get() + server.faults.get(), "every page was present before the device touched it: " + client.describe() + " / " + server.describe());
        assertEquals(2 * 8 + 2, client.prefetchedPages.get(), "2 pages at the start and after each of 8 drops: " + client.describe());
        assertEquals(2, server.prefetchedPages.get(), server.describe());
        Exception e = assertThrows(Exception.class, () -> tools().pingpong("-d", "mlx5_0", "-P"));
        assertTrue(e.getMessage().contains("valid only with an on-demand memory region"), e.getMessage());
    }

    /**
     * ibv_rc_pingpong -O (implicit ODP on both sides) with the client's buffer dropped every 5
     * messages: validated; each side grew a child under its implicit MR, the client's went with
     * every drop and came back; with -P the prefetch through the implicit key leaves nothing to
     * fault. mlx4 (no implicit ODP) refuses -O by name.
     */
    @Test
    void pingpongOverImplicitOdpValidatesWithAndWithoutPrefetch() throws Exception {
        String out = tools().pingpong("-d", "mlx5_0", "-s", "8192", "-n", "40", "-c", "-O", "--drop-every", "5");
        assertTrue(out.contains("validated 40 received buffers") && out.contains("implicit ODP") && out.contains("dropped its buffer 8 times"), out);
        Mlx5Odp client = ibs.get(0).odpIfStarted();
        Mlx5Odp server = ibs.get(1).odpIfStarted();
        assertTrue(client.faults.get() >= 8, "the client faulted after every drop: " + client.describe());
        assertEquals(0, client.faultErrors.get() + server.faultErrors.get());
        assertTrue(client.odpMkeys().isEmpty() && server.odpMkeys().isEmpty(), "the tool deregistered its implicit MRs");
        long before = client.faults.get() + server.faults.get();
        out = tools().pingpong("-d", "mlx5_0", "-s", "8192", "-n", "40", "-c", "-O", "-P", "--drop-every", "5");
        assertTrue(out.contains("validated 40 received buffers") && out.contains("buffers prefetched") && !out.contains("Couldn't prefetch"), out);
        assertEquals(before, client.faults.get() + server.faults.get(), "prefetched through the implicit keys: no fault");
    }

    /** perftest --odp: ib_write_bw over ODP MRs on both sides completes and says so. */
    @Test
    void writeBwOverOdp() {
        String out = tools().write_bw("-d", "mlx5_0", "-s", "65536", "-n", "200", "--odp");
        assertTrue(out.contains("registered on demand (ODP)") && out.contains("65536"), out);
        assertTrue(ibs.get(1).odpIfStarted().faults.get() >= 1, "the server's buffer faulted in");
        assertTrue(ibs.get(0).odpIfStarted().odpMkeys().isEmpty() && ibs.get(1).odpIfStarted().odpMkeys().isEmpty());
    }

    /** rdma:atomic_bw checks the remote word after the run: every operation landed once, over ODP and pinned memory; mlx4 refuses ATOMIC_WRITE. */
    @Test
    void atomicBwLandsEveryOperationOnceOverOdp() {
        String out = tools().atomic_bw("-d", "mlx5_0", "-A", "ATOMIC_WRITE", "-q", "2", "-n", "300", "--odp");
        assertTrue(out.contains("remote word after 2 x 300 ATOMIC_WRITE: 300 (as expected)") && out.contains("registered on demand"), out);
        assertTrue(ibs.get(1).odpIfStarted().faults.get() >= 1, "the server's word faulted in");
        out = tools().atomic_bw("-d", "mlx5_0", "-A", "FETCH_AND_ADD", "-q", "3", "-n", "200");
        assertTrue(out.contains("remote word after 3 x 200 ATOMIC_FETCH_AND_ADD: 600 (as expected)"), out);
        out = tools().atomic_bw("-d", "mlx5_0", "-A", "CMP_AND_SWAP", "-n", "100");
        assertTrue(out.contains("ATOMIC_CMP_AND_SWP: 1 (as expected)"), out);
        assertThrows(org.peerdirect.kernel.shell.UsageException.class, () -> tools().atomic_bw("-A", "ATOMIC_READ"));
    }

    /**
     * Regression (found by the demo): an ODP MR taking a cached mkey that a pinned MR used before
     * must not inherit its translations. Without the zap the write lands through the stale entries
     * (the IOMMU refuses them: a protection error) instead of faulting the new pages in.
     */
    @Test
    void anOdpMrOnACachedMkeyFaultsInsteadOfUsingTheLastOwnersTranslations() {
        End a = new End(0, ODP);
        End b = new End(1, ODP);
        connect(a, b);
        long old = proc.mmap(LEN);
        proc.populate(old, LEN, true);
        IbvMr pinned = b.pd.regMr(old, LEN, ODP & ~IbAccess.ON_DEMAND);
        int key = pinned.lkey();
        pinned.dereg(); // back to the cache, its MTT still full
        proc.munmap(old, LEN);
        long fresh = proc.mmap(LEN);
        IbvMr odp = b.pd.regMr(fresh, LEN, ODP);
        assertEquals(Mkey.mkeyToIdx(key), Mkey.mkeyToIdx(odp.lkey()), "the ODP MR took the cached mkey");
        byte[] data = fill(a.buf, 4096, 9);
        IbvSendWr w = Mlx5VerbsTest.wr(IbvWrOpcode.RDMA_WRITE, a.buf, 4096, a.mr.lkey(), 1);
        w.remoteAddr = fresh + 8192;
        w.rkey = odp.rkey();
        a.qp.postSend(w);
        assertOk(a.cq, IbvWcOpcode.RDMA_WRITE);
        assertArrayEquals(data, read(fresh + 8192, 4096));

        // an ODP MR deregistered with pages mapped is revoked, not zapped: the next ODP MR on its
        // cached mkey must still fault instead of writing through the old entries
        odp.dereg();
        proc.munmap(fresh, LEN);
        long third = proc.mmap(LEN);
        IbvMr odp2 = b.pd.regMr(third, LEN, ODP);
        assertEquals(Mkey.mkeyToIdx(key), Mkey.mkeyToIdx(odp2.lkey()), "the second ODP MR took the cached mkey again");
        long faults = ibs.get(1).odpIfStarted().faults.get();
        w.rkey = odp2.rkey();
        w.remoteAddr = third + 8192;
        a.qp.postSend(w);
        assertOk(a.cq, IbvWcOpcode.RDMA_WRITE);
        assertArrayEquals(data, read(third + 8192, 4096));
        assertTrue(ibs.get(1).odpIfStarted().faults.get() > faults, "the write faulted the new page in");
        odp2.dereg();
        proc.munmap(third, LEN);
    }

    /**
     * {@code ibv_advise_mr} with FLUSH: PREFETCH_WRITE maps the range writable before the call
     * returns, so the device writes it without one fault; PREFETCH maps it read-only, so a remote
     * write still faults (to upgrade); PREFETCH_NO_FAULT maps only what the CPU has present.
     */
    @Test
    void synchronousPrefetchMapsTheRangeAsEachAdviceSays() {
        End a = new End(0, ODP);
        End b = new End(1, ODP);
        connect(a, b);
        Mlx5OdpMr mb = b.odpMr();
        b.pd.adviseMr(IbvPd.ADVISE_MR_ADVICE_PREFETCH_WRITE, IbvPd.ADVISE_MR_FLAG_FLUSH, new IbvSge(b.buf + 8192, 65536, b.mr.lkey()));
        assertEquals(16, mb.umem.mappedPages(), "16 pages made present and writable before the call returned");
        assertEquals(16, mb.stats().pagePrefetch.get(), "counted as prefetched, not faulted");
        byte[] data = fill(a.buf, 65536, 1);
        IbvSendWr w = Mlx5VerbsTest.wr(IbvWrOpcode.RDMA_WRITE, a.buf, 65536, a.mr.lkey(), 1);
        w.remoteAddr = b.buf + 8192;
        w.rkey = b.mr.rkey();
        a.qp.postSend(w);
        assertOk(a.cq, IbvWcOpcode.RDMA_WRITE);
        assertArrayEquals(data, read(b.buf + 8192, 65536));
        assertEquals(0, mb.stats().pageFaultsHandled.get(), "the responder never faulted: " + mb);

        // PREFETCH: read-only entries; the device's write needs write access, so it faults to upgrade them
        proc.madvise(b.buf, LEN, AddressSpace.Advice.MADV_DONTNEED);
        b.pd.adviseMr(IbvPd.ADVISE_MR_ADVICE_PREFETCH, IbvPd.ADVISE_MR_FLAG_FLUSH, new IbvSge(b.buf, 8192, b.mr.lkey()));
        assertEquals(2, mb.umem.mappedPages());
        mb.umem.lock();
        try {
            assertEquals(IbUmemOdp.ODP_READ_ALLOWED, mb.umem.dmaEntry(b.buf) & ~IbUmemOdp.ODP_DMA_ADDR_MASK, "PREFETCH maps read-only (MLX5_PF_FLAGS_DOWNGRADE)");
        } finally {
            mb.umem.unlock();
        }
        w.remoteAddr = b.buf;
        w.sgList[0].length = 8192;
        a.qp.postSend(w);
        assertOk(a.cq, IbvWcOpcode.RDMA_WRITE);
        assertArrayEquals(java.util.Arrays.copyOf(data, 8192), read(b.buf, 8192));
        assertTrue(mb.stats().pageFaultsHandled.get() >= 1, "the write faulted to make the pages writable: " + mb);

        // PREFETCH_NO_FAULT: of 1 MiB only the 3 pages the CPU touched become present
        proc.madvise(b.buf, LEN, AddressSpace.Advice.MADV_DONTNEED);
        fill(b.buf + 40960, 3 * 4096, 2);
        long rss = proc.rssPages();
        b.pd.adviseMr(IbvPd.ADVISE_MR_ADVICE_PREFETCH_NO_FAULT, IbvPd.ADVISE_MR_FLAG_FLUSH, new IbvSge(b.buf, LEN, b.mr.lkey()));
        assertEquals(3, mb.umem.mappedPages(), "NO_FAULT maps only the CPU-present pages");
        assertEquals(rss, proc.rssPages(), "and faults nothing in for the CPU");

        // several SGEs over two MRs
        proc.madvise(a.buf, LEN, AddressSpace.Advice.MADV_DONTNEED);
        proc.madvise(b.buf, LEN, AddressSpace.Advice.MADV_DONTNEED);
        long before = a.odpMr().stats().pagePrefetch.get();
        a.pd.adviseMr(IbvPd.ADVISE_MR_ADVICE_PREFETCH_WRITE, IbvPd.ADVISE_MR_FLAG_FLUSH, new IbvSge(a.buf, 4096, a.mr.lkey()),
                new IbvSge(a.buf + 500_000, 10_000, a.mr.lkey()));
        assertEquals(1 + 3, a.odpMr().umem.mappedPages());
        assertEquals(before + 4, a.odpMr().stats().pagePrefetch.get());
    }

    /** Every error of {@code ibv_advise_mr} names its cause and changes nothing. */
    @Test
    void adviseMrRefusesBadInputWithTheKernelsErrors() {
        End a = new End(0, ODP);
        End b = new End(1, ODP);
        IbvSge ok = new IbvSge(a.buf, 4096, a.mr.lkey());
        assertErrno(KernelException.Errno.EINVAL, "unknown flags", () -> a.pd.adviseMr(IbvPd.ADVISE_MR_ADVICE_PREFETCH, 2, ok));
        assertErrno(KernelException.Errno.EOPNOTSUPP, "advice 3", () -> a.pd.adviseMr(3, IbvPd.ADVISE_MR_FLAG_FLUSH, ok));
        long pinnedBuf = proc.mmap(8192);
        IbvMr pinned = a.pd.regMr(pinnedBuf, 8192, ODP & ~IbAccess.ON_DEMAND);
        assertErrno(KernelException.Errno.ENOENT, "names no ODP MR",
                () -> a.pd.adviseMr(IbvPd.ADVISE_MR_ADVICE_PREFETCH, IbvPd.ADVISE_MR_FLAG_FLUSH, new IbvSge(pinnedBuf, 4096, pinned.lkey())));
        assertErrno(KernelException.Errno.ENOENT, "names no ODP MR",
                () -> a.pd.adviseMr(IbvPd.ADVISE_MR_ADVICE_PREFETCH, 0, new IbvSge(a.buf, 4096, a.mr.lkey() ^ 0x55)));
        IbvPd other = a.ctx.allocPd();
        assertErrno(KernelException.Errno.EPERM, "another PD", () -> other.adviseMr(IbvPd.ADVISE_MR_ADVICE_PREFETCH, IbvPd.ADVISE_MR_FLAG_FLUSH, ok));
        long roBuf = proc.mmap(8192);
        IbvMr ro = a.pd.regMr(roBuf, 8192, IbAccess.REMOTE_READ | IbAccess.ON_DEMAND);
        assertErrno(KernelException.Errno.EPERM, "without IBV_ACCESS_LOCAL_WRITE",
                () -> a.pd.adviseMr(IbvPd.ADVISE_MR_ADVICE_PREFETCH_WRITE, 0, new IbvSge(roBuf, 4096, ro.lkey())));
        a.pd.adviseMr(IbvPd.ADVISE_MR_ADVICE_PREFETCH, IbvPd.ADVISE_MR_FLAG_FLUSH, new IbvSge(roBuf, 4096, ro.lkey())); // read is fine
        assertErrno(KernelException.Errno.EFAULT, "runs past the MR",
                () -> a.pd.adviseMr(IbvPd.ADVISE_MR_ADVICE_PREFETCH, IbvPd.ADVISE_MR_FLAG_FLUSH, new IbvSge(a.buf + LEN - 4096, 8192, a.mr.lkey())));
        assertErrno(KernelException.Errno.EFAULT, "outside the MR",
                () -> a.pd.adviseMr(IbvPd.ADVISE_MR_ADVICE_PREFETCH, IbvPd.ADVISE_MR_FLAG_FLUSH, new IbvSge(a.buf - 4096, 100, a.mr.lkey())));
        // a bad second SGE: the first one's MR is let go again (its deregistration below does not wait 30 s)
        assertErrno(KernelException.Errno.ENOENT, "names no ODP MR",
                () -> a.pd.adviseMr(IbvPd.ADVISE_MR_ADVICE_PREFETCH, IbvPd.ADVISE_MR_FLAG_FLUSH, ok, new IbvSge(a.buf, 4096, 0x7777_7700)));
        a.pd.adviseMr(IbvPd.ADVISE_MR_ADVICE_PREFETCH, IbvPd.ADVISE_MR_FLAG_FLUSH); // no SGE: nothing to do
        assertEquals(0, a.odpMr().umem.mappedPages() + b.odpMr().umem.mappedPages(), "the refused advices mapped nothing");
        long t0 = System.nanoTime();
        a.mr.dereg();
        assertTrue(System.nanoTime() - t0 < java.util.concurrent.TimeUnit.SECONDS.toNanos(10), "no use count left behind by a refused advice");
        ro.dereg();
        pinned.dereg();
    }

    /**
     * Without FLUSH the keys are checked at once and the work runs in the background; its failures
     * are silent (counted). A deregistration right after waits for the queued work through the MR's
     * use count instead of racing it.
     */
    @Test
    void backgroundPrefetchIsBestEffortAndDeregistrationWaitsForIt() {
        End a = new End(0, ODP);
        fill(a.buf, LEN, 5);
        Mlx5Odp odp = ibs.get(0).odpIfStarted();
        Mlx5OdpMr m = a.odpMr();
        a.pd.adviseMr(IbvPd.ADVISE_MR_ADVICE_PREFETCH_WRITE, 0, new IbvSge(a.buf, LEN / 2, a.mr.lkey()),
                new IbvSge(a.buf + LEN - 4096, 8192, a.mr.lkey())); // the second runs past the MR: fails quietly
        a.mr.dereg(); // waits for the queued prefetch (it holds the use count), then zaps what it mapped
        assertEquals(LEN / 2 / 4096, m.stats().pagePrefetch.get(), "the background work mapped the first range before the deregistration went on");
        assertEquals(1, odp.prefetchErrors.get(), "the second range failed silently");
        assertEquals(0, m.umem.mappedPages(), "and the deregistration unmapped everything");
    }

    /**
     * UD over ODP, as mlx5 reports it (UD: SEND and SRQ receive): the sender's ODP buffer and the
     * receiver's SRQ buffer in ODP memory are dropped before every datagram; the requester's WQE
     * fault and the SRQ (RMP) fault are both served and the payload arrives after its GRH space.
     */
    @Test
    void udSendsFromOdpIntoSrqReceivesOverOdpRefaultAfterEveryDrop() {
        End u = new End(0, ODP, IbvQpType.UD, false);
        End v = new End(1, ODP, IbvQpType.UD, true);
        for (End e : List.of(u, v)) {
            RcConnect.udToRts(e.qp, 1, 0x11111111);
        }
        IbvAh ah = u.pd.createAh(v.lid, 1);
        int dropped = 0;
        int iterations = Integer.getInteger("peerdirect.odp.iterations", 12);
        for (int i = 0; i < iterations; i++) {
            proc.madvise(u.buf, LEN, AddressSpace.Advice.MADV_DONTNEED);
            proc.madvise(v.buf, LEN, AddressSpace.Advice.MADV_DONTNEED);
            long slot = v.buf + 4096L * (i % 50) + 8192;
            IbvRecvWr r = new IbvRecvWr().sge(slot, 40 + 2048, v.mr.lkey());
            r.wrId = 100 + i;
            v.srq.postRecv(r);
            byte[] d = fill(u.buf + 4096L * (i % 30) + 100, 1500 + i, i); // across a page boundary
            IbvSendWr w = Mlx5VerbsTest.wr(IbvWrOpcode.SEND, u.buf + 4096L * (i % 30) + 100, d.length, u.mr.lkey(), i);
            w.ah = ah;
            w.remoteQpn = v.qp.qpNum();
            w.remoteQkey = 0x11111111;
            proc.madvise(u.buf, LEN, AddressSpace.Advice.MADV_DONTNEED); // the sender's data too: only the device reads it back in
            fill(u.buf + 4096L * (i % 30) + 100, d.length, i);
            // a datagram whose receive buffer faults is dropped (UD has no RNR NAK) while the fault is
            // served; the receive WQE stays posted, so the application's resend lands
            IbvWc rc = null;
            int sent = 0;
            while (rc == null) {
                assertTrue(++sent <= 8, "datagram " + i + " never arrived: " + models.get(1).pageFaultsDescribe());
                u.qp.postSend(w);
                assertOk(u.cq, IbvWcOpcode.SEND);
                rc = pollOnce(v.cq);
                if (rc == null) {
                    awaitSettled(1);
                    rc = pollOnce(v.cq);
                }
            }
            dropped += sent - 1;
            assertEquals(IbvWcStatus.SUCCESS, rc.status, rc.toString());
            assertEquals(100 + i, rc.wrId);
            assertEquals(40 + d.length, rc.byteLen, "payload after the 40 bytes of GRH space");
            assertArrayEquals(d, read(slot + 40, d.length), "datagram " + i);
        }
        assertTrue(v.odpMr().stats().pageFaultsHandled.get() >= iterations, "the SRQ receive faulted every time: " + v.odpMr());
        assertTrue(dropped >= iterations, "every first datagram met a dropped receive buffer and was lost: " + dropped);
        assertTrue(u.odpMr().stats().pageInvalidationsHandled.get() >= iterations - 1, "every drop after the first found the sent pages mapped: " + u.odpMr());
        assertEquals(0, ibs.get(0).odpIfStarted().faultErrors.get() + ibs.get(1).odpIfStarted().faultErrors.get());
    }

    /**
     * RC with an SRQ over ODP and RDMA WRITE with immediate: the SRQ receive faults (RMP type), the
     * immediate's receive consumes a WQE without data, the written pages fault at the responder.
     */
    @Test
    void srqReceivesAndWriteWithImmediateOverOdpRefaultAfterEveryDrop() {
        End a = new End(0, ODP, IbvQpType.RC, false);
        End b = new End(1, ODP, IbvQpType.RC, true);
        connect(a, b);
        int iterations = Integer.getInteger("peerdirect.odp.iterations", 12);
        for (int i = 0; i < iterations; i++) {
            proc.madvise(a.buf, LEN, AddressSpace.Advice.MADV_DONTNEED);
            proc.madvise(b.buf, LEN, AddressSpace.Advice.MADV_DONTNEED);
            IbvRecvWr r = new IbvRecvWr().sge(b.buf + 300_000, 20_000, b.mr.lkey());
            r.wrId = 7;
            b.srq.postRecv(r);
            byte[] msg = fill(a.buf + 10_000, 12_000 + i, i);
            proc.madvise(a.buf, LEN, AddressSpace.Advice.MADV_DONTNEED);
            fill(a.buf + 10_000, msg.length, i);
            a.qp.postSend(Mlx5VerbsTest.wr(IbvWrOpcode.SEND, a.buf + 10_000, msg.length, a.mr.lkey(), 1));
            assertOk(a.cq, IbvWcOpcode.SEND);
            IbvWc rc = Mlx5VerbsTest.one(b.cq);
            assertEquals(IbvWcStatus.SUCCESS, rc.status, rc.toString());
            assertEquals(msg.length, rc.byteLen);
            assertArrayEquals(msg, read(b.buf + 300_000, msg.length), "iteration " + i + ": SEND into the SRQ");

            proc.madvise(b.buf, LEN, AddressSpace.Advice.MADV_DONTNEED);
            IbvRecvWr ri = new IbvRecvWr();
            ri.wrId = 8;
            b.srq.postRecv(ri);
            IbvSendWr w = Mlx5VerbsTest.wr(IbvWrOpcode.RDMA_WRITE_WITH_IMM, a.buf + 10_000, msg.length, a.mr.lkey(), 2);
            w.remoteAddr = b.buf + 600_000;
            w.rkey = b.mr.rkey();
            w.immData = 0x1234 + i;
            a.qp.postSend(w);
            assertOk(a.cq, IbvWcOpcode.RDMA_WRITE);
            IbvWc ic = Mlx5VerbsTest.one(b.cq);
            assertEquals(IbvWcStatus.SUCCESS, ic.status, ic.toString());
            assertEquals(IbvWcOpcode.RECV_RDMA_WITH_IMM, ic.opcode);
            assertEquals(0x1234 + i, ic.immData);
            assertArrayEquals(msg, read(b.buf + 600_000, msg.length), "iteration " + i + ": WRITE with immediate");
        }
        assertTrue(b.odpMr().stats().pageFaultsHandled.get() >= 2L * iterations, b.odpMr().toString());
        assertEquals(0, ibs.get(0).odpIfStarted().faultErrors.get() + ibs.get(1).odpIfStarted().faultErrors.get());
    }

    /**
     * Pages the process forbids: mlx5 faults a writable ODP MR's pages writable whatever the access
     * (pagefault_real_mr asks hmm for write when the umem is writable), so once the process makes
     * them read-only even a remote read of them cannot be served (REM_ACCESS_ERR, as on the real
     * driver); an ODP MR registered read-only faults them read-only and the read is served;
     * PROT_NONE pages fail the read-only MR too. The failed faults resume with error, nothing hangs.
     */
    @Test
    void readOnlyAndProtNonePagesFailTheAccessesTheirMrCannotFault() {
        int ro = IbAccess.REMOTE_READ | IbAccess.ON_DEMAND;
        // a writable ODP MR over pages made read-only: the read fails
        End a = new End(0, ODP);
        End b = new End(1, ODP);
        connect(a, b);
        fill(b.buf + 65536, 8192, 3);
        proc.mprotect(b.buf + 65536, 65536, Vma.PROT_READ);
        IbvSendWr rd = Mlx5VerbsTest.wr(IbvWrOpcode.RDMA_READ, a.buf, 8192, a.mr.lkey(), 1);
        rd.remoteAddr = b.buf + 65536;
        rd.rkey = b.mr.rkey();
        a.qp.postSend(rd);
        IbvWc c = Mlx5VerbsTest.one(a.cq);
        assertEquals(IbvWcStatus.REM_ACCESS_ERR, c.status, "a writable ODP MR cannot fault read-only pages in: " + c);

        // the same pages under a read-only ODP MR: read-only faults, the read is served with the data
        long bufRo = b.buf + 65536;
        byte[] data = read(bufRo, 8192);
        End a2 = new End(0, ODP);
        End b2 = new End(1, ODP);
        connect(a2, b2);
        IbvMr mro = b2.pd.regMr(bufRo, 65536, ro);
        IbvSendWr rd2 = Mlx5VerbsTest.wr(IbvWrOpcode.RDMA_READ, a2.buf, 8192, a2.mr.lkey(), 2);
        rd2.remoteAddr = bufRo;
        rd2.rkey = mro.rkey();
        a2.qp.postSend(rd2);
        assertOk(a2.cq, IbvWcOpcode.RDMA_READ);
        assertArrayEquals(data, read(a2.buf, 8192), "the read-only MR's fault served the read");

        // PROT_NONE: not even a read-only fault
        proc.mprotect(bufRo, 65536, Vma.PROT_NONE);
        a2.qp.postSend(rd2);
        IbvWc c2 = Mlx5VerbsTest.one(a2.cq);
        assertEquals(IbvWcStatus.REM_ACCESS_ERR, c2.status, "a read of PROT_NONE pages: " + c2);
        assertTrue(ibs.get(1).odpIfStarted().faultErrors.get() >= 2, ibs.get(1).odpIfStarted().describe());
        awaitSettled(1);
        proc.mprotect(bufRo, 65536, Vma.PROT_READ | Vma.PROT_WRITE);
        mro.dereg();
    }

    /**
     * The invalidation storm: 8 RC QP pairs move data between ODP buffers (WRITE, then READ back,
     * checked by the CPU and by the device each time) while other threads page the buffers out
     * to swap, migrate them to other frames, and munmap/remap or DONTNEED a prefetched stretch of
     * them (where the traffic does not check data: a drop loses it). Every
     * invalidation zaps the device's translation before the frames change, so: no error
     * completion, every byte as written (pages the device dirtied survive a page-out: the unmap
     * marked them dirty), not one DMA refused by the IOMMU, and the audit clean at the end.
     */
    @Test
    void anInvalidationStormNeverLetsTheDeviceTouchAPageItNoLongerOwns() throws Exception {
        int pairs = 8;
        End[] as = new End[pairs];
        End[] bs = new End[pairs];
        for (int k = 0; k < pairs; k++) {
            as[k] = new End(0, ODP);
            bs[k] = new End(1, ODP);
            connect(as[k], bs[k]);
        }
        long tail = 3 * LEN / 4; // [tail, LEN) of each b buffer is the munmap thread's; the traffic stays below it
        int ops = 10 * Integer.getInteger("peerdirect.odp.iterations", 12);
        long iommuFaults = iommu.audit().faults();
        java.util.concurrent.atomic.AtomicReference<Throwable> failure = new java.util.concurrent.atomic.AtomicReference<>();
        java.util.concurrent.atomic.AtomicBoolean done = new java.util.concurrent.atomic.AtomicBoolean();
        java.util.concurrent.atomic.AtomicLong storms = new java.util.concurrent.atomic.AtomicLong();
        java.util.concurrent.atomic.AtomicLong progress = new java.util.concurrent.atomic.AtomicLong();
        List<Thread> traffic = new java.util.ArrayList<>();
        for (int k = 0; k < pairs; k++) {
            End a = as[k];
            End b = bs[k];
            int seed = k;
            traffic.add(Thread.ofPlatform().name("storm-traffic-" + k).start(() -> {
                try {
                    java.util.Random rnd = new java.util.Random(seed);
                    for (int i = 0; i < ops && failure.get() == null; i++) {
                        int len = 1 + rnd.nextInt(3 * 4096);
                        long src = a.buf + rnd.nextInt(LEN / 4);
                        long dst = b.buf + rnd.nextInt((int) tail - len);
                        long back = a.buf + LEN / 2 + rnd.nextInt(LEN / 4);
                        byte[] data = fill(src, len, seed * 1000 + i);
                        IbvSendWr w = Mlx5VerbsTest.wr(IbvWrOpcode.RDMA_WRITE, src, len, a.mr.lkey(), 2L * i);
                        w.remoteAddr = dst;
                        w.rkey = b.mr.rkey();
                        a.qp.postSend(w);
                        assertOk(a.cq, IbvWcOpcode.RDMA_WRITE);
                        IbvSendWr r = Mlx5VerbsTest.wr(IbvWrOpcode.RDMA_READ, back, len, a.mr.lkey(), 2L * i + 1);
                        r.remoteAddr = dst;
                        r.rkey = b.mr.rkey();
                        a.qp.postSend(r);
                        assertOk(a.cq, IbvWcOpcode.RDMA_READ);
                        assertArrayEquals(data, read(back, len), "pair " + seed + " op " + i + ": the device read back what it wrote");
                        assertArrayEquals(data, read(dst, len), "pair " + seed + " op " + i + ": the CPU sees what the device wrote");
                        progress.incrementAndGet();
                    }
                } catch (Throwable t) {
                    failure.compareAndSet(null, t);
                }
            }));
        }
        List<Thread> storm = new java.util.ArrayList<>();
        storm.add(Thread.ofPlatform().name("storm-pageout").start(() -> stormLoop(done, failure, storms, progress, rnd -> {
            End e = (rnd.nextBoolean() ? as : bs)[rnd.nextInt(pairs)];
            long off = rnd.nextInt((int) (tail / 4096) - 16) * 4096L; // below the munmap thread's stretch
            proc.madvise(e.buf + off, 16 * 4096, AddressSpace.Advice.MADV_PAGEOUT);
        })));
        storm.add(Thread.ofPlatform().name("storm-migrate").start(() -> stormLoop(done, failure, storms, progress, rnd -> {
            End e = (rnd.nextBoolean() ? as : bs)[rnd.nextInt(pairs)];
            long off = rnd.nextInt((int) (tail / 4096) - 16) * 4096L; // below the munmap thread's stretch
            proc.migrate(e.buf + off, 16 * 4096);
        })));
        storm.add(Thread.ofPlatform().name("storm-munmap").start(() -> stormLoop(done, failure, storms, progress, rnd -> {
            End e = bs[rnd.nextInt(pairs)];
            long at = e.buf + tail;
            fill(at, 4096, rnd.nextInt());
            e.pd.adviseMr(IbvPd.ADVISE_MR_ADVICE_PREFETCH_WRITE, IbvPd.ADVISE_MR_FLAG_FLUSH, new IbvSge(at, (int) (LEN - tail), e.mr.lkey()));
            if (rnd.nextBoolean()) {
                proc.munmap(at, LEN - tail); // zapped and unmapped before the frames go
                assertEquals(at, proc.mmap(at, LEN - tail, Vma.PROT_READ | Vma.PROT_WRITE, Vma.Kind.ANON, "[anon]"));
            } else {
                proc.madvise(at, LEN - tail, AddressSpace.Advice.MADV_DONTNEED);
            }
        })));
        for (Thread t : traffic) {
            t.join(120_000);
            assertTrue(!t.isAlive(), t.getName() + " did not finish within 120 s");
        }
        done.set(true);
        for (Thread t : storm) {
            t.join(30_000);
            assertTrue(!t.isAlive(), t.getName() + " did not stop");
        }
        if (failure.get() != null) {
            throw new AssertionError("the storm broke something: " + failure.get(), failure.get());
        }
        long zaps = 0;
        for (int k = 0; k < pairs; k++) {
            zaps += as[k].odpMr().stats().pageInvalidationsHandled.get() + bs[k].odpMr().stats().pageInvalidationsHandled.get();
        }
        assertTrue(storms.get() > 0 && zaps > 0, "the storm ran (" + storms.get() + " rounds) and zapped device translations (" + zaps + " times)");
        assertEquals(iommuFaults, iommu.audit().faults(), "not one DMA went through a mapping the IOMMU no longer had: " + iommu.audit());
        assertTrue(iommu.audit().violationFree(), iommu.audit().toString());
        assertEquals(0, ibs.get(0).odpIfStarted().faultErrors.get() + ibs.get(1).odpIfStarted().faultErrors.get());
    }

    interface StormStep {
        void run(java.util.Random rnd);
    }

    /**
     * One storm thread: a round, then (paced by the traffic, not by time) the next once the traffic
     * finished another operation, so the 8 pairs meet about one invalidation of each kind per
     * operation instead of being starved on 2 cores.
     */
    private static void stormLoop(java.util.concurrent.atomic.AtomicBoolean done, java.util.concurrent.atomic.AtomicReference<Throwable> failure,
            java.util.concurrent.atomic.AtomicLong rounds, java.util.concurrent.atomic.AtomicLong progress, StormStep step) {
        java.util.Random rnd = new java.util.Random(Thread.currentThread().getName().hashCode());
        try {
            long seen = -1;
            while (!done.get() && failure.get() == null) {
                if (progress.get() == seen) {
                    Thread.yield();
                    continue;
                }
                seen = progress.get();
                step.run(rnd);
                rounds.incrementAndGet();
            }
        } catch (Throwable t) {
            failure.compareAndSet(null, t);
        }
    }

    static IbvWc pollOnce(IbvCq cq) {
        IbvWc[] wc = { new IbvWc() };
        return cq.poll(1, wc) == 1 ? wc[0] : null;
    }

    /** Waits (bounded) until device {@code dev} has no page fault waiting for its resume. */
    void awaitSettled(int dev) {
        long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(10);
        while (!models.get(dev).pageFaultsSettled()) {
            assertTrue(System.nanoTime() < deadline, "page faults not resumed within 10 s: " + models.get(dev).pageFaultsDescribe());
            Thread.onSpinWait();
        }
    }

    static void assertErrno(KernelException.Errno errno, String text, org.junit.jupiter.api.function.Executable call) {
        KernelException e = assertThrows(KernelException.class, call);
        assertEquals(errno, e.errno(), e.getMessage());
        assertTrue(e.getMessage().contains(text), e.getMessage());
    }

    /**
     * An implicit ODP MR costs nothing until the device touches it: no child, no mapping. An RDMA
     * WRITE into two gigabytes of it faults on the parent's key and creates one child per gigabyte
     * (1 GiB each, through the parent's KSM); the data lands; a drop of everything takes each child
     * with its last page (the KSM entry back on the null mkey), and the next write creates it anew.
     * Deregistration with children alive takes them all.
     */
    @Test
    void anImplicitMrGrowsAChildPerGigabyteTouchedAndLosesItWithItsLastPage() {
        End a = new End(0, ODP);
        End b = new End(1, ODP, IbvQpType.RC, false, true);
        connect(a, b);
        Mlx5ImplicitMr m = b.implicitMr();
        long mptsBefore = models.get(1).mkeysAlive();
        assertEquals(0, m.children.size(), "nothing below the parent before a fault");
        assertEquals(0, m.umem.mappedPages());
        long region = proc.mmap(3L << 30); // three gigabytes, untouched
        long[] at = { region + 4096 + 10, region + (2L << 30) + 10 };
        for (int round = 0; round < 2; round++) {
            for (int k = 0; k < at.length; k++) {
                byte[] data = fill(a.buf + 4096 * k, 6000, 10 * round + k);
                IbvSendWr w = Mlx5VerbsTest.wr(IbvWrOpcode.RDMA_WRITE, a.buf + 4096 * k, data.length, a.mr.lkey(), k);
                w.remoteAddr = at[k];
                w.rkey = b.mr.rkey();
                a.qp.postSend(w);
                assertOk(a.cq, IbvWcOpcode.RDMA_WRITE);
                assertArrayEquals(data, read(at[k], data.length), "round " + round + ": the write into GiB " + k + " landed");
            }
            assertEquals(2, m.children.size(), "one child per gigabyte touched: " + m);
            assertEquals(models.get(1).mkeysAlive(), mptsBefore + 2, "two child mkeys, nothing else");
            assertTrue(m.stats.pageFaults.get() >= 2L * (round + 1) * 2, "the children's faults count into the parent's counters: " + m);
            proc.madvise(region, 3L << 30, AddressSpace.Advice.MADV_DONTNEED);
            awaitChildren(m, 0);
            assertEquals(2L * (round + 1), m.childrenDestroyed.get(), "each child went with its last page: " + m);
            assertEquals(models.get(1).mkeysAlive(), mptsBefore, "their mkeys destroyed");
        }
        assertTrue(m.stats.pageInvalidations.get() >= 4, m.toString());
        // a read through the parent into a fresh child, then deregistration with that child alive
        fill(at[1], 100, 99);
        IbvSendWr rd = Mlx5VerbsTest.wr(IbvWrOpcode.RDMA_READ, a.buf + 65536, 100, a.mr.lkey(), 7);
        rd.remoteAddr = at[1];
        rd.rkey = b.mr.rkey();
        a.qp.postSend(rd);
        assertOk(a.cq, IbvWcOpcode.RDMA_READ);
        assertArrayEquals(read(at[1], 100), read(a.buf + 65536, 100));
        assertEquals(1, m.children.size());
        b.mr.dereg();
        assertTrue(m.children.isEmpty(), "deregistration took the child");
        assertEquals(mptsBefore - 1, models.get(1).mkeysAlive(), "the parent and its child destroyed");
        assertTrue(ibs.get(1).odpIfStarted().odpMkeys().isEmpty());
        proc.munmap(region, 3L << 30);
    }

    /**
     * Prefetch through the implicit key creates the children without any device fault; the range
     * beyond the KSM's 2^17 gigabytes is EFAULT for prefetch and a protection error on the wire
     * (not a fault); HUGETLB is explicit-only (EINVAL).
     */
    @Test
    void implicitPrefetchCreatesChildrenAndTheRangeBeyondTheKsmIsRefused() {
        End a = new End(0, ODP);
        End b = new End(1, ODP, IbvQpType.RC, false, true);
        connect(a, b);
        Mlx5ImplicitMr m = b.implicitMr();
        b.pd.adviseMr(IbvPd.ADVISE_MR_ADVICE_PREFETCH_WRITE, IbvPd.ADVISE_MR_FLAG_FLUSH, new IbvSge(b.buf, 65536, b.mr.lkey()));
        assertTrue(m.children.size() >= 1);
        assertEquals(16, m.stats.pagePrefetch.get(), "16 pages prefetched: " + m);
        long faultsBefore = ibs.get(1).odpIfStarted().faults.get();
        byte[] data = fill(a.buf, 65536, 3);
        IbvSendWr w = Mlx5VerbsTest.wr(IbvWrOpcode.RDMA_WRITE, a.buf, 65536, a.mr.lkey(), 1);
        w.remoteAddr = b.buf;
        w.rkey = b.mr.rkey();
        a.qp.postSend(w);
        assertOk(a.cq, IbvWcOpcode.RDMA_WRITE);
        assertArrayEquals(data, read(b.buf, data.length));
        assertEquals(faultsBefore, ibs.get(1).odpIfStarted().faults.get(), "prefetched: the write never faulted");

        long top = (long) Mlx5ImplicitMr.KSM_ENTRIES << Mlx5ImplicitMr.IMR_MTT_SHIFT;
        assertErrno(KernelException.Errno.EFAULT, "beyond",
                () -> b.pd.adviseMr(IbvPd.ADVISE_MR_ADVICE_PREFETCH, IbvPd.ADVISE_MR_FLAG_FLUSH, new IbvSge(top, 4096, b.mr.lkey())));
        IbvSendWr far = Mlx5VerbsTest.wr(IbvWrOpcode.RDMA_WRITE, a.buf, 64, a.mr.lkey(), 2);
        far.remoteAddr = top + 4096;
        far.rkey = b.mr.rkey();
        a.qp.postSend(far);
        IbvWc e = Mlx5VerbsTest.one(a.cq);
        assertEquals(IbvWcStatus.REM_ACCESS_ERR, e.status, e.toString());
        assertEquals(faultsBefore, ibs.get(1).odpIfStarted().faults.get(), "beyond the KSM's entries is an error, not a fault");

        IbvPd pd = devs.get(0).open(proc).allocPd();
        assertErrno(KernelException.Errno.EINVAL, "HUGETLB", () -> pd.regMr(0, -1L, ODP | IbAccess.HUGETLB));
    }

    /**
     * The child's destruction racing faults into the same gigabyte: after every write its pages
     * are dropped, which hands the emptied child to the background work while the next write
     * faults at once: it creates a new child, or meets the old one still in the KSM with every page
     * zapped and faults again. A second write per round goes to another page of the same child,
     * which a second thread drops again and again, so drops also land in the middle of that page's
     * faults (its data is not checked: a drop after it landed zeroes it). Every write completes
     * successfully, the checked one with its data, and at
     * the end every child that left is destroyed. Paced by progress, not time.
     */
    @Test
    void childDestructionRacingFaultsNeverFailsAWrite() throws Exception {
        End a = new End(0, ODP);
        End b = new End(1, ODP, IbvQpType.RC, false, true);
        connect(a, b);
        Mlx5ImplicitMr m = b.implicitMr();
        java.util.concurrent.atomic.AtomicInteger writes = new java.util.concurrent.atomic.AtomicInteger();
        java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
        java.util.concurrent.atomic.AtomicInteger drops = new java.util.concurrent.atomic.AtomicInteger();
        java.util.concurrent.atomic.AtomicReference<Throwable> dropFailed = new java.util.concurrent.atomic.AtomicReference<>();
        Thread dropper = Thread.ofPlatform().name("dropper").start(() -> {
            int seen = -1;
            try {
                while (!stop.get()) {
                    int n = writes.get();
                    if (n != seen) { // at most one drop per write: the writes keep going
                        seen = n;
                        proc.madvise(b.buf + 65536, 4096, AddressSpace.Advice.MADV_DONTNEED);
                        drops.incrementAndGet();
                    } else {
                        Thread.onSpinWait();
                    }
                }
            } catch (Throwable t) { // a failed drop fails the test with its cause (it was lost with the thread)
                dropFailed.set(t);
            }
        });
        try {
            for (int i = 0; i < 60 && dropFailed.get() == null; i++) {
                byte[] data = fill(a.buf, 4096, i);
                IbvSendWr w = Mlx5VerbsTest.wr(IbvWrOpcode.RDMA_WRITE, a.buf, 4096, a.mr.lkey(), i);
                w.remoteAddr = b.buf + 8192;
                w.rkey = b.mr.rkey();
                a.qp.postSend(w);
                assertOk(a.cq, IbvWcOpcode.RDMA_WRITE);
                IbvSendWr w2 = Mlx5VerbsTest.wr(IbvWrOpcode.RDMA_WRITE, a.buf, 4096, a.mr.lkey(), i);
                w2.remoteAddr = b.buf + 65536;
                w2.rkey = b.mr.rkey();
                a.qp.postSend(w2);
                assertOk(a.cq, IbvWcOpcode.RDMA_WRITE);
                assertArrayEquals(data, read(b.buf + 8192, 4096), "write " + i);
                proc.madvise(b.buf, LEN, AddressSpace.Advice.MADV_DONTNEED); // the child goes to the background work
                writes.incrementAndGet();
            }
        } finally {
            stop.set(true);
            dropper.join(10_000);
        }
        if (dropFailed.get() != null) {
            throw new AssertionError("a drop failed", dropFailed.get());
        }
        assertTrue(drops.get() >= 1, "the second thread dropped too: " + drops.get());
        proc.madvise(b.buf, LEN, AddressSpace.Advice.MADV_DONTNEED);
        awaitChildren(m, 0);
        assertTrue(m.childrenCreated.get() >= 30, "children came and went: " + m);
        assertEquals(0, ibs.get(1).odpIfStarted().faultErrors.get(), "no fault failed");
    }

    /**
     * {@code PAGE_FAULT_RESUME} must name the WQ and the fault type the EQE gave (what
     * {@code mlx5_ib_page_fault_resume} fills in): with the driver's fault work held back (the test
     * holds the umem mutex its fault path takes), resumes naming another WQ, another type or an
     * unknown token are refused as bad parameters and resume nothing (the WQE stays stopped, no
     * completion); the driver's own resume then lets it complete, and a second resume of the same
     * token finds nothing pending.
     */
    @Test
    void aResumeNamingAnotherWqTypeOrTokenIsRefusedAndResumesNothing() throws Exception {
        End a = new End(0, ODP);
        End b = new End(1, ODP);
        connect(a, b);
        byte[] data = fill(a.buf, 4096, 7);
        Mlx5OdpMr m = a.odpMr();
        org.peerdirect.hca.cx4.PendingPageFault pf;
        m.umem.lock(); // the fault work blocks in map_dma_and_lock: the fault stays pending
        try {
            IbvSendWr w = Mlx5VerbsTest.wr(IbvWrOpcode.RDMA_WRITE, a.buf, 4096, a.mr.lkey(), 1);
            w.remoteAddr = b.buf;
            w.rkey = b.mr.rkey();
            a.qp.postSend(w);
            long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(10);
            while (models.get(0).pendingPageFaults().isEmpty()) {
                assertTrue(System.nanoTime() < deadline, "the requester faulted within 10 s: " + models.get(0).pageFaultsDescribe());
                Thread.onSpinWait();
            }
            pf = models.get(0).pendingPageFaults().getFirst();
            assertEquals(a.qp.qpNum(), pf.wqNumber(), "a WQE fault names the QP");
            for (int[] bad : new int[][] { { pf.token(), pf.wqNumber() ^ 1, pf.type(), 0 }, { pf.token(), pf.wqNumber(), pf.type() ^ 1, 0 },
                    { pf.token() + 0x100, pf.wqNumber(), pf.type(), 1 } }) {
                org.peerdirect.mlx5.core.Mlx5CmdException e = assertThrows(org.peerdirect.mlx5.core.Mlx5CmdException.class,
                        () -> cores.get(0).exec(resume(bad[0], bad[1], bad[2]), 16));
                assertEquals(org.peerdirect.hca.cx4.ifc.Mlx5Cmd.STAT_BAD_PARAM_ERR, e.status(), e.getMessage());
                assertTrue(e.getMessage().contains("PAGE_FAULT_RESUME"), e.getMessage());
            }
            assertEquals(List.of(pf), models.get(0).pendingPageFaults(), "the refused resumes resumed nothing");
            assertEquals(0, a.cq.poll(1, new IbvWc[] { new IbvWc() }), "the WQE is still stopped on its fault");
        } finally {
            m.umem.unlock();
        }
        assertOk(a.cq, IbvWcOpcode.RDMA_WRITE);
        assertArrayEquals(data, read(b.buf, 4096), "the driver's resume let the write go on");
        org.peerdirect.mlx5.core.Mlx5CmdException again = assertThrows(org.peerdirect.mlx5.core.Mlx5CmdException.class,
                () -> cores.get(0).exec(resume(pf.token(), pf.wqNumber(), pf.type()), 16));
        assertEquals(org.peerdirect.hca.cx4.ifc.Mlx5Cmd.STAT_BAD_PARAM_ERR, again.status(), again.getMessage());
        assertTrue(models.get(0).pageFaultsDescribe().contains("pending 0"), models.get(0).pageFaultsDescribe());
    }

    /** A {@code PAGE_FAULT_RESUME} input (no error flag). */
    static java.lang.foreign.MemorySegment resume(int token, int wq, int type) {
        java.lang.foreign.MemorySegment in = org.peerdirect.mlx5.core.Mlx5CoreDev.input(org.peerdirect.hca.cx4.ifc.Mlx5Cmd.PAGE_FAULT_RESUME, 0,
                org.peerdirect.hca.cx4.ifc.Odp.RESUME_IN_LEN);
        org.peerdirect.hca.cx4.ifc.Odp.RESUME_PAGE_FAULT_TYPE.set(in, 0, type);
        org.peerdirect.hca.cx4.ifc.Odp.RESUME_WQ_NUMBER.set(in, 0, wq);
        org.peerdirect.hca.cx4.ifc.Odp.RESUME_FAULT_TOKEN.set(in, 0, token);
        return in;
    }

    /**
     * A device that vanished while it held translations of an ODP MR: the application's
     * {@code madvise(DONTNEED)} lands while the driver's removal runs (the function is gone, the MR
     * not yet deregistered). The zapping UMR fails at once (the device is not up); as
     * {@code mlx5_ib_invalidate_range} ignores {@code mlx5r_umr_update_xlt}'s error, the callback
     * still unmaps the pages and returns: the madvise succeeds, and the disassociation then
     * deregisters the MR without waiting for an invalidation that never ends. Before the fix the
     * callback threw, the madvise failed and the invalidation never ended: the removal hung.
     */
    @Test
    void anInvalidationOnAVanishedDeviceStillUnmapsAndReturns() throws Exception {
        End a = new End(0, ODP);
        End b = new End(1, ODP);
        connect(a, b);
        byte[] data = fill(a.buf, 8 * 4096, 5);
        IbvSendWr w = Mlx5VerbsTest.wr(IbvWrOpcode.RDMA_WRITE, a.buf, data.length, a.mr.lkey(), 1);
        w.remoteAddr = b.buf;
        w.rkey = b.mr.rkey();
        a.qp.postSend(w);
        assertOk(a.cq, IbvWcOpcode.RDMA_WRITE);
        Mlx5OdpMr m = a.odpMr();
        assertTrue(m.umem.mappedPages() >= 8, "the requester faulted a's pages in for device 0: " + m);
        java.util.concurrent.atomic.AtomicReference<Object> madvise = new java.util.concurrent.atomic.AtomicReference<>("not run");
        java.util.concurrent.atomic.AtomicLong mappedAfter = new java.util.concurrent.atomic.AtomicLong(-1);
        fns.get(0).addRemovalListener(() -> { // the application's madvise, then what Mlx5Driver.remove does
            Thread app = Thread.ofPlatform().name("app-madvise").start(() -> {
                try {
                    proc.madvise(a.buf, LEN, AddressSpace.Advice.MADV_DONTNEED);
                    mappedAfter.set(m.umem.mappedPages());
                    madvise.set("ok");
                } catch (Throwable t) {
                    madvise.set(t);
                }
            });
            try {
                app.join(20_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            core.unregister(ibs.get(0));
            ibs.get(0).internalError();
            ibs.get(0).close();
            cores.get(0).unload();
        });
        unplugged.add(0);
        org.junit.jupiter.api.Assertions.assertTimeoutPreemptively(java.time.Duration.ofSeconds(30), () -> fns.get(0).remove(),
                "the removal ends");
        assertEquals("ok", madvise.get(), "the madvise succeeded on the vanished device");
        assertEquals(0, mappedAfter.get(), "the pages were unmapped for the gone device all the same");
        assertEquals(1, ibs.get(0).odpIfStarted().zapErrors.get(), "the failed zap is counted: " + ibs.get(0).odpIfStarted().describe());
        fill(a.buf, 4096, 6); // the address space goes on: the next invalidation finds nothing running
        proc.madvise(a.buf, LEN, AddressSpace.Advice.MADV_DONTNEED);
    }
}

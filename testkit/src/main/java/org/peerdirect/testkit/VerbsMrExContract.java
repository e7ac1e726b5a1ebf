package org.peerdirect.testkit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.function.Supplier;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.verbs.IbvDeviceAttr;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.ib.core.verbs.IbvMrInitAttr;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWcOpcode;
import org.peerdirect.ib.core.verbs.IbvWcStatus;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.kernel.mm.Vma;

/**
 * {@code ibv_reg_mr_ex} in the verbs contract: the checks of libibverbs'
 * {@code ibv_cmd_reg_mr_ex} and the kernel's {@code UVERBS_METHOD_REG_MR} (unknown
 * {@code comp_mask} bits, fields that do not go together, page offsets), a dma-buf registered
 * through it and written by RDMA, and rdma-core's {@code tests/test_odp.py} {@code test_mrex_*}
 * cases: ODP traffic over MRs registered with it (on fresh memory, so the device faults), on huge
 * pages, implicit, and RDMA FLUSH to an ODP MR. The ODP cases are skipped on a device without
 * ODP, as pyverbs' {@code requires_odp} does.
 *
 * @since 0.6
 */
public abstract class VerbsMrExContract extends VerbsLifecycleContract {

    private static final int ODP = RW | IbAccess.ON_DEMAND;

    private static void refused(Errno errno, Supplier<IbvMr> reg, String why) {
        KernelException e = assertThrows(KernelException.class, reg::get, why);
        assertEquals(errno, e.errno(), why + ": " + e.getMessage());
    }

    @Test
    void regMrExChecksItsAttributesAsLibibverbsAndTheKernelDo() {
        long va = process().mmap(1 << 16);
        refused(Errno.EINVAL, () -> a.pd.regMrEx(null), "no attributes");
        IbvMrInitAttr x = IbvMrInitAttr.addr(va, 1 << 16, RW);
        x.compMask |= 1L << 6;
        refused(Errno.EINVAL, () -> a.pd.regMrEx(x), "an unknown comp_mask bit");
        IbvMrInitAttr dmah = IbvMrInitAttr.addr(va, 1 << 16, RW);
        dmah.compMask |= IbvMrInitAttr.REG_MR_MASK_DMAH;
        refused(Errno.EOPNOTSUPP, () -> a.pd.regMrEx(dmah), "a DMA handle");
        IbvMrInitAttr none = IbvMrInitAttr.addr(va, 1 << 16, RW);
        none.compMask = 0;
        refused(Errno.EINVAL, () -> a.pd.regMrEx(none), "neither an address nor a dma-buf");
        IbvMrInitAttr offsetOnly = IbvMrInitAttr.addr(va, 1 << 16, RW);
        offsetOnly.compMask |= IbvMrInitAttr.REG_MR_MASK_FD_OFFSET;
        refused(Errno.EINVAL, () -> a.pd.regMrEx(offsetOnly), "FD_OFFSET without FD");
        IbvMrInitAttr both = IbvMrInitAttr.dmabuf(0, 0, 1 << 16, 0, RW);
        both.compMask |= IbvMrInitAttr.REG_MR_MASK_ADDR;
        refused(Errno.EINVAL, () -> a.pd.regMrEx(both), "FD and ADDR together");
        IbvMrInitAttr noOffset = IbvMrInitAttr.dmabuf(0, 0, 1 << 16, 0, RW);
        noOffset.compMask &= ~IbvMrInitAttr.REG_MR_MASK_FD_OFFSET;
        refused(Errno.EINVAL, () -> a.pd.regMrEx(noOffset), "FD without FD_OFFSET");
        IbvMrInitAttr noIova = IbvMrInitAttr.dmabuf(0, 0, 1 << 16, 0, RW);
        noIova.compMask &= ~IbvMrInitAttr.REG_MR_MASK_IOVA;
        refused(Errno.EINVAL, () -> a.pd.regMrEx(noIova), "FD without IOVA (iova is a must for the kernel)");
        IbvMrInitAttr offsets = IbvMrInitAttr.addr(va, 1 << 16, RW);
        offsets.compMask |= IbvMrInitAttr.REG_MR_MASK_IOVA;
        offsets.iova = va + 8;
        refused(Errno.EINVAL, () -> a.pd.regMrEx(offsets), "address and iova with different page offsets");
        IbvMrInitAttr implicitAt = IbvMrInitAttr.addr(va, -1L, ODP);
        refused(Errno.EINVAL, () -> a.pd.regMrEx(implicitAt), "implicit ODP (length SIZE_MAX) at an address");
        refused(Errno.EINVAL, () -> a.pd.regMrEx(IbvMrInitAttr.addr(va, 1 << 16, IbAccess.REMOTE_WRITE)),
                "ib_check_mr_access: remote write without local write");
        IbvMrInitAttr atDmah = IbvMrInitAttr.addr(va, 1 << 16, RW);
        atDmah.compMask |= IbvMrInitAttr.REG_MR_MASK_IOVA;
        atDmah.iova = -4096L + (va & 4095);
        refused(Errno.EINVAL, () -> a.pd.regMrEx(atDmah), "an iova range that overflows");
        IbvMrInitAttr same = IbvMrInitAttr.addr(va, 1 << 16, RW);
        same.compMask |= IbvMrInitAttr.REG_MR_MASK_IOVA;
        same.iova = va; // the iova ibv_reg_mr uses
        IbvMr mr = a.pd.regMrEx(same);
        assertEquals(va, mr.addr());
        assertEquals(1 << 16, mr.length());
        assertEquals(RW, mr.access());
        mr.dereg();
    }

    /**
     * {@code ibv_reg_mr_iova} through {@code ibv_reg_mr_ex}: a pinned MR seen through its keys at
     * another address with the same page offset; an RDMA WRITE to the iova lands at the address.
     */
    @Test
    void regMrExAtAnotherIovaIsReachedThroughIt() {
        long va = process().mmap(1 << 16);
        process().populate(va, 1 << 16, true);
        long iova = 0x5_0000_0000L + (va & 4095);
        IbvMrInitAttr x = IbvMrInitAttr.addr(va, 1 << 16, RW);
        x.compMask |= IbvMrInitAttr.REG_MR_MASK_IOVA;
        x.iova = iova;
        IbvMr mr = a.pd.regMrEx(x);
        assertEquals(va, mr.addr(), "ibv_mr.addr is the address; the keys see the iova");
        writeAndReadBack(mr, iova + 300, 6000, 21);
        byte[] got = new byte[6000];
        process().read(va + 300, got, 0, 6000);
        assertArrayEquals(pattern(6000, 21), got, "the bytes at the address");
        IbvSendWr w = wr(IbvWrOpcode.RDMA_WRITE, b, 0, 64, 3);
        w.remoteAddr = va + 300; // the address itself is outside [iova, iova+length)
        w.rkey = mr.rkey();
        IbvQp[] q = rcPair(7, null);
        q[1].postSend(w);
        assertEquals(IbvWcStatus.REM_ACCESS_ERR, await1(b.cq).status, "the process's address is not a key address");
        mr.dereg();
    }

    /** The registered range works: an RDMA WRITE from {@link #b} lands, an RDMA READ reads it back. */
    private void writeAndReadBack(IbvMr target, long targetAddr, int n, int seed) {
        IbvQp[] q = rcPair(7, null);
        byte[] data = pattern(n, seed);
        b.write(0, data);
        IbvSendWr w = wr(IbvWrOpcode.RDMA_WRITE, b, 0, n, 1);
        w.remoteAddr = targetAddr;
        w.rkey = target.rkey();
        q[1].postSend(w);
        IbvWc c = await1(b.cq);
        assertEquals(IbvWcStatus.SUCCESS, c.status, c.toString());
        IbvSendWr r = wr(IbvWrOpcode.RDMA_READ, b, 8192, n, 2);
        r.remoteAddr = targetAddr;
        r.rkey = target.rkey();
        q[1].postSend(r);
        c = await1(b.cq);
        assertEquals(IbvWcStatus.SUCCESS, c.status, c.toString());
        assertArrayEquals(data, b.read(8192, n), "read back what was written");
    }

    @Test
    void regMrExOfADmabufIsWrittenThroughItsIova() {
        HostDmaBuf buf = HostDmaBuf.export(mm(), 1 << 16);
        int fd = buf.fd(process());
        try {
            IbvMr mr;
            try {
                mr = a.pd.regMrEx(IbvMrInitAttr.dmabuf(fd, 4096, 8192, 0x7000_0000L, RW));
            } catch (KernelException e) {
                Assumptions.assumeTrue(e.errno() != Errno.EOPNOTSUPP, "the driver has no reg_user_mr_dmabuf: " + e.getMessage());
                throw e;
            }
            // the kernel looks at the offsets only for a driver with the op (else EOPNOTSUPP first)
            refused(Errno.EINVAL, () -> a.pd.regMrEx(IbvMrInitAttr.dmabuf(fd, 4096, 4096, 0x7000_0800L, RW)),
                    "fd_offset and iova with different page offsets");
            assertEquals(0x7000_0000L, mr.addr(), "a dma-buf MR's address is its iova");
            writeAndReadBack(mr, 0x7000_0000L + 100, 5000, 11);
            byte[] data = pattern(5000, 11);
            for (int i = 0; i < data.length; i += 997) {
                assertEquals(data[i], buf.get(4096 + 100 + i), "byte " + i + " in the buffer, past fd_offset");
            }
            mr.dereg();
        } finally {
            try {
                process().close(fd);
            } catch (Exception e) {
                throw new AssertionError(e);
            }
        }
    }

    private IbvDeviceAttr.OdpCaps odp(int needRc) {
        IbvDeviceAttr d = a.attr();
        IbvDeviceAttr.OdpCaps c = d.odpCaps();
        Assumptions.assumeTrue((c.generalCaps() & IbvDeviceAttr.ODP_SUPPORT) != 0 && (c.rcOdpCaps() & needRc) == needRc,
                "the device has no RC ODP for 0x" + Integer.toHexString(needRc));
        return c;
    }

    /**
     * pyverbs' {@code traffic}: {@code iters} SENDs from {@link #a} to {@link #b} through MRs
     * registered on demand over memory the device has never seen, each validated.
     */
    private void odpSendTraffic(IbvMr ma, long va, IbvMr mb, long vb, int n, int iters) {
        IbvQp qa = a.qp(IbvQpType.RC, null);
        IbvQp qb = b.qp(IbvQpType.RC, null);
        connect(qa, qb, 7);
        for (int i = 0; i < iters; i++) {
            byte[] data = pattern(n, i);
            process().write(va, data, 0, n);
            qb.postRecv(new org.peerdirect.ib.core.verbs.IbvRecvWr().sge(vb, n, mb.lkey()));
            IbvSendWr s = new IbvSendWr().sge(va, n, ma.lkey());
            s.opcode = IbvWrOpcode.SEND;
            s.sendFlags = IbvSendWr.SEND_SIGNALED;
            s.wrId = i;
            qa.postSend(s);
            IbvWc c = await1(a.cq);
            assertEquals(IbvWcStatus.SUCCESS, c.status, c.toString());
            c = await1(b.cq);
            assertEquals(IbvWcStatus.SUCCESS, c.status, c.toString());
            assertEquals(IbvWcOpcode.RECV, c.opcode);
            byte[] got = new byte[n];
            process().read(vb, got, 0, n);
            assertArrayEquals(data, got, "iteration " + i);
        }
    }

    /** test_odp.py's {@code test_mrex_odp_rc_traffic}. */
    @Test
    void mrexOdpRcTraffic() {
        odp(IbvDeviceAttr.OdpCaps.SUPPORT_SEND | IbvDeviceAttr.OdpCaps.SUPPORT_RECV);
        long va = process().mmap(1 << 16);
        long vb = process().mmap(1 << 16);
        IbvMr ma = a.pd.regMrEx(IbvMrInitAttr.addr(va, 1 << 16, ODP));
        IbvMr mb = b.pd.regMrEx(IbvMrInitAttr.addr(vb, 1 << 16, ODP));
        odpSendTraffic(ma, va, mb, vb, 1024, 10);
    }

    /** test_odp.py's {@code test_mrex_odp_rc_huge_traffic}: ODP over huge pages, {@code IBV_ACCESS_HUGETLB}. */
    @Test
    void mrexOdpRcHugeTraffic() {
        odp(IbvDeviceAttr.OdpCaps.SUPPORT_SEND | IbvDeviceAttr.OdpCaps.SUPPORT_RECV);
        long len = 2L << 20;
        long va = process().mmap(0, len, Vma.PROT_READ | Vma.PROT_WRITE, Vma.Kind.HUGETLB, "[hugetlb]");
        long vb = process().mmap(0, len, Vma.PROT_READ | Vma.PROT_WRITE, Vma.Kind.HUGETLB, "[hugetlb]");
        IbvMr ma = a.pd.regMrEx(IbvMrInitAttr.addr(va, len, ODP | IbAccess.HUGETLB));
        IbvMr mb = b.pd.regMrEx(IbvMrInitAttr.addr(vb, len, ODP | IbAccess.HUGETLB));
        odpSendTraffic(ma, va, mb, vb, 1024, 10);
    }

    /** test_odp.py's {@code test_mrex_odp_implicit_rc_traffic}: both sides' implicit MRs, registered with address 0 and SIZE_MAX. */
    @Test
    void mrexOdpImplicitRcTraffic() {
        IbvDeviceAttr.OdpCaps c = odp(IbvDeviceAttr.OdpCaps.SUPPORT_SEND | IbvDeviceAttr.OdpCaps.SUPPORT_RECV);
        Assumptions.assumeTrue((c.generalCaps() & IbvDeviceAttr.ODP_SUPPORT_IMPLICIT) != 0, "the device has no implicit ODP");
        IbvMr ia = a.pd.regMrEx(IbvMrInitAttr.addr(0, -1L, ODP));
        IbvMr ib = b.pd.regMrEx(IbvMrInitAttr.addr(0, -1L, ODP));
        long va = process().mmap(1 << 16);
        long vb = process().mmap(1 << 16);
        odpSendTraffic(ia, va, ib, vb, 1024, 10);
    }

    /**
     * test_odp.py's {@code test_mrex_odp_qp_ex_rc_flush}: RDMA FLUSH (global visibility) to an
     * ODP MR registered with {@code IBV_ACCESS_FLUSH_GLOBAL}, range level then MR level.
     */
    @Test
    void mrexOdpRcFlush() {
        odp(IbvDeviceAttr.OdpCaps.SUPPORT_FLUSH);
        Assumptions.assumeTrue((a.attr().deviceCapFlagsEx() & IbvDeviceAttr.DEVICE_FLUSH_GLOBAL) != 0, "the device has no global FLUSH");
        int access = IbAccess.LOCAL_WRITE | IbAccess.REMOTE_WRITE | IbAccess.FLUSH_GLOBAL | IbAccess.ON_DEMAND;
        long vb = process().mmap(1 << 16);
        IbvMr mb = b.pd.regMrEx(IbvMrInitAttr.addr(vb, 1 << 16, access));
        IbvQp qa = a.qp(IbvQpType.RC, null);
        IbvQp qb = b.qp(IbvQpType.RC, null);
        connect(qa, qb, 7, RW | IbAccess.FLUSH_GLOBAL);
        IbvSendWr f = new IbvSendWr();
        f.opcode = IbvWrOpcode.FLUSH;
        f.sendFlags = IbvSendWr.SEND_SIGNALED;
        f.remoteAddr = vb;
        f.rkey = mb.rkey();
        f.flushLength = 4096;
        f.flushType = IbvSendWr.FLUSH_GLOBAL;
        f.flushLevel = IbvSendWr.FLUSH_RANGE;
        f.wrId = 1;
        qa.postSend(f);
        IbvWc c = await1(a.cq);
        assertEquals(IbvWcStatus.SUCCESS, c.status, "FLUSH of a range: " + c);
        assertEquals(IbvWcOpcode.FLUSH, c.opcode);
        f.flushLevel = IbvSendWr.FLUSH_MR;
        f.wrId = 2;
        qa.postSend(f);
        c = await1(a.cq);
        assertEquals(IbvWcStatus.SUCCESS, c.status, "FLUSH of the MR: " + c);
    }
}

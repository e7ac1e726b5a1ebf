package org.peerdirect.mlx4;

import org.peerdirect.ib.core.provider.IbAhOps;
import org.peerdirect.ib.core.provider.IbCqOps;
import org.peerdirect.ib.core.provider.IbEvents;
import org.peerdirect.ib.core.provider.IbMrOps;
import org.peerdirect.ib.core.provider.IbPdOps;
import org.peerdirect.ib.core.provider.IbQpOps;
import org.peerdirect.ib.core.provider.IbSrqOps;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.umem.IbUmem;
import org.peerdirect.ib.core.umem.UmemService;
import org.peerdirect.ib.core.verbs.IbvQpInitAttr;
import org.peerdirect.kernel.dma.SgTable;

import org.peerdirect.hca.cx3.ifc.MptEntry;
import org.peerdirect.mlx4.core.Mr;

/** {@code struct mlx4_ib_pd}: a PD number and the objects created in it. */
final class Mlx4Pd implements IbPdOps {

    final Mlx4Context ctx;
    final int pdn;

    Mlx4Pd(Mlx4Context ctx, int pdn) {
        this.ctx = ctx;
        this.pdn = pdn;
    }

    /** IB access flags to the MPT entry's {@code mlx4_perm} bits (local read always, as mlx4_ib_convert_access). */
    static int perm(int access) {
        int p = MptEntry.PERM_LOCAL_READ;
        if ((access & IbAccess.LOCAL_WRITE) != 0) {
            p |= MptEntry.PERM_LOCAL_WRITE;
        }
        if ((access & IbAccess.REMOTE_READ) != 0) {
            p |= MptEntry.PERM_REMOTE_READ;
        }
        if ((access & IbAccess.REMOTE_WRITE) != 0) {
            p |= MptEntry.PERM_REMOTE_WRITE;
        }
        if ((access & IbAccess.REMOTE_ATOMIC) != 0) {
            p |= MptEntry.PERM_ATOMIC;
        }
        return p;
    }

    /**
     * {@code mlx4_ib_reg_user_mr}: the umem (pinned, or peer with invalidation support), the MPT
     * entry with its MTT, then the invalidation notifier, which revokes the MPT before it returns
     * (OFED's mlx4 peer invalidation).
     */
    @Override
    public IbMrOps regUserMr(long addr, long length, int access) {
        return regUserMr(addr, length, addr, access);
    }

    /**
     * {@code mlx4_ib_reg_user_mr} with its {@code virt_addr}: the umem over [addr, addr+length)
     * of the process, the MPT's start address {@code iova} (the core checked the page offsets
     * agree), so the keys reach the memory through the iova.
     */
    @Override
    public IbMrOps regUserMr(long addr, long length, long iova, int access) {
        Mlx4Device dev = ctx.dev;
        IbUmem umem = dev.umems.umemGet(ctx.process, dev, addr, length, access,
                UmemService.IB_PEER_MEM_ALLOW | UmemService.IB_PEER_MEM_INVAL_SUPP);
        Mr.Region region;
        try {
            region = dev.core.mr.enable(pdn, iova, length, perm(access), pages(umem.dmaBlocks()));
        } catch (RuntimeException e) {
            umem.stopInvalidationNotifier();
            umem.release();
            throw e;
        }
        Mlx4Mr mr = new Mlx4Mr(this, umem, region);
        try {
            umem.activateInvalidationNotifier(u -> mr.revokeOnInvalidate());
        } catch (RuntimeException e) {
            // the IB core revoked the umem meanwhile (it is stopping): undo the key and the umem
            mr.deregMr();
            throw e;
        }
        return mr;
    }

    /** The umem's DMA blocks as 4 KiB pages, the MTT's entries ({@code mlx4_ib_umem_write_mtt}). */
    static long[] pages(SgTable b) {
        long n = 0;
        for (int i = 0; i < b.nents(); i++) {
            n += (b.length(i) + 4095) >>> 12;
        }
        long[] pages = new long[(int) n];
        int k = 0;
        for (int i = 0; i < b.nents(); i++) {
            for (long off = 0; off < b.length(i); off += 4096) {
                pages[k++] = b.dmaAddress(i) + off;
            }
        }
        return pages;
    }

    /** {@code mlx4_ib_create_qp} ({@link Mlx4IbQp#create}). */
    @Override
    public IbQpOps createQp(IbvQpInitAttr a, IbCqOps sendCq, IbCqOps recvCq, IbSrqOps srq, IbEvents events) {
        return Mlx4IbQp.create(this, a, (Mlx4Cq) sendCq, (Mlx4Cq) recvCq, (Mlx4IbSrq) srq, events);
    }

    /** {@code mlx4_ib_create_srq} ({@link Mlx4IbSrq#create}). */
    @Override
    public IbSrqOps createSrq(int maxWr, int maxSge, IbEvents events) {
        return Mlx4IbSrq.create(this, maxWr, maxSge, events);
    }

    @Override
    public IbAhOps createAh(org.peerdirect.ib.core.verbs.IbvAhAttr a) {
        ctx.dev.checkPort(a.portNum);
        return IbAhOps.addressVector(a); // InfiniBand ports: the LID routes; a GRH is carried in the AV, not needed inside the subnet
    }

    @Override
    public void deallocPd() {
        ctx.dev.freePdn(pdn);
    }
}

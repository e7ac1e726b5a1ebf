package org.peerdirect.rdma.tools;

import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvDeviceAttr;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.mm.Vma;
import org.peerdirect.peermem.alloc.PeerMemoryAllocator;

/**
 * A tool's data buffer and its memory region, over the three memories the tools offer: host
 * memory (pinned, or registered on demand), a peer device's memory through its peer client (or as
 * a dma-buf), and host huge pages. The allocation and the registration are apart because a peer
 * buffer may be freed under its MR ({@code rdma:invalidate_test}).
 */
final class Buffers {

    /** How a host buffer is registered: pinned, on demand over the buffer, or by one implicit ODP MR over the address space. */
    enum Odp {
        NONE, EXPLICIT,
        /** {@code ibv_rc_pingpong -O}: {@code ibv_reg_mr(pd, NULL, SIZE_MAX, ON_DEMAND)}; the buffer's addresses are used with its keys. */
        IMPLICIT
    }

    private Buffers() {
    }

    /** {@code size} rounded up to whole 2 MiB pages (perftest rounds its buffer so for {@code --use_hugepages}). */
    static long hugeRound(long size) {
        return (size + Mm.HPAGE_SIZE - 1) & -Mm.HPAGE_SIZE;
    }

    /**
     * The buffer of {@code size} bytes: from {@code peer} when given (at the fixed device offset
     * {@code peerOffset} when at least 0, as an SSD's persistent region; else a fresh
     * allocation), else host memory. EINVAL for on-demand paging of peer memory, which its client pins.
     */
    static long alloc(AddressSpace proc, long size, PeerMemoryAllocator peer, long peerOffset, boolean huge, boolean odp) {
        if (peer != null && odp) {
            throw new KernelException(KernelException.Errno.EINVAL, "on-demand paging (-o) works on host memory; peer memory is pinned by its client");
        }
        if (peer != null) {
            return peerOffset >= 0 ? peer.map(proc.pid(), peerOffset, size) : peer.alloc(proc.pid(), size);
        }
        return host(proc, size, huge, odp);
    }

    /**
     * Host memory: an anonymous mapping, or a hugetlb one ({@code MAP_HUGETLB}; {@code size} whole
     * 2 MiB pages), populated unless it is to be registered on demand (ODP: the device faults the pages in).
     */
    static long host(AddressSpace proc, long size, boolean huge, boolean odp) {
        long buf = huge ? proc.mmap(0, size, Vma.PROT_READ | Vma.PROT_WRITE, Vma.Kind.HUGETLB, "[hugetlb]") : proc.mmap(size);
        if (!odp) {
            proc.populate(buf, size, true);
        }
        return buf;
    }

    /**
     * The MR over the buffer: a dma-buf MR of the peer buffer exported as a dma-buf (iova = the
     * buffer's address, as perftest {@code --use_cuda --use_cuda_dmabuf}), one implicit ODP MR
     * over the whole address space, or an MR over the buffer with {@code access} and {@code extra}
     * (rights only this buffer's MR gets: FLUSH, HUGETLB), on demand for {@link Odp#EXPLICIT}. EINVAL for a dma-buf of host memory, EOPNOTSUPP for implicit ODP on a
     * device without it.
     */
    static IbvMr register(AddressSpace proc, IbvContext c, IbvPd pd, long buf, long size, PeerMemoryAllocator peer, boolean dmabuf,
            Odp odp, int access, int extra) {
        if (dmabuf && peer == null) {
            throw new KernelException(KernelException.Errno.EINVAL, "--dmabuf registers peer memory exported as a dma-buf: give --mem <peer client>");
        }
        if (dmabuf) {
            int fd = peer.exportDmabuf(proc.pid(), buf, size);
            try {
                return pd.regDmabufMr(0, size, buf, fd, access);
            } finally {
                closeQuietly(proc, fd); // the MR's attachment holds the buffer; the descriptor is not needed
            }
        }
        if (odp == Odp.IMPLICIT) {
            if ((c.queryDeviceEx().odpCaps().generalCaps() & IbvDeviceAttr.ODP_SUPPORT_IMPLICIT) == 0) {
                throw new KernelException(KernelException.Errno.EOPNOTSUPP, c.device().name() + ": The device isn't supporting implicit ODP (-O)");
            }
            return pd.regMr(0, -1L, access | IbAccess.ON_DEMAND);
        }
        return pd.regMr(buf, size, access | extra | (odp == Odp.EXPLICIT ? IbAccess.ON_DEMAND : 0));
    }

    private static void closeQuietly(AddressSpace proc, int fd) {
        try {
            proc.close(fd);
        } catch (Exception alreadyClosed) {
            // closed by the process's exit
        }
    }
}

package org.peerdirect.ssd.nvme;

import java.util.HashMap;
import java.util.Map;

import org.peerdirect.kernel.dma.DmaDirection;
import org.peerdirect.kernel.dma.SgTable;
import org.peerdirect.kernel.dmabuf.DmaBuf;
import org.peerdirect.kernel.dmabuf.DmaBufAttachment;
import org.peerdirect.kernel.dmabuf.DmaBufOps;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;

/**
 * An exported PMR range ({@code NvmePmr.exportDmabuf}): a window of the PMR BAR mapped for each
 * importer ({@code dma_map_resource}, peer to peer only); the PMR never moves it, so it is never
 * moved for an importer either, only revoked when the controller goes. Its last reference gone,
 * the range it kept reserved is given back ({@code NvmePmr.released}).
 *
 * <p>Lock: the maps are guarded by the {@link NvmePmr}'s monitor.
 */
final class PmrDmaBuf implements DmaBufOps {
    private final NvmePmr pmr;
    final NvmePmr.Region region;
    final long pmrOffset;
    final long length;
    final Map<DmaBufAttachment, Long> maps = new HashMap<>();
    DmaBuf buf;

    PmrDmaBuf(NvmePmr pmr, NvmePmr.Region region, long pmrOffset, long length) {
        this.pmr = pmr;
        this.region = region;
        this.pmrOffset = pmrOffset;
        this.length = length;
    }

    @Override
    public void attach(DmaBufAttachment a) {
        if (!a.importerOps().allowPeer2Peer()) {
            throw new KernelException(Errno.EOPNOTSUPP, pmr.name() + ": the PMR is reachable only peer to peer; " + a.importerName()
                    + " does not allow peer2peer");
        }
    }

    @Override
    public SgTable map(DmaBufAttachment a, DmaDirection dir) {
        synchronized (pmr) {
            if (!pmr.function().present()) {
                throw new KernelException(Errno.ENODEV, pmr.name() + ": the controller is gone");
            }
            long iova = a.importer().dmaMapResource(pmr.function().resource(pmr.bar()), pmrOffset, length, dir);
            maps.put(a, iova);
            return SgTable.of(new long[] {iova}, new long[] {length});
        }
    }

    @Override
    public void unmap(DmaBufAttachment a, SgTable sg, DmaDirection dir) {
        synchronized (pmr) {
            Long iova = maps.remove(a);
            if (iova != null) {
                a.importer().dmaUnmap(iova, (int) (length / NvmePmr.PAGE));
            }
        }
    }

    @Override
    public void release(DmaBuf b) {
        pmr.released(this);
    }
}

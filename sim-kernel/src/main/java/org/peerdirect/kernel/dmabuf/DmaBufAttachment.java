package org.peerdirect.kernel.dmabuf;

import org.peerdirect.kernel.dma.DmaDirection;
import org.peerdirect.kernel.dma.DmaMapper;
import org.peerdirect.kernel.dma.SgTable;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;

/**
 * {@code struct dma_buf_attachment}: one importer device attached to a {@link DmaBuf}. Its map,
 * unmap, pin and unpin need the buffer's reservation lock ({@code dma_buf_map_attachment} and
 * friends assert {@code dma_resv_assert_held}); detach does not.
 */
public final class DmaBufAttachment {

    private final DmaBuf buf;
    private final DmaMapper importer;
    private final String importerName;
    private final DmaBufImporterOps importerOps;
    private final Object importerPriv;
    /** Guarded by the reservation lock. */
    private SgTable sg;
    private DmaDirection dir;
    private boolean pinned;
    private volatile boolean detached;

    DmaBufAttachment(DmaBuf buf, DmaMapper importer, String importerName, DmaBufImporterOps importerOps, Object importerPriv) {
        this.buf = buf;
        this.importer = importer;
        this.importerName = importerName;
        this.importerOps = importerOps;
        this.importerPriv = importerPriv;
    }

    public DmaBuf dmabuf() {
        return buf;
    }

    /** The importing device's DMA API (its IOMMU domain): where the exporter maps the buffer. */
    public DmaMapper importer() {
        return importer;
    }

    public String importerName() {
        return importerName;
    }

    public DmaBufImporterOps importerOps() {
        return importerOps;
    }

    /** {@code importer_priv}. */
    public Object importerPriv() {
        return importerPriv;
    }

    private void checkResv(String what) {
        if (!buf.resvHeldByCurrentThread()) {
            throw new IllegalStateException(what + " of " + buf + " without its reservation lock");
        }
        if (detached) {
            throw new KernelException(Errno.EINVAL, what + ": the attachment of " + importerName + " to " + buf + " is detached");
        }
    }

    /**
     * {@code dma_buf_map_attachment}: the whole buffer mapped into the importer's domain; page-aligned
     * entries covering {@link DmaBuf#size()}. Reservation lock held.
     *
     * @throws KernelException ENODEV when the buffer was revoked; EBUSY when already mapped
     */
    public SgTable map(DmaDirection direction) {
        checkResv("dma_buf_map_attachment");
        if (buf.revoked()) {
            throw new KernelException(Errno.ENODEV, buf + " is revoked: its exporter's device is gone");
        }
        if (sg != null) {
            throw new KernelException(Errno.EBUSY, buf + " is already mapped for " + importerName);
        }
        SgTable t = buf.ops().map(this, direction);
        if (t.firstMisaligned() >= 0 || t.totalLength() != buf.size()) {
            buf.ops().unmap(this, t, direction);
            throw new KernelException(Errno.EINVAL, String.format("%s: the exporter's table is not %d bytes of page-aligned entries", buf, buf.size()));
        }
        sg = t;
        dir = direction;
        return t;
    }

    /** {@code dma_buf_unmap_attachment}: reservation lock held; {@code table} is what {@link #map} returned. */
    public void unmap(SgTable table) {
        checkResv("dma_buf_unmap_attachment");
        if (sg == null || table != sg) {
            throw new KernelException(Errno.EINVAL, buf + ": unmap of a table that is not the attachment's mapping");
        }
        sg = null;
        buf.ops().unmap(this, table, dir);
    }

    /** Mapped now (read under the reservation lock for a stable answer). */
    public boolean mapped() {
        return sg != null;
    }

    /** The mapping now, or null. */
    public SgTable table() {
        return sg;
    }

    /** {@code dma_buf_pin}: reservation lock held; the exporter may not move the buffer until unpinned. */
    public void pin() {
        checkResv("dma_buf_pin");
        if (buf.revoked()) {
            throw new KernelException(Errno.ENODEV, buf + " is revoked: its exporter's device is gone");
        }
        if (!pinned) {
            buf.ops().pin(this);
            pinned = true;
        }
    }

    /** {@code dma_buf_unpin}: reservation lock held. */
    public void unpin() {
        checkResv("dma_buf_unpin");
        if (pinned) {
            pinned = false;
            buf.ops().unpin(this);
        }
    }

    public boolean pinned() {
        return pinned;
    }

    /**
     * {@code dma_buf_detach}: the attachment goes and its buffer reference with it. The importer
     * unmaps and unpins first.
     *
     * @throws KernelException EBUSY when still mapped or pinned
     */
    public void detach() {
        buf.lockResv();
        try {
            if (detached) {
                return;
            }
            if (sg != null || pinned) {
                throw new KernelException(Errno.EBUSY, importerName + " detaches from " + buf + " while it is still " + (sg != null ? "mapped" : "pinned"));
            }
            detached = true;
        } finally {
            buf.unlockResv();
        }
        buf.detached(this);
    }
}

package org.peerdirect.ib.core.umem.impl;

import java.util.function.Consumer;

import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.umem.IbUmemDmabuf;
import org.peerdirect.kernel.dma.DmaDevice;
import org.peerdirect.kernel.dma.DmaDirection;
import org.peerdirect.kernel.dma.SgTable;
import org.peerdirect.kernel.dmabuf.DmaBuf;
import org.peerdirect.kernel.dmabuf.DmaBufAttachment;
import org.peerdirect.kernel.dmabuf.DmaBufImporterOps;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.ib.core.jfr.IbCoreEvents;

/**
 * {@code drivers/infiniband/core/umem_dmabuf.c}: a registered range of a dma-buf.
 *
 * <p>Dynamic: attached with {@code allow_peer2peer} and the driver's {@code move_notify}; the
 * driver maps ({@link #mapPages}) when it needs the translation and the exporter's move makes it
 * unmap. Pinned: {@code dma_buf_pin} and one map at creation; the exporter's {@code move_notify}
 * only warns ("Invalidate callback should not be called when memory is pinned"), unless the
 * import is revocable, where it runs the driver's revoke and then unmaps and unpins.
 *
 * <p>Lock rules: the buffer's reservation lock guards {@link #sgt}, {@link #revoked}; the
 * exporter calls {@code move_notify} holding it.
 */
final class UmemDmabuf implements IbUmemDmabuf {

    private static final long PAGE = 4096;
    /** {@code dma_resv_wait_timeout} is unbounded in the kernel; a fault here gives up after this (ETIMEDOUT). */
    static final java.time.Duration FENCE_TIMEOUT = java.time.Duration.ofSeconds(10);

    private final DmaBuf buf;
    private final long offset;
    private final long length;
    private final int access;
    private final boolean pinned;
    private final Consumer<IbUmemDmabuf> driverOps;
    private final DmaBufAttachment attachment;
    /** The whole buffer's mapping (the exporter's table), or null. Reservation lock. */
    private SgTable sgt;
    /**
     * The DMA address of each 4 KiB page of [ALIGN_DOWN(offset), ALIGN(offset+length)) while
     * mapped (the kernel's trimmed SG list): computed once per map, so a driver asking page by page
     * does not walk the table each time.
     */
    private volatile long[] pageDma;
    private boolean revoked;
    private boolean released;

    private UmemDmabuf(DmaBuf buf, DmaDevice device, long offset, long length, int access, boolean pinned, Consumer<IbUmemDmabuf> driverOps) {
        this.buf = buf;
        this.offset = offset;
        this.length = length;
        this.access = access;
        this.pinned = pinned;
        this.driverOps = driverOps;
        this.attachment = buf.dynamicAttach(device.dma(), device.name(), new DmaBufImporterOps() {
            @Override
            public boolean allowPeer2Peer() {
                return true;
            }

            @Override
            public void moveNotify(DmaBufAttachment a) {
                moved();
            }

            @Override
            public boolean revocable() {
                return UmemDmabuf.this.pinned && UmemDmabuf.this.driverOps != null;
            }
        }, this);
    }

    /**
     * {@code ib_umem_dmabuf_get}: the checks, the buffer by descriptor, the attachment.
     *
     * @param driverOps dynamic: {@code move_notify} (required); pinned: the revoke callback, or null (not revocable)
     */
    static UmemDmabuf get(AddressSpace mm, DmaDevice device, long offset, long size, int fd, int access, boolean pinned,
            Consumer<IbUmemDmabuf> driverOps) {
        String fn = pinned ? "ib_umem_dmabuf_get_pinned" : "ib_umem_dmabuf_get";
        if (size <= 0 || offset < 0 || offset + size < offset) {
            throw new KernelException(Errno.EINVAL, String.format("%s: offset %d + size %d is empty or overflows", fn, offset, size));
        }
        if (!pinned && driverOps == null) {
            throw new KernelException(Errno.EINVAL, fn + ": a dynamic import needs the driver's move_notify");
        }
        DmaBuf buf = DmaBuf.get(mm, fd);
        try {
            if (buf.size() < offset + size) {
                throw new KernelException(Errno.EINVAL, String.format("%s: offset %d + size %d is past the end of %s", fn, offset, size, buf));
            }
            UmemDmabuf u = new UmemDmabuf(buf, device, offset, size, access, pinned, driverOps);
            if (pinned) {
                u.lock();
                try {
                    u.attachment.pin();
                    u.mapPages();
                } catch (RuntimeException e) {
                    if (u.attachment.pinned()) {
                        u.attachment.unpin();
                    }
                    u.unlock();
                    u.attachment.detach();
                    throw e;
                }
                u.unlock();
            }
            return u;
        } finally {
            buf.put(); // dma_buf_get's reference: the attachment holds its own
        }
    }

    /** The exporter's {@code move_notify} (reservation lock held). */
    private void moved() {
        assert buf.resvHeldByCurrentThread();
        IbCoreEvents.DmabufMoveNotify jfr = IbCoreEvents.DmabufMoveNotify.start();
        try {
            movedLocked();
        } finally {
            IbCoreEvents.DmabufMoveNotify.done(jfr, buf, offset, length(), pinned);
        }
    }

    private void movedLocked() {
        if (!pinned) {
            driverOps.accept(this); // the driver zaps its translation, then unmaps
            unmapPages();
            return;
        }
        if (driverOps == null) {
            System.getLogger("org.peerdirect.ib.core").log(System.Logger.Level.WARNING,
                    "Invalidate callback should not be called when memory is pinned (" + buf + ")");
            return;
        }
        driverOps.accept(this); // revocable pinned: the device stops using it
        revoke();
    }

    @Override
    public long offset() {
        return offset;
    }

    @Override
    public long length() {
        return length;
    }

    @Override
    public boolean writable() {
        return IbAccess.writable(access);
    }

    @Override
    public boolean pinned() {
        return pinned;
    }

    @Override
    public DmaBuf dmabuf() {
        return buf;
    }

    @Override
    public void lock() {
        buf.lockResv();
    }

    @Override
    public void unlock() {
        buf.unlockResv();
    }

    @Override
    public boolean isLockedByCurrentThread() {
        return buf.resvHeldByCurrentThread();
    }

    @Override
    public void mapPages() {
        assert buf.resvHeldByCurrentThread() : "ib_umem_dmabuf_map_pages without the reservation lock";
        if (revoked) {
            throw new KernelException(Errno.EINVAL, "ib_umem_dmabuf_map_pages: the import of " + buf + " is revoked");
        }
        if (sgt != null) {
            buf.waitFences(FENCE_TIMEOUT); // mapped: only the exporter's pending work is waited for
            return;
        }
        SgTable t = attachment.map(DmaDirection.BIDIRECTIONAL);
        long first = offset & -PAGE;
        long[] pages = new long[(int) (((offset + length + PAGE - 1) & -PAGE) - first) / (int) PAGE];
        int e = 0;
        long eStart = 0; // buffer offset where entry e starts
        for (int i = 0; i < pages.length; i++) {
            long at = first + i * PAGE;
            while (at >= eStart + t.length(e)) {
                eStart += t.length(e);
                e++;
            }
            pages[i] = t.dmaAddress(e) + (at - eStart);
        }
        sgt = t;
        pageDma = pages;
        // the exporter may still be moving the bytes to where the table points: wait for it
        buf.waitFences(FENCE_TIMEOUT);
    }

    @Override
    public void unmapPages() {
        assert buf.resvHeldByCurrentThread() : "ib_umem_dmabuf_unmap_pages without the reservation lock";
        if (sgt != null) {
            SgTable t = sgt;
            sgt = null;
            pageDma = null;
            attachment.unmap(t);
        }
    }

    @Override
    public boolean mapped() {
        return sgt != null;
    }

    @Override
    public long dmaAddressOf(long off) {
        long[] pages = pageDma;
        if (pages == null) {
            throw new KernelException(Errno.EINVAL, "ib_umem_dmabuf: not mapped");
        }
        if (off < 0 || off >= length) {
            throw new KernelException(Errno.EINVAL, String.format("ib_umem_dmabuf: offset %d is outside the %d-byte range", off, length));
        }
        long at = offset + off;
        return pages[(int) ((at - (offset & -PAGE)) / PAGE)] + (at & (PAGE - 1));
    }

    @Override
    public void revoke() {
        assert buf.resvHeldByCurrentThread() : "ib_umem_dmabuf_revoke without the reservation lock";
        if (revoked) {
            return;
        }
        unmapPages();
        if (attachment.pinned()) {
            attachment.unpin();
        }
        revoked = true;
    }

    @Override
    public boolean revoked() {
        return revoked;
    }

    @Override
    public void release() {
        lock();
        try {
            if (released) {
                return;
            }
            released = true;
            revoke();
        } finally {
            unlock();
        }
        attachment.detach();
    }

    @Override
    public String toString() {
        return String.format("dma-buf umem %s +0x%x len %d%s%s", buf, offset, length, pinned ? " pinned" : " dynamic", revoked ? " REVOKED" : "");
    }
}

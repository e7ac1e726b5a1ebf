package org.peerdirect.kernel.dmabuf;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;

import org.peerdirect.kernel.dma.DmaMapper;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;

/**
 * {@code struct dma_buf}: a buffer of {@link #size()} bytes an exporter's driver made shareable.
 * Processes hold it by file descriptor ({@link #fd}), importers by attachment
 * ({@link #dynamicAttach}); the exporter's {@link DmaBufOps#release} runs when the last of them
 * lets go.
 *
 * <p>Lock rules: the reservation lock ({@link #lockResv}, {@code dma_resv_lock}) guards the
 * attachments' mappings and pins and the revoked state; the exporter holds it while it moves or
 * revokes the buffer ({@link #moveNotify}, {@link #revoke}), so an importer's map and the
 * exporter's move never overlap. The reference count is guarded by {@code this}.
 */
public final class DmaBuf {

    private static final AtomicLong INODES = new AtomicLong();

    /** The file a descriptor holds: closing it drops the buffer reference. */
    private static final class DmaBufFile implements AutoCloseable {
        final DmaBuf buf;
        private boolean closed;

        DmaBufFile(DmaBuf buf) {
            this.buf = buf;
        }

        @Override
        public synchronized void close() {
            if (!closed) {
                closed = true;
                buf.put();
            }
        }

        @Override
        public String toString() {
            return "dmabuf:" + buf.exporter + " #" + buf.inode;
        }
    }

    private final String exporter;
    private final long size;
    private final DmaBufOps ops;
    private final long inode = INODES.incrementAndGet();
    private final ReentrantLock resv = new ReentrantLock();
    private final List<DmaBufAttachment> attachments = new CopyOnWriteArrayList<>();
    /** The exporter's pending work (kernel-usage fences); reservation lock. */
    private final List<Fence> fences = new ArrayList<>();
    private int refs;
    private boolean released;
    /** Set under the reservation lock by {@link #revoke}: every later map or pin fails. */
    private volatile boolean revoked;

    private DmaBuf(String exporter, long size, DmaBufOps ops) {
        this.exporter = exporter;
        this.size = size;
        this.ops = ops;
    }

    /**
     * {@code dma_buf_export}: a buffer of {@code size} bytes (a multiple of 4 KiB) with the
     * exporter's operations. It has no reference yet: {@link #fd} gives it its first.
     */
    public static DmaBuf export(String exporter, long size, DmaBufOps ops) {
        if (size <= 0 || size % 4096 != 0) {
            throw new KernelException(Errno.EINVAL, String.format("dma_buf_export(%s): size %d is not a positive multiple of the page size", exporter, size));
        }
        if (ops == null) {
            throw new KernelException(Errno.EINVAL, "dma_buf_export(" + exporter + "): no operations");
        }
        return new DmaBuf(exporter, size, ops);
    }

    /** {@code dma_buf_fd}: a descriptor in {@code proc} holding a reference; closing it (or exit) drops it. */
    public int fd(AddressSpace proc) {
        get();
        try {
            return proc.installFd(new DmaBufFile(this));
        } catch (RuntimeException e) {
            put();
            throw e;
        }
    }

    /**
     * {@code dma_buf_get}: the buffer open under {@code fd} in {@code proc}, with a reference the
     * caller drops by {@link #put}.
     *
     * @throws KernelException EBADF when the descriptor is not open or is not a dma-buf
     */
    public static DmaBuf get(AddressSpace proc, int fd) {
        AutoCloseable f = proc.fget(fd);
        if (!(f instanceof DmaBufFile d)) {
            throw new KernelException(Errno.EBADF, "fd " + fd + " of " + proc + " is not a dma-buf");
        }
        d.buf.get();
        return d.buf;
    }

    private synchronized void get() {
        if (released) {
            throw new KernelException(Errno.EBADF, this + " is released");
        }
        refs++;
    }

    /** {@code dma_buf_put}: drops a reference; the last one runs the exporter's release. */
    public void put() {
        synchronized (this) {
            if (refs <= 0) {
                throw new IllegalStateException(this + ": put without a reference");
            }
            if (--refs > 0) {
                return;
            }
            released = true;
        }
        ops.release(this);
    }

    public long size() {
        return size;
    }

    public String exporter() {
        return exporter;
    }

    DmaBufOps ops() {
        return ops;
    }


    public synchronized boolean released() {
        return released;
    }

    public boolean revoked() {
        return revoked;
    }

    /** {@code dma_resv_lock}. */
    public void lockResv() {
        resv.lock();
    }

    public void unlockResv() {
        resv.unlock();
    }

    public boolean resvHeldByCurrentThread() {
        return resv.isHeldByCurrentThread();
    }


    /**
     * {@code dma_buf_dynamic_attach}: attaches {@code importer} (a device's DMA API, its IOMMU
     * domain) with its operations; the attachment holds a buffer reference until
     * {@link DmaBufAttachment#detach}. The exporter may refuse it ({@link DmaBufOps#attach}).
     *
     * @throws KernelException EINVAL without importer operations (no {@code move_notify})
     */
    public DmaBufAttachment dynamicAttach(DmaMapper importer, String importerName, DmaBufImporterOps importerOps, Object importerPriv) {
        if (importerOps == null) {
            throw new KernelException(Errno.EINVAL, "dma_buf_dynamic_attach(" + importerName + "): an importer needs move_notify");
        }
        get();
        DmaBufAttachment a = new DmaBufAttachment(this, importer, importerName, importerOps, importerPriv);
        try {
            ops.attach(a);
        } catch (RuntimeException e) {
            put();
            throw e;
        }
        attachments.add(a);
        return a;
    }

    void detached(DmaBufAttachment a) {
        attachments.remove(a);
        try {
            ops.detach(a);
        } finally {
            put();
        }
    }

    /**
     * A fence ({@code struct dma_fence}) of kernel usage: the exporter's pending work on the buffer,
     * typically the copy of a migration started after {@link #moveNotify}; signalled once when done.
     */
    public static final class Fence {
        private final java.util.concurrent.CountDownLatch done = new java.util.concurrent.CountDownLatch(1);

        /** {@code dma_fence_signal}. */
        public void signal() {
            done.countDown();
        }

        public boolean signalled() {
            return done.getCount() == 0;
        }
    }

    /**
     * {@code dma_resv_add_fence(DMA_RESV_USAGE_KERNEL)}, by the exporter with the reservation lock
     * held: importers that map the buffer after this wait for the fence ({@link #waitFences}).
     */
    public Fence addFence() {
        assert resv.isHeldByCurrentThread() : "dma_resv_add_fence without the reservation lock";
        Fence f = new Fence();
        fences.add(f);
        return f;
    }

    /**
     * {@code dma_resv_wait_timeout(DMA_RESV_USAGE_KERNEL)}, reservation lock held: waits until every
     * kernel fence is signalled; bounded, unlike the kernel's {@code MAX_SCHEDULE_TIMEOUT}.
     *
     * @throws KernelException ETIMEDOUT when a fence is not signalled within {@code timeout}
     */
    public void waitFences(java.time.Duration timeout) {
        assert resv.isHeldByCurrentThread() : "dma_resv_wait_timeout without the reservation lock";
        long deadline = System.nanoTime() + timeout.toNanos();
        boolean interrupted = false;
        try {
            for (java.util.Iterator<Fence> it = fences.iterator(); it.hasNext();) {
                Fence f = it.next();
                while (!f.signalled()) {
                    long left = deadline - System.nanoTime();
                    if (left <= 0) {
                        throw new KernelException(Errno.ETIMEDOUT, this + ": the exporter's fence was not signalled within " + timeout.toMillis() + " ms");
                    }
                    try {
                        f.done.await(left, java.util.concurrent.TimeUnit.NANOSECONDS);
                    } catch (InterruptedException e) {
                        interrupted = true; // the wait is bounded anyway: finish it
                    }
                }
                it.remove();
            }
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /**
     * {@code dma_buf_move_notify}, by the exporter with the reservation lock held, before it moves
     * the buffer: every attachment's importer unmaps. A pinned buffer may not move.
     *
     * @throws IllegalStateException when an attachment is pinned (an exporter bug)
     */
    public void moveNotify() {
        assert resv.isHeldByCurrentThread() : "dma_buf_move_notify without the reservation lock";
        for (DmaBufAttachment a : attachments) {
            if (a.pinned()) {
                throw new IllegalStateException(this + ": moved while pinned by " + a.importerName());
            }
        }
        for (DmaBufAttachment a : attachments) {
            a.importerOps().moveNotify(a);
        }
    }

    /**
     * The exporter's device goes: with the reservation lock held, the buffer is revoked (every
     * later map or pin fails with ENODEV), dynamic importers and revocable pinned importers are
     * told to let go ({@code move_notify}) and must have unmapped when it returns. Returns the
     * pinned, non-revocable attachments still mapped: the exporter cannot take those back.
     */
    public List<DmaBufAttachment> revoke() {
        assert resv.isHeldByCurrentThread() : "revoke without the reservation lock";
        revoked = true;
        List<DmaBufAttachment> stuck = new ArrayList<>();
        for (DmaBufAttachment a : attachments) {
            if (!a.pinned() || a.importerOps().revocable()) {
                a.importerOps().moveNotify(a);
            }
            if (a.mapped()) {
                stuck.add(a);
            }
        }
        return stuck;
    }

    @Override
    public String toString() {
        return "dma-buf " + exporter + " #" + inode + " (" + size + " bytes)";
    }
}

package org.peerdirect.umemtest;

import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantReadWriteLock;

import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.umem.IbUmem;
import org.peerdirect.ib.core.umem.UmemService;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.dma.DmaMapper;
import org.peerdirect.kernel.iommu.IommuDomain;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.dma.DmaDevice;

/**
 * A test-only DMA device and its driver, the smallest user of umems that supports invalidation
 * (like the kernel's {@code test_hmm} mirror driver): it registers user ranges as "MRs", arms
 * their invalidation notifiers, revokes an MR when its memory is invalidated, and moves bytes
 * only through its IOMMU domain. Until the HCA providers exist it exercises every Peer-Direct
 * path end to end.
 *
 * <p>Lock rules: each {@link Mr}'s read-write lock: DMA holds it in read mode, revocation takes
 * it in write mode, so a revocation returns only when no DMA through the MR is in flight and
 * none can start. The invalidation function runs with the umem's mapping lock held and takes
 * only this lock.
 */
public final class UmemTestDevice implements DmaDevice, AutoCloseable {

    /** A DMA the device refused: what a real HCA reports as an error completion. */
    public static final class DmaRefused extends RuntimeException {
        private static final long serialVersionUID = 1L;

        DmaRefused(String m) {
            super(m);
        }
    }

    /** One registration of the device. */
    public final class Mr {
        final int id;
        final IbUmem umem;
        final int access;
        private final ReentrantReadWriteLock dma = new ReentrantReadWriteLock();
        private String revoked; // guarded by dma (write to set, read to test)
        final AtomicLong invalidations = new AtomicLong();
        /** The process's "open file" for this MR: its exit deregisters the MR (test_hmm's file release). */
        final AutoCloseable file;
        final AddressSpace owner;

        Mr(int id, IbUmem umem, int access, AddressSpace owner) {
            this.id = id;
            this.umem = umem;
            this.access = access;
            this.owner = owner;
            this.file = () -> deregIfRegistered(this);
        }

        public int id() {
            return id;
        }

        /** The device it is registered on. */
        UmemTestDevice device() {
            return UmemTestDevice.this;
        }

        public IbUmem umem() {
            return umem;
        }

        /** Stops all DMA through the MR; returns when none is in flight. */
        void revoke(String why) {
            dma.writeLock().lock();
            try {
                if (revoked == null) {
                    revoked = why;
                }
            } finally {
                dma.writeLock().unlock();
            }
        }

        public String revokedReason() {
            dma.readLock().lock();
            try {
                return revoked;
            } finally {
                dma.readLock().unlock();
            }
        }

        public long invalidations() {
            return invalidations.get();
        }

        /** Device write (the device stores {@code len} bytes of {@code src} at user address {@code va}). */
        public void dmaWrite(long va, MemorySegment src, long srcOff, long len) {
            transfer(va, src, srcOff, len, true);
        }

        /** Device read of {@code len} bytes at user address {@code va} into {@code dst}. */
        public void dmaRead(long va, MemorySegment dst, long dstOff, long len) {
            transfer(va, dst, dstOff, len, false);
        }

        private void transfer(long va, MemorySegment buf, long off, long len, boolean write) {
            if (write && (access & IbAccess.LOCAL_WRITE) == 0) {
                throw new DmaRefused("mr " + id + ": no LOCAL_WRITE access (a protection error completion)");
            }
            if (len < 0 || va < umem.address() || va + len > umem.address() + umem.length()) {
                throw new DmaRefused(String.format("mr %d: 0x%x+%d is outside the MR 0x%x+%d (a protection error completion)",
                        id, va, len, umem.address(), umem.length()));
            }
            dma.readLock().lock();
            try {
                if (revoked != null) {
                    throw new DmaRefused("mr " + id + ": revoked (" + revoked + "): the access completes in error and touches no memory");
                }
                while (len > 0) {
                    long n = Math.min(len, umem.contiguousBytesAt(va));
                    long iova = umem.dmaAddressOf(va);
                    if (write) {
                        domain.write(iova, buf, off, n);
                    } else {
                        domain.read(iova, buf, off, n);
                    }
                    va += n;
                    off += n;
                    len -= n;
                }
            } finally {
                dma.readLock().unlock();
            }
        }

        @Override
        public String toString() {
            String r = revokedReason();
            return "mr " + id + ": " + umem + (r == null ? "" : " REVOKED (" + r + ")");
        }
    }

    private final String name;
    private final Iommu iommu;
    private final IommuDomain domain;
    private final UmemService umems;
    private final ConcurrentHashMap<Integer, Mr> mrs = new ConcurrentHashMap<>();
    private final AtomicInteger nextId = new AtomicInteger(1);
    private final java.util.concurrent.atomic.AtomicBoolean closed = new java.util.concurrent.atomic.AtomicBoolean();

    public UmemTestDevice(String name, Iommu iommu, UmemService umems) {
        this.name = name;
        this.iommu = iommu;
        this.umems = umems;
        this.domain = iommu.createDomain(name);
    }

    @Override
    public String name() {
        return name;
    }

    /** The device's IOMMU domain (counters, audit). */
    public IommuDomain iommuDomain() {
        return domain;
    }

    @Override
    public DmaMapper dma() {
        return domain;
    }

    /**
     * Registers [addr, addr+len) of {@code mm}: pinned memory, or peer memory of any client
     * (the device supports invalidation). The notifier is armed once the MR is ready. The MR
     * belongs to {@code mm}: the process's exit deregisters it before the exit returns.
     */
    public Mr reg(AddressSpace mm, long addr, long len, int access) {
        IbUmem u = umems.umemGet(mm, this, addr, len, access, UmemService.IB_PEER_MEM_ALLOW | UmemService.IB_PEER_MEM_INVAL_SUPP);
        Mr mr = new Mr(nextId.getAndIncrement(), u, access, mm);
        mrs.put(mr.id, mr);
        u.activateInvalidationNotifier(x -> {
            mr.invalidations.incrementAndGet();
            mr.revoke("invalidated by peer client " + x.peerClientName());
        });
        try {
            mm.openFile(mr.file); // the process's exit deregisters it
        } catch (RuntimeException exiting) {
            dereg(mr);
            throw exiting;
        }
        return mr;
    }

    private void deregIfRegistered(Mr mr) {
        dereg(mr); // the process's exit: nothing when its owner deregistered it first
    }

    /**
     * Deregisters: revoke, stop the notifier, release (the mlx5 dereg order). Idempotent, as
     * {@code ibv_dereg_mr} is here: an MR deregistered before (by its owner, the process's exit or
     * the device's close) is left alone. An MR of another device is refused by name.
     */
    public void dereg(Mr mr) {
        if (mr.device() != this) {
            throw new IllegalArgumentException("mr " + mr.id + " belongs to " + mr.device().name + ", not " + name);
        }
        if (!mrs.remove(mr.id, mr)) {
            return; // deregistered before: the one who removed it released it
        }
        mr.revoke("deregistered");
        mr.umem.stopInvalidationNotifier();
        mr.umem.release();
        mr.owner.closeFile(mr.file);
    }

    public Mr mr(int id) {
        Mr mr = mrs.get(id);
        if (mr == null) {
            throw new IllegalArgumentException("no mr " + id + " on " + name + " (umemtest:list shows them)");
        }
        return mr;
    }

    public List<Mr> mrs() {
        return mrs.values().stream().sorted((a, b) -> Integer.compare(a.id, b.id)).toList();
    }

    /** Deregisters every MR and destroys the IOMMU domain; idempotent (Java's {@code close} convention). */
    @Override
    public void close() {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        for (Mr mr : mrs()) {
            dereg(mr);
        }
        iommu.destroyDomain(domain);
    }
}

package org.peerdirect.ib.core.testing;

import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantReadWriteLock;

import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.umem.IbUmem;
import org.peerdirect.ib.core.umem.UmemService;
import org.peerdirect.kernel.dma.DmaDevice;
import org.peerdirect.kernel.dma.DmaMapper;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.iommu.IommuDomain;
import org.peerdirect.kernel.mm.AddressSpace;

/**
 * The smallest driver of a DMA device that ib-core's own tests need: it registers user ranges as
 * MRs through the umem service (peer memory allowed, invalidation supported), revokes an MR when
 * its umem is invalidated, and moves bytes only through its IOMMU domain. umem-test's
 * {@code umem_test0} plays this role for the running system; ib-core's tests cannot use it
 * (umem-test depends on ib-core), so this fixture keeps only what the tests drive.
 *
 * <p>Lock rules: each MR's read-write lock. DMA holds it in read mode, revocation takes it in
 * write mode, so a revocation (the driver's invalidation function, called with the umem's
 * mapping lock held) returns only when no DMA through the MR is in flight and none can start:
 * the contract a real driver keeps.
 */
public final class TestDmaDevice implements DmaDevice, AutoCloseable {

    /** A DMA the device refused (a real HCA's error completion). */
    public static final class DmaRefused extends RuntimeException {
        private static final long serialVersionUID = 1L;

        DmaRefused(String m) {
            super(m);
        }
    }

    /** One registration: the umem, the access it was registered with, its revocation. */
    public final class Mr {
        private final IbUmem umem;
        private final int access;
        private final AddressSpace owner;
        private final ReentrantReadWriteLock dma = new ReentrantReadWriteLock();
        private String revoked; // written under dma's write lock, read under its read lock
        private final AtomicLong invalidations = new AtomicLong();
        /** The process's "open file" for the MR: the process's exit deregisters it. */
        private final AutoCloseable file = () -> deregIfRegistered(this);

        private Mr(IbUmem umem, int access, AddressSpace owner) {
            this.umem = umem;
            this.access = access;
            this.owner = owner;
        }

        public IbUmem umem() {
            return umem;
        }

        /** How often the umem's invalidation function ran. */
        public long invalidations() {
            return invalidations.get();
        }

        /** Why the MR no longer moves bytes, or null while it does. */
        public String revokedReason() {
            dma.readLock().lock();
            try {
                return revoked;
            } finally {
                dma.readLock().unlock();
            }
        }

        /** Returns when no DMA through the MR is in flight; none starts afterwards. */
        private void revoke(String why) {
            dma.writeLock().lock();
            try {
                if (revoked == null) {
                    revoked = why;
                }
            } finally {
                dma.writeLock().unlock();
            }
        }

        /** The device stores {@code len} bytes of {@code src} at user address {@code va}. */
        public void dmaWrite(long va, MemorySegment src, long srcOff, long len) {
            transfer(va, src, srcOff, len, true);
        }

        /** The device reads {@code len} bytes at user address {@code va} into {@code dst}. */
        public void dmaRead(long va, MemorySegment dst, long dstOff, long len) {
            transfer(va, dst, dstOff, len, false);
        }

        private void transfer(long va, MemorySegment buf, long off, long len, boolean write) {
            if (write && (access & IbAccess.LOCAL_WRITE) == 0) {
                throw new DmaRefused("no LOCAL_WRITE access");
            }
            if (len < 0 || va < umem.address() || va + len > umem.address() + umem.length()) {
                throw new DmaRefused(String.format("0x%x+%d is outside the MR 0x%x+%d", va, len, umem.address(), umem.length()));
            }
            dma.readLock().lock();
            try {
                if (revoked != null) {
                    throw new DmaRefused("revoked (" + revoked + ")");
                }
                for (long n; len > 0; va += n, off += n, len -= n) {
                    n = Math.min(len, umem.contiguousBytesAt(va));
                    if (write) {
                        domain.write(umem.dmaAddressOf(va), buf, off, n);
                    } else {
                        domain.read(umem.dmaAddressOf(va), buf, off, n);
                    }
                }
            } finally {
                dma.readLock().unlock();
            }
        }
    }

    private final String name;
    private final Iommu iommu;
    private final IommuDomain domain;
    private final UmemService umems;
    private final List<Mr> mrs = new CopyOnWriteArrayList<>();

    public TestDmaDevice(String name, Iommu iommu, UmemService umems) {
        this.name = name;
        this.iommu = iommu;
        this.umems = umems;
        this.domain = iommu.createDomain(name);
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public DmaMapper dma() {
        return domain;
    }

    public IommuDomain iommuDomain() {
        return domain;
    }

    /** Registers [addr, addr+len) of {@code mm}, pinned or peer memory; the notifier is armed once the MR exists. */
    public Mr reg(AddressSpace mm, long addr, long len, int access) {
        IbUmem u = umems.umemGet(mm, this, addr, len, access, UmemService.IB_PEER_MEM_ALLOW | UmemService.IB_PEER_MEM_INVAL_SUPP);
        Mr mr = new Mr(u, access, mm);
        mrs.add(mr);
        u.activateInvalidationNotifier(x -> {
            mr.invalidations.incrementAndGet();
            mr.revoke("invalidated by peer client " + x.peerClientName());
        });
        try {
            mm.openFile(mr.file);
        } catch (RuntimeException exiting) {
            dereg(mr);
            throw exiting;
        }
        return mr;
    }

    /** Deregisters in the mlx5 order: revoke, stop the notifier, release the umem. */
    public void dereg(Mr mr) {
        if (!mrs.remove(mr)) {
            throw new IllegalArgumentException("the MR is not registered on " + name);
        }
        mr.revoke("deregistered");
        mr.umem.stopInvalidationNotifier();
        mr.umem.release();
        mr.owner.closeFile(mr.file);
    }

    private void deregIfRegistered(Mr mr) {
        try {
            dereg(mr);
        } catch (IllegalArgumentException raced) {
            // its owner deregistered it meanwhile
        }
    }

    public List<Mr> mrs() {
        return List.copyOf(mrs);
    }

    /** Deregisters every MR and destroys the IOMMU domain. */
    @Override
    public void close() {
        for (Mr mr : mrs()) {
            dereg(mr);
        }
        iommu.destroyDomain(domain);
    }
}

package org.peerdirect.ib.core.umem.impl;

import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.umem.IbUmem;
import org.peerdirect.ib.core.umem.IbUmemOdp;
import org.peerdirect.ib.core.umem.UmemOdpInvalidate;
import org.peerdirect.ib.core.umem.UmemService;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.kernel.dma.DmaDevice;

/**
 * The entry points of {@code drivers/infiniband/core/umem.c} ({@code ib_umem_get}, with
 * {@code __ib_umem_get}'s checks: the pinned path, then the peer path), {@code umem_odp.c}
 * ({@code ib_umem_odp_get}, {@code ib_umem_odp_alloc_implicit}) and {@code umem_dmabuf.c}
 * ({@code ib_umem_dmabuf_get}, {@code ib_umem_dmabuf_get_pinned}).
 */
public final class UmemCore implements UmemService {

    /** The largest registration accepted (the sim's 47-bit user space bounds it anyway). */
    static final long MAX_LENGTH = 1L << 46;

    private final PeerUmemGet peers;

    /** A umem service whose peer path is {@code peers} (the Peer-Direct controller). */
    public UmemCore(PeerUmemGet peers) {
        this.peers = peers;
    }

    @Override
    public IbUmem umemGet(AddressSpace mm, DmaDevice device, long addr, long length, int access, int peerMemFlags) {
        checkArgs(mm, device, "ib_umem_get");
        if (length <= 0 || length > MAX_LENGTH || addr < 0 || addr + length < addr) {
            throw new KernelException(Errno.EINVAL, String.format("ib_umem_get: bad range 0x%x + %d", addr, length));
        }
        if ((access & ~IbAccess.SUPPORTED) != 0) {
            throw new KernelException(Errno.EINVAL, "ib_umem_get: unknown access flags 0x" + Integer.toHexString(access & ~IbAccess.SUPPORTED));
        }
        if ((access & IbAccess.ON_DEMAND) != 0) {
            throw new KernelException(Errno.EINVAL, "ib_umem_get: IB_ACCESS_ON_DEMAND registrations take an ODP umem (ib_umem_odp_get)");
        }
        if ((peerMemFlags & ~(UmemService.IB_PEER_MEM_ALLOW | UmemService.IB_PEER_MEM_INVAL_SUPP)) != 0) {
            throw new KernelException(Errno.EINVAL, "ib_umem_get: unknown peer memory flags 0x" + Integer.toHexString(peerMemFlags));
        }
        boolean writable = IbAccess.writable(access);
        try {
            return new UmemPinned(mm, device, addr, length, writable);
        } catch (KernelException pinError) {
            // the memlock check comes before pinning and fails the call outright, as in the kernel
            if ((peerMemFlags & UmemService.IB_PEER_MEM_ALLOW) == 0 || pinError.errno() == Errno.ENOMEM
                    || pinError.errno() == Errno.EINVAL) {
                throw pinError;
            }
            long npages = Umem.numPages(addr, length);
            mm.chargePinnedVm(npages);
            try {
                return peers.peerUmemGetAndLock(mm, device, addr, length, writable, peerMemFlags, pinError);
            } catch (RuntimeException e) {
                mm.unchargePinnedVm(npages);
                throw e;
            }
        }
    }

    @Override
    public IbUmemOdp umemOdpGet(AddressSpace mm, DmaDevice device, long addr, long length, int access, UmemOdpInvalidate ops) {
        checkArgs(mm, device, "ib_umem_odp_get");
        return UmemOdp.get(mm, device, addr, length, access, ops);
    }

    @Override
    public IbUmemOdp umemOdpAllocImplicit(AddressSpace mm, DmaDevice device, int access) {
        checkArgs(mm, device, "ib_umem_odp_alloc_implicit");
        return UmemOdp.allocImplicit(mm, device, access);
    }

    @Override
    public org.peerdirect.ib.core.umem.IbUmemDmabuf umemDmabufGet(AddressSpace mm, DmaDevice device, long offset, long size, int fd, int access,
            java.util.function.Consumer<org.peerdirect.ib.core.umem.IbUmemDmabuf> moveNotify) {
        checkArgs(mm, device, "ib_umem_dmabuf_get");
        return UmemDmabuf.get(mm, device, offset, size, fd, access, false, moveNotify);
    }

    @Override
    public org.peerdirect.ib.core.umem.IbUmemDmabuf umemDmabufGetPinned(AddressSpace mm, DmaDevice device, long offset, long size, int fd,
            int access, java.util.function.Consumer<org.peerdirect.ib.core.umem.IbUmemDmabuf> revoke) {
        checkArgs(mm, device, "ib_umem_dmabuf_get_pinned");
        return UmemDmabuf.get(mm, device, offset, size, fd, access, true, revoke);
    }

    private static void checkArgs(AddressSpace mm, DmaDevice device, String fn) {
        if (mm == null || device == null) {
            throw new KernelException(Errno.EINVAL, fn + ": " + (mm == null ? "no process" : "no DMA device"));
        }
    }

    @Override
    public java.util.List<org.peerdirect.ib.core.umem.PeerClaim> peerClaims(AddressSpace mm, long addr, long length, int peerMemFlags) {
        if (mm == null) {
            throw new KernelException(Errno.EINVAL, "peer claims: no process");
        }
        if (length <= 0 || addr < 0 || addr + length < addr) {
            throw new KernelException(Errno.EINVAL, String.format("peer claims: bad range 0x%x + %d", addr, length));
        }
        return peers.peerClaims(mm.pid(), addr, length, peerMemFlags);
    }
}

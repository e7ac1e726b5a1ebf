package org.peerdirect.ib.core.impl;

import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.peerdirect.ib.core.umem.IbUmem;
import org.peerdirect.ib.core.umem.IbUmemOdp;
import org.peerdirect.ib.core.umem.UmemOdpInvalidate;
import org.peerdirect.ib.core.umem.UmemService;
import org.peerdirect.ib.core.umem.impl.UmemCore;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.dma.DmaDevice;

/** {@code ib_umem_get} for drivers, brokering peer memory through this bundle's registry. */
@Component(immediate = true, // holds state: a delayed component would be disposed when unused
        service = UmemService.class)
public final class UmemServiceComponent implements UmemService {

    private final UmemCore core;

    @Activate
    public UmemServiceComponent(@Reference PeerMemoryControllerService peer) {
        this.core = new UmemCore(peer.controller());
    }

    @Override
    public IbUmem umemGet(AddressSpace mm, DmaDevice device, long addr, long length, int access, int peerMemFlags) {
        return core.umemGet(mm, device, addr, length, access, peerMemFlags);
    }

    @Override
    public IbUmemOdp umemOdpGet(AddressSpace mm, DmaDevice device, long addr, long length, int access, UmemOdpInvalidate ops) {
        return core.umemOdpGet(mm, device, addr, length, access, ops);
    }

    @Override
    public IbUmemOdp umemOdpAllocImplicit(AddressSpace mm, DmaDevice device, int access) {
        return core.umemOdpAllocImplicit(mm, device, access);
    }

    @Override
    public org.peerdirect.ib.core.umem.IbUmemDmabuf umemDmabufGet(AddressSpace mm, DmaDevice device, long offset, long size, int fd, int access,
            java.util.function.Consumer<org.peerdirect.ib.core.umem.IbUmemDmabuf> moveNotify) {
        return core.umemDmabufGet(mm, device, offset, size, fd, access, moveNotify);
    }

    @Override
    public org.peerdirect.ib.core.umem.IbUmemDmabuf umemDmabufGetPinned(AddressSpace mm, DmaDevice device, long offset, long size, int fd,
            int access, java.util.function.Consumer<org.peerdirect.ib.core.umem.IbUmemDmabuf> revoke) {
        return core.umemDmabufGetPinned(mm, device, offset, size, fd, access, revoke);
    }

    @Override
    public java.util.List<org.peerdirect.ib.core.umem.PeerClaim> peerClaims(AddressSpace mm, long addr, long length, int peerMemFlags) {
        return core.peerClaims(mm, addr, length, peerMemFlags);
    }
}

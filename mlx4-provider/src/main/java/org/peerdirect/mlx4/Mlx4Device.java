package org.peerdirect.mlx4;

import java.util.BitSet;
import java.util.function.Supplier;

import org.peerdirect.hca.cx3.ConnectX3;
import org.peerdirect.hca.engine.AsyncEventHandler;
import org.peerdirect.hca.engine.HcaDevice;
import org.peerdirect.hca.engine.HcaPort;
import org.peerdirect.hca.engine.HwCommandException;
import org.peerdirect.hca.engine.HwCq;
import org.peerdirect.ib.core.provider.IbDeviceEvents;
import org.peerdirect.ib.core.provider.IbDeviceOps;
import org.peerdirect.ib.core.provider.IbUcontextOps;
import org.peerdirect.ib.core.umem.UmemService;
import org.peerdirect.ib.core.verbs.IbvDeviceAttr;
import org.peerdirect.ib.core.verbs.IbvEventType;
import org.peerdirect.ib.core.verbs.IbvPortAttr;
import org.peerdirect.kernel.dma.DmaMapper;
import org.peerdirect.kernel.pci.PciFunction;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.kernel.dma.DmaDevice;

/**
 * {@code struct mlx4_ib_dev}: the device the driver registers with the IB core for one ConnectX-3
 * function. It is also the DMA device its umems are mapped for. It keeps the QP and CQ tables the
 * CQE and event paths index by number ({@code mlx4_find_qp}, {@code mlx4_cq_completion}).
 */
public final class Mlx4Device implements IbDeviceOps, DmaDevice {

    final String name;
    final ConnectX3 hw;
    /** The function's DMA mapping calls ({@code &pdev->dev}). */
    private final DmaMapper dma;
    final HcaDevice engine;
    final UmemService umems;
    /** qpn → driver QP, for CQEs; written on create/destroy, read by pollers (plain array of final-field objects). */
    final Mlx4Qp[] qpTable = new Mlx4Qp[HcaDevice.MAX_QP];
    /** cqn → driver CQ, for events. */
    final Mlx4Cq[] cqTable = new Mlx4Cq[HcaDevice.MAX_CQ];
    final Mlx4Srq[] srqTable = new Mlx4Srq[HcaDevice.MAX_SRQ];
    /** The core's port-event dispatcher while registered. */
    private volatile IbDeviceEvents events;
    /** PD numbers in use ({@code mlx4_pd_alloc}'s bitmap); guarded by itself. */
    private final BitSet pdns = new BitSet();
    private final IbvDeviceAttr attr;

    /**
     * {@code mlx4_init_one}: the device behind {@code fn}, found through the function only: its
     * firmware interface ({@code INIT_HCA} brings the engine up) and its DMA mapping calls.
     *
     * @throws IllegalArgumentException when the function has no ConnectX-3 firmware interface
     */
    public Mlx4Device(String name, PciFunction fn, UmemService umems) {
        this.name = name;
        this.hw = fn.firmware(ConnectX3.class).orElseThrow(
                () -> new IllegalArgumentException(fn.bdf() + " has no ConnectX-3 firmware interface (not a ConnectX-3 function)"));
        this.engine = hw.initHca(fn);
        this.dma = fn.dma();
        this.umems = umems;
        this.attr = new IbvDeviceAttr(hw.firmwareVersion(), hw.nodeGuid(), hw.nodeGuid(), 0xFFFF_FFFF_FFFF_FFFFL, 0xFFFF_FE00L,
                0x02c9, ConnectX3.DEVICE_ID, 0, HcaDevice.MAX_QP - HcaDevice.RESERVED_QPS, HcaDevice.MAX_QP_WR, 0, HcaDevice.MAX_SGE,
                HcaDevice.MAX_CQ, HcaDevice.MAX_CQE, HcaDevice.MAX_MPT - 1, 1 << 24, 16, 128, IbvDeviceAttr.ATOMIC_HCA,
                HcaDevice.MAX_SRQ, HcaDevice.MAX_QP_WR, HcaDevice.MAX_SGE, HcaDevice.MAX_INLINE, engine.portCount(),
                IbvDeviceAttr.OdpCaps.NONE);
        engine.setEventHandler(this::cqEvent);
        engine.setAsyncEventHandler(new AsyncEventHandler() {
            @Override
            public void event(int type, int number) {
                asyncEvent(type, number);
            }

            /** {@code mlx4_ib_event}: MLX4_DEV_EVENT_PORT_UP / _DOWN as PORT_ACTIVE / PORT_ERR. */
            @Override
            public void portEvent(int port, int subtype) {
                IbDeviceEvents h = events;
                if (h != null) {
                    h.portEvent(port, subtype == AsyncEventHandler.PORT_ACTIVE ? IbvEventType.PORT_ACTIVE : IbvEventType.PORT_ERR);
                }
            }
        });
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public long nodeGuid() {
        return hw.nodeGuid();
    }

    @Override
    public String driver() {
        return "mlx4";
    }

    @Override
    public DmaMapper dma() {
        return dma;
    }

    public HcaDevice engine() {
        return engine;
    }

    /** mlx4's attributes (a ConnectX-3 with firmware 2.42): no ODP. */
    @Override
    public IbvDeviceAttr queryDevice() {
        return attr;
    }

    @Override
    public IbvPortAttr queryPort(int port) {
        HcaPort p = cmd(() -> engine.port(port));
        return new IbvPortAttr(p.active() ? IbvPortAttr.PORT_ACTIVE : IbvPortAttr.PORT_DOWN, 5, 5, 128, 0x02514868, 0x40000000L,
                128, p.lid(), 1, 0, 8, 0, 2, 16, p.active() ? 5 : 3, IbvPortAttr.LINK_LAYER_INFINIBAND);
    }

    @Override
    public String queryGid(int port, int index) {
        if (index != 0) {
            throw new KernelException(Errno.EINVAL, name + ": GID index " + index + " is not populated");
        }
        long g = hw.nodeGuid() + port;
        return String.format("fe80:0000:0000:0000:%04x:%04x:%04x:%04x", (g >>> 48) & 0xffff, (g >>> 32) & 0xffff, (g >>> 16) & 0xffff,
                g & 0xffff);
    }

    @Override
    public IbUcontextOps allocUcontext(AddressSpace process) {
        return new Mlx4Context(this, process);
    }

    int allocPdn() {
        synchronized (pdns) {
            int n = pdns.nextClearBit(1);
            if (n >= 1 << 24) {
                throw new KernelException(Errno.ENOMEM, name + ": out of PD numbers");
            }
            pdns.set(n);
            return n;
        }
    }

    void freePdn(int n) {
        synchronized (pdns) {
            pdns.clear(n);
        }
    }

    /** The EQ's CQ events ({@code mlx4_cq_completion}, {@code mlx4_cq_event}) to the core's handlers. */
    private void cqEvent(HwCq cq, boolean error) {
        Mlx4Cq c = cqTable[cq.cqn];
        if (c != null && c.hw == cq) {
            if (error) {
                c.events.error();
            } else {
                c.events.completion();
            }
        }
    }

    /**
     * The EQ's affiliated events ({@code mlx4_qp_event} → {@code mlx4_ib_qp_event},
     * {@code mlx4_srq_event} → {@code mlx4_ib_srq_event}): the object by its number, the type
     * mapped to its IB event for the core's handler.
     */
    private void asyncEvent(int type, int number) {
        if (type == AsyncEventHandler.SRQ_LIMIT) {
            Mlx4Srq s = number >= 0 && number < srqTable.length ? srqTable[number] : null;
            if (s != null) {
                s.events.event(IbvEventType.SRQ_LIMIT_REACHED);
            }
            return;
        }
        Mlx4Qp q = number >= 0 && number < qpTable.length ? qpTable[number] : null;
        IbvEventType t = switch (type) {
            case AsyncEventHandler.COMM_EST -> IbvEventType.COMM_EST;
            case AsyncEventHandler.SRQ_LAST_WQE -> IbvEventType.QP_LAST_WQE_REACHED;
            case AsyncEventHandler.WQ_CATAS_ERROR -> IbvEventType.QP_FATAL;
            case AsyncEventHandler.WQ_INVAL_REQ_ERROR -> IbvEventType.QP_REQ_ERR;
            case AsyncEventHandler.WQ_ACCESS_ERROR -> IbvEventType.QP_ACCESS_ERR;
            default -> null;
        };
        if (q != null && t != null) {
            q.events.event(t);
        }
    }

    @Override
    public void setEventHandler(IbDeviceEvents h) {
        events = h;
    }

    /** Runs a firmware command; a refused one becomes the errno {@code mlx4_status_to_errno} gives. */
    <T> T cmd(Supplier<T> command) {
        try {
            return command.get();
        } catch (HwCommandException e) {
            throw Mlx4Status.errno(name, e);
        }
    }

    void cmd(Runnable command) {
        try {
            command.run();
        } catch (HwCommandException e) {
            throw Mlx4Status.errno(name, e);
        }
    }

    /**
     * The hardware half of {@code mlx4_remove_one}, after the device was unregistered from the core:
     * a surprise removal kills the hardware (QPs flushed, keys revoked); a driver unbind resets it
     * for the next driver (objects freed). Idempotent.
     */
    public void removeHardware(boolean surprise) {
        if (surprise) {
            engine.remove();
        } else {
            engine.reset();
        }
    }

    @Override
    public String toString() {
        return name + " (" + hw.bdf() + ")";
    }
}

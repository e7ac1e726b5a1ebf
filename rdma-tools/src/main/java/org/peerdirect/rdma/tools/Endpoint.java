package org.peerdirect.rdma.tools;

import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.verbs.IbvCompChannel;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvCq;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvDeviceAttr;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.ib.core.verbs.IbvGid;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.ib.core.verbs.IbvPortAttr;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvQpInitAttr;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.rdma.RcConnect;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.peermem.alloc.PeerMemoryAllocator;

/**
 * One side of a tool's connection, in its own simulated process: the context, a PD, one CQ, RC
 * QPs and a buffer from host memory or from a peer device ({@link Buffers}), registered with every
 * access right.
 * {@link #close} takes it all down in order.
 */
final class Endpoint implements AutoCloseable {

    /** RDMA READs and atomics each QP keeps outstanding (max_rd_atomic; perftest's "Outstand_reads"). */
    static final int RD_ATOMIC = 16;
    static final int ACCESS = IbAccess.LOCAL_WRITE | IbAccess.REMOTE_READ | IbAccess.REMOTE_WRITE | IbAccess.REMOTE_ATOMIC;

    final AddressSpace proc;
    final IbvContext ctx;
    final IbvPd pd;
    final IbvCq cq;
    /** The completion channel of {@link #cq} when the tool waits for events (-e), else null. */
    final IbvCompChannel channel;
    final IbvQp[] qps;
    final long buf;
    final long size;
    final IbvMr mr;
    final int lid;
    /** Port 1's GID when the port is Ethernet (RoCE: the only address), else null (addressing by LID). */
    final byte[] gid;
    private final PeerMemoryAllocator peer;
    /** The RDMA FLUSH rights the device carries: the QPs accept them (an MR grants them only when asked). */
    final int qpFlush;
    /** The peer buffer was already freed (by a test of invalidation). */
    boolean peerFreed;

    /** Host or peer memory, pinned, with every access right: the tools' usual side. */
    Endpoint(ToolEnv env, String name, IbvDevice dev, long size, int nqp, int depth, PeerMemoryAllocator peer) {
        this(env, name, dev, size, nqp, depth, peer, false, Buffers.Odp.NONE, -1, false, 0);
    }

    /**
     * With {@code events}, the CQ has a completion channel ({@code ibv_rc_pingpong -e}). The buffer
     * and its MR as {@link Buffers} makes them: with {@code peerOffset} at least 0, the peer buffer
     * is the device memory at that fixed offset; with {@code dmabuf}, a dma-buf MR; with
     * {@code mrExtra}, the MR also gets these rights (the FLUSH rights of {@code rdma:put --flush});
     * with {@link IbAccess#HUGETLB} among them, the host buffer is a hugetlb mapping rounded up to
     * 2 MiB ({@code MAP_HUGETLB}, perftest {@code --use_hugepages}): an ODP MR then maps 2 MiB
     * granules, a pinned MR ignores the flag, as the kernel does.
     */
    Endpoint(ToolEnv env, String name, IbvDevice dev, long size, int nqp, int depth, PeerMemoryAllocator peer, boolean events,
            Buffers.Odp odpMode, long peerOffset, boolean dmabuf, int mrExtra) {
        this(env, name, dev, size, nqp, depth, peer, events, odpMode, peerOffset, dmabuf, mrExtra, IbvQpType.RC);
    }

    /**
     * A UD endpoint of host memory (one QP moved to RTS with Q_Key {@code qkey} by
     * {@link RcConnect#udToRts}, as {@code ibv_ud_pingpong}): its address handles are the tool's,
     * destroyed before {@link #close}.
     */
    static Endpoint ud(ToolEnv env, String name, IbvDevice dev, long size, int depth, int qkey) {
        return ud(env, name, dev, size, depth, qkey, 0);
    }

    /** {@link #ud(ToolEnv, String, IbvDevice, long, int, int)} sending from PSN {@code sqPsn} (the one told to a peer across hosts). */
    static Endpoint ud(ToolEnv env, String name, IbvDevice dev, long size, int depth, int qkey, int sqPsn) {
        Endpoint e = new Endpoint(env, name, dev, size, 1, depth, null, false, Buffers.Odp.NONE, -1, false, 0, IbvQpType.UD);
        try {
            RcConnect.udToRts(e.qps[0], 1, qkey, sqPsn);
        } catch (RuntimeException x) {
            e.close();
            throw x;
        }
        return e;
    }

    private Endpoint(ToolEnv env, String name, IbvDevice dev, long size, int nqp, int depth, PeerMemoryAllocator peer, boolean events,
            Buffers.Odp odpMode, long peerOffset, boolean dmabuf, int mrExtra, IbvQpType qpType) {
        this.proc = env.process(name);
        // huge pages: the buffer, and its MR, are whole 2 MiB pages (perftest rounds its buffer so)
        boolean huge = (mrExtra & IbAccess.HUGETLB) != 0;
        size = huge ? Buffers.hugeRound(size) : size;
        this.size = size;
        this.peer = peer;
        proc.setMemlockLimit(Math.max(proc.memlockLimit(), 4 * size + (1 << 20)));
        IbvContext c = null;
        try {
            c = dev.open(proc);
            this.ctx = c;
            this.pd = c.allocPd();
            this.channel = events ? c.createCompChannel() : null;
            this.cq = c.createCq(Math.max(16, nqp * depth * 2 + 16), channel);
            this.qps = createQps(pd, cq, nqp, depth, qpType);
            this.buf = Buffers.alloc(proc, size, peer, peerOffset, huge, odpMode != Buffers.Odp.NONE);
            this.mr = Buffers.register(proc, c, pd, buf, size, peer, dmabuf, odpMode, ACCESS, mrExtra);
            long caps = c.queryDeviceEx().deviceCapFlagsEx();
            this.qpFlush = ((caps & IbvDeviceAttr.DEVICE_FLUSH_GLOBAL) != 0 ? IbAccess.FLUSH_GLOBAL : 0)
                    | ((caps & IbvDeviceAttr.DEVICE_FLUSH_PERSISTENT) != 0 ? IbAccess.FLUSH_PERSISTENT : 0);
            IbvPortAttr port = c.queryPort(1);
            this.lid = port.lid();
            this.gid = port.linkLayer() == IbvPortAttr.LINK_LAYER_ETHERNET ? IbvGid.parse(c.queryGid(1, 0)) : null;
        } catch (RuntimeException e) {
            if (c != null) {
                c.close();
            }
            proc.exit();
            throw e;
        }
    }

    private static IbvQp[] createQps(IbvPd pd, IbvCq cq, int nqp, int depth, IbvQpType qpType) {
        IbvQp[] qps = new IbvQp[nqp];
        for (int i = 0; i < nqp; i++) {
            IbvQpInitAttr a = new IbvQpInitAttr();
            a.sendCq = cq;
            a.recvCq = cq;
            a.maxSendWr = depth;
            a.maxRecvWr = depth;
            a.maxInlineData = 0;
            a.qpType = qpType;
            qps[i] = pd.createQp(a);
        }
        return qps;
    }

    /**
     * Puts bytes into the buffer at {@code va}: CPU stores for host memory, the peer device's copy
     * ({@code cuMemcpyHtoD} for a GPU, whose memory the CPU cannot touch) for peer memory.
     */
    void write(long va, byte[] src, int off, int len) {
        if (peer != null) {
            peer.copyToDevice(proc, va, src, off, len);
        } else {
            proc.write(va, src, off, len);
        }
    }

    /** Takes bytes out of the buffer at {@code va}, as {@link #write} puts them in. */
    void read(long va, byte[] dst, int off, int len) {
        if (peer != null) {
            peer.copyFromDevice(proc, va, dst, off, len);
        } else {
            proc.read(va, dst, off, len);
        }
    }

    byte readByte(long va) {
        if (peer == null) {
            return proc.readByte(va);
        }
        byte[] b = new byte[1];
        read(va, b, 0, 1);
        return b[0];
    }

    void writeByte(long va, byte v) {
        if (peer == null) {
            proc.writeByte(va, v);
        } else {
            write(va, new byte[] {v}, 0, 1);
        }
    }

    /** Frees the peer buffer now, as an application's cudaFree while an MR still uses it. */
    void freePeerBuffer() {
        peer.free(proc.pid(), buf);
        peerFreed = true;
    }

    /** {@code LID 0x0001, QPN 0x000048, PSN 0x000000, GID ::} as ibv_rc_pingpong prints an address. */
    String address() {
        return String.format("LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s", lid, qps[0].qpNum(), 0, gid == null ? "::" : IbvGid.format(gid));
    }

    /** RESET → INIT → RTR → RTS of {@code me.qps[i]} towards {@code peer.qps[i]}, as ibv_rc_pingpong does. */
    static void connect(Endpoint me, Endpoint peer, int i) {
        new RcConnect().access(ACCESS | me.qpFlush).minRnrTimer(1).rdAtomic(RD_ATOMIC).gid(peer.gid).connect(me.qps[i], peer.lid, peer.qps[i].qpNum());
    }

    @Override
    public void close() {
        try {
            // the order an application follows; each step also works on a removed device
            mr.dereg();
            for (IbvQp q : qps) {
                q.destroy();
            }
            cq.destroy();
            if (channel != null) {
                channel.destroy();
            }
            pd.dealloc();
            ctx.close();
            if (peer != null && !peerFreed) {
                peer.free(proc.pid(), buf);
            }
        } finally {
            proc.exit();
        }
    }
}

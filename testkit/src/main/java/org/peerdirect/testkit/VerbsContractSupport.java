package org.peerdirect.testkit;

import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvCq;
import org.peerdirect.ib.core.verbs.IbvDeviceAttr;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvQpAttr;
import org.peerdirect.ib.core.verbs.IbvQpInitAttr;
import org.peerdirect.ib.core.verbs.IbvQpState;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvRecvWr;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.Mm;

/**
 * The hooks and the bench of {@link VerbsContract}: what a provider's runner implements (two
 * devices of its driver on one fabric, one process, the audit at the end) and the plumbing every
 * contract test shares (a side of a connection, RC and UD bring-up as the pingpong programs do
 * it, bounded polling). Every wait is bounded; nothing sleeps to synchronise.
 *
 * @since 0.6
 */
public abstract class VerbsContractSupport {

    protected static final int RW = IbAccess.LOCAL_WRITE | IbAccess.REMOTE_READ | IbAccess.REMOTE_WRITE | IbAccess.REMOTE_ATOMIC;
    /** Bounds every wait for a completion (they come within milliseconds). */
    protected static final long WAIT_MS = 10_000;
    /** How long "no completion" is watched for. */
    protected static final long QUIET_MS = 50;
    /** Each side's registered buffer. */
    protected static final int BUF = 1 << 20;
    protected static final int QKEY = 0x11111111;

    @TempDir
    protected Path tmp;

    /** Two devices of the driver on one fabric (device 0 and 1, port 1 each, InfiniBand), one process. */
    protected abstract void start(Path tmp);

    /** {@code ibv_open_device} of device {@code dev} in {@link #process()}. */
    protected abstract IbvContext open(int dev);

    protected abstract AddressSpace process();

    /** The machine's memory (a dma-buf exporter's frames come from it). */
    protected abstract Mm mm();

    /** Takes the machine down and fails when anything was left behind (the audit). */
    protected abstract void stop();

    /** One device's side: a context, a PD, a CQ and {@link #BUF} bytes of registered memory. */
    protected final class Side {
        public final IbvContext ctx;
        public final IbvPd pd;
        public final IbvCq cq;
        public final long buf;
        public final IbvMr mr;
        public final int lid;

        Side(int dev) {
            ctx = open(dev);
            opened.add(ctx);
            pd = ctx.allocPd();
            cq = ctx.createCq(256, null);
            buf = process().mmap(BUF);
            process().populate(buf, BUF, true);
            mr = pd.regMr(buf, BUF, RW);
            lid = ctx.queryPort(1).lid();
        }

        public IbvDeviceAttr attr() {
            return ctx.queryDevice();
        }

        /** A QP of {@code type} on this side's CQ, 32 requests of 1 SGE each way unless {@code tune} says otherwise. */
        public IbvQp qp(IbvQpType type, Consumer<IbvQpInitAttr> tune) {
            IbvQpInitAttr a = new IbvQpInitAttr();
            a.qpType = type;
            a.sendCq = cq;
            a.recvCq = cq;
            a.maxSendWr = 32;
            a.maxRecvWr = 32;
            if (tune != null) {
                tune.accept(a);
            }
            return pd.createQp(a);
        }

        public void write(long off, byte[] b) {
            process().write(buf + off, b, 0, b.length);
        }

        public byte[] read(long off, int n) {
            byte[] b = new byte[n];
            process().read(buf + off, b, 0, n);
            return b;
        }

        public long getLong(long off) {
            return java.nio.ByteBuffer.wrap(read(off, 8)).order(java.nio.ByteOrder.nativeOrder()).getLong();
        }

        public void putLong(long off, long v) {
            write(off, java.nio.ByteBuffer.allocate(8).order(java.nio.ByteOrder.nativeOrder()).putLong(v).array());
        }
    }

    private final List<IbvContext> opened = new ArrayList<>();
    protected Side a;
    protected Side b;

    @BeforeEach
    void up() {
        start(tmp);
        a = new Side(0);
        b = new Side(1);
    }

    @AfterEach
    void down() {
        try {
            for (IbvContext c : opened) {
                c.close(); // destroys what a test left
            }
        } finally {
            stop();
        }
    }

    /** A context of device {@code dev} that {@link #down} closes if the test does not. */
    protected IbvContext openTracked(int dev) {
        IbvContext c = open(dev);
        opened.add(c);
        return c;
    }

    /**
     * Moves RC QPs {@code qa} (of {@link #a}) and {@code qb} (of {@link #b}) from RESET to RTS
     * towards each other, as {@code pp_connect_ctx} does: PSNs 0, MTU 4096, remote rights
     * {@link #RW}, one outstanding READ/atomic each way, the shortest RNR timer, the given RNR
     * retries (7: forever).
     */
    protected void connect(IbvQp qa, IbvQp qb, int rnrRetry) {
        connect(qa, qb, rnrRetry, RW);
    }

    /** The same with the remote rights {@code access} ({@code qp_access_flags}). */
    protected void connect(IbvQp qa, IbvQp qb, int rnrRetry, int access) {
        rts(qa, b.lid, qb.qpNum(), rnrRetry, access);
        rts(qb, a.lid, qa.qpNum(), rnrRetry, access);
    }

    private static void rts(IbvQp qp, int dlid, int destQpn, int rnrRetry, int access) {
        IbvQpAttr x = new IbvQpAttr();
        x.qpState = IbvQpState.INIT;
        x.pkeyIndex = 0;
        x.portNum = 1;
        x.qpAccessFlags = access;
        qp.modify(x, IbvQpAttr.STATE | IbvQpAttr.PKEY_INDEX | IbvQpAttr.PORT | IbvQpAttr.ACCESS_FLAGS);
        x.qpState = IbvQpState.RTR;
        x.pathMtu = 5;
        x.destQpNum = destQpn;
        x.rqPsn = 0;
        x.maxDestRdAtomic = 1;
        x.minRnrTimer = 1;
        x.dlid = dlid;
        qp.modify(x, IbvQpAttr.STATE | IbvQpAttr.AV | IbvQpAttr.PATH_MTU | IbvQpAttr.DEST_QPN | IbvQpAttr.RQ_PSN
                | IbvQpAttr.MAX_DEST_RD_ATOMIC | IbvQpAttr.MIN_RNR_TIMER);
        x.qpState = IbvQpState.RTS;
        x.timeout = 14;
        x.retryCnt = 7;
        x.rnrRetry = rnrRetry;
        x.sqPsn = 0;
        x.maxRdAtomic = 1;
        qp.modify(x, IbvQpAttr.STATE | IbvQpAttr.TIMEOUT | IbvQpAttr.RETRY_CNT | IbvQpAttr.RNR_RETRY | IbvQpAttr.SQ_PSN
                | IbvQpAttr.MAX_QP_RD_ATOMIC);
    }

    /** A UD QP from RESET to RTS on port 1 with {@link #QKEY}, as {@code ibv_ud_pingpong} does. */
    protected static void udToRts(IbvQp qp) {
        IbvQpAttr x = new IbvQpAttr();
        x.qpState = IbvQpState.INIT;
        x.pkeyIndex = 0;
        x.portNum = 1;
        x.qkey = QKEY;
        qp.modify(x, IbvQpAttr.STATE | IbvQpAttr.PKEY_INDEX | IbvQpAttr.PORT | IbvQpAttr.QKEY);
        x.qpState = IbvQpState.RTR;
        qp.modify(x, IbvQpAttr.STATE);
        x.qpState = IbvQpState.RTS;
        x.sqPsn = 0;
        qp.modify(x, IbvQpAttr.STATE | IbvQpAttr.SQ_PSN);
    }

    /** A connected RC pair, {@link #a}'s QP first, with the QPs' caps tuned by {@code tune}. */
    protected IbvQp[] rcPair(int rnrRetry, Consumer<IbvQpInitAttr> tune) {
        IbvQp qa = a.qp(IbvQpType.RC, tune);
        IbvQp qb = b.qp(IbvQpType.RC, tune);
        connect(qa, qb, rnrRetry);
        return new IbvQp[] {qa, qb};
    }

    /** A signaled request of {@code op} with wr_id {@code id} gathering {@code len} bytes at offset {@code off} of side {@code s}'s buffer. */
    protected static IbvSendWr wr(IbvWrOpcode op, Side s, long off, int len, long id) {
        IbvSendWr w = new IbvSendWr().sge(s.buf + off, len, s.mr.lkey());
        w.opcode = op;
        w.sendFlags = IbvSendWr.SEND_SIGNALED;
        w.wrId = id;
        return w;
    }

    /** The same aimed at {@code remote}'s buffer at {@code roff} (RDMA and atomics). */
    protected static IbvSendWr rdma(IbvWrOpcode op, Side s, long off, int len, Side remote, long roff, long id) {
        IbvSendWr w = wr(op, s, off, len, id);
        w.remoteAddr = remote.buf + roff;
        w.rkey = remote.mr.rkey();
        return w;
    }

    protected static IbvRecvWr recv(Side s, long off, int len, long id) {
        IbvRecvWr r = new IbvRecvWr().sge(s.buf + off, len, s.mr.lkey());
        r.wrId = id;
        return r;
    }

    /** Exactly {@code n} completions of {@code cq}, bounded by {@link #WAIT_MS}. */
    protected static List<IbvWc> await(IbvCq cq, int n) {
        List<IbvWc> out = new ArrayList<>();
        IbvWc[] wc = {new IbvWc()};
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(WAIT_MS);
        while (out.size() < n) {
            int k = cq.poll(1, wc);
            assertTrue(k >= 0, "CQ in error after " + out);
            if (k == 1) {
                IbvWc c = new IbvWc();
                c.copyFrom(wc[0]);
                out.add(c);
            } else {
                assertTrue(System.nanoTime() < deadline, "only " + out.size() + " of " + n + " completions: " + out);
                Thread.onSpinWait();
            }
        }
        return out;
    }

    protected static IbvWc await1(IbvCq cq) {
        return await(cq, 1).get(0);
    }

    /** No completion on {@code cq} for {@link #QUIET_MS}. */
    protected static void quiet(IbvCq cq, String what) {
        IbvWc[] wc = {new IbvWc()};
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(QUIET_MS);
        while (System.nanoTime() < deadline) {
            int k = cq.poll(1, wc);
            assertNull(k == 1 ? wc[0].toString() : null, what + ": no completion expected");
            Thread.onSpinWait();
        }
    }

    /** A QP's state, waiting (bounded) for the driver to report {@code want}. */
    protected static IbvQpState awaitState(IbvQp qp, IbvQpState want) {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(WAIT_MS);
        IbvQpState s;
        while ((s = qp.state()) != want && System.nanoTime() < deadline) {
            Thread.onSpinWait();
        }
        return s;
    }

    protected static byte[] pattern(int n, int seed) {
        byte[] b = new byte[n];
        for (int i = 0; i < n; i++) {
            b[i] = (byte) (i * 31 + seed);
        }
        return b;
    }
}

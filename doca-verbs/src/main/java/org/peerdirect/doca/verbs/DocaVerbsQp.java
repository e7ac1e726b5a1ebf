package org.peerdirect.doca.verbs;

import static org.peerdirect.doca.dpa.dev.DocaDpaDevVerbs.QP_DESC_SIZE;
import static org.peerdirect.doca.dpa.dev.DocaDpaDevVerbs.Q_DBR;
import static org.peerdirect.doca.dpa.dev.DocaDpaDevVerbs.Q_LOG_RQ;
import static org.peerdirect.doca.dpa.dev.DocaDpaDevVerbs.Q_LOG_RQ_STRIDE;
import static org.peerdirect.doca.dpa.dev.DocaDpaDevVerbs.Q_LOG_SQ;
import static org.peerdirect.doca.dpa.dev.DocaDpaDevVerbs.Q_MAX_RECV_SGE;
import static org.peerdirect.doca.dpa.dev.DocaDpaDevVerbs.Q_MAX_SEND_SGE;
import static org.peerdirect.doca.dpa.dev.DocaDpaDevVerbs.Q_OUTBOX;
import static org.peerdirect.doca.dpa.dev.DocaDpaDevVerbs.Q_QPN;
import static org.peerdirect.doca.dpa.dev.DocaDpaDevVerbs.Q_SQ_PI;
import static org.peerdirect.doca.dpa.dev.DocaDpaDevVerbs.Q_STATE;
import static org.peerdirect.doca.dpa.dev.DocaDpaDevVerbs.Q_WQ;
import static org.peerdirect.doca.verbs.DocaVerbsQpAttr.*;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.dev.DocaDev;
import org.peerdirect.doca.dpa.DocaDpa;
import org.peerdirect.doca.dpa.DocaDpaCompletion;
import org.peerdirect.flexio.FlexioCq;
import org.peerdirect.flexio.FlexioException;
import org.peerdirect.flexio.FlexioOutbox;
import org.peerdirect.flexio.FlexioQp;
import org.peerdirect.flexio.FlexioQp.QpState;

/**
 * {@code struct doca_verbs_qp} (DOCA 3.2 {@code doca_verbs.h}) with its data path on the DPA: an RC
 * QP created with {@link #create}, moved RESET→INIT→RTR→RTS by {@link #modify} with the attributes
 * and mask the caller gives, read back by {@link #query}, posted on by DPA code through its handle
 * ({@link #getDpaHandle}, {@link org.peerdirect.doca.dpa.dev.DocaDpaDevVerbs}), destroyed by
 * {@link #destroy}. Its send and receive CQs are DOCA DPA completion contexts.
 *
 * <p>Underneath ([model] as DOCA's sample does by hand with {@code doca_umem_dpa_create} and
 * {@code doca_uar_dpa_create}): a DevX RC QP through FlexIO on the completion context's DPA process,
 * its work queue and doorbell record in that DPA context's heap, an outbox for its doorbells, and
 * the descriptor the DPA handle names (layout {@code DocaDpaDevVerbs.Q_*}). The library allocates
 * the rings itself: {@code set_external_umem}, {@code set_external_dbr_umem} and
 * {@code set_external_uar} are not built.
 *
 * <p>Modify follows ibverbs' RC state table ({@code ib_modify_qp_is_ok}): a transition the table
 * does not have is BAD_STATE; a required attribute missing from the mask, or one the transition
 * does not take, is INVALID_VALUE naming it. The library keeps every attribute given so far and
 * writes them all at each transition (the device takes the whole context each time).
 *
 * <p>Not thread-safe, as DOCA documents (one caller at a time).
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/doca+verbs/index.html">DOCA Verbs</a>
 */
public final class DocaVerbsQp {

    /** Per transition: the attributes required and those also allowed (ibverbs' {@code qp_state_table}, RC, as DOCA's sample uses it). */
    private record Rule(int from, int to, int required, int optional) {
    }

    private static final int ACCESS = ALLOW_REMOTE_WRITE | ALLOW_REMOTE_READ | ALLOW_REMOTE_ATOMIC;
    private static final Rule[] RULES = {
        new Rule(QP_STATE_RST, QP_STATE_INIT, PKEY_INDEX | PORT_NUM, ACCESS),
        new Rule(QP_STATE_INIT, QP_STATE_INIT, 0, ACCESS | PKEY_INDEX | PORT_NUM),
        new Rule(QP_STATE_INIT, QP_STATE_RTR, AH_ATTR | PATH_MTU | DEST_QP_NUM | RQ_PSN | MIN_RNR_TIMER,
                ACCESS | PKEY_INDEX | MAX_DEST_RD_ATOMIC),
        new Rule(QP_STATE_RTR, QP_STATE_RTS, SQ_PSN | ACK_TIMEOUT | RETRY_CNT | RNR_RETRY,
                ACCESS | MIN_RNR_TIMER | MAX_QP_RD_ATOMIC),
        new Rule(QP_STATE_RTS, QP_STATE_RTS, 0, ACCESS | MIN_RNR_TIMER),
    };
    private static final String[] STATES = {"RST", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};

    private final DocaVerbsQpInitAttr init;
    private final DocaDev dev;
    private final DocaDpa dpa;
    private final DocaVerbsQpAttr cur = DocaVerbsQpAttr.create();
    private int state = QP_STATE_RST;
    private FlexioQp qp;
    private FlexioOutbox outbox;
    private long wq;
    private long dbr;
    private long desc;
    /** The completion contexts this QP counts as a user of (attached, not yet detached). */
    private int attached;
    private boolean destroyed;

    private DocaVerbsQp(DocaVerbsQpInitAttr init) {
        this.init = init;
        this.dev = init.pd;
        this.dpa = init.sendCompletion.dpa();
    }

    /**
     * {@code doca_verbs_qp_create}: an RC QP in RESET, its queues in the DPA heap of the completion
     * contexts' DPA context, its completions to them.
     *
     * @throws DocaException INVALID_VALUE (no PD, no completion context, the two completion contexts
     *         of different DPA contexts, a DPA context on another device than the PD),
     *         NOT_SUPPORTED (UC/UD, no external data path: the host data path is not built),
     *         BAD_STATE (a completion context not started), DRIVER (the device refused)
     */
    public static DocaVerbsQp create(DocaDev verbsContext, DocaVerbsQpInitAttr attr) {
        String w = "doca_verbs_qp_create";
        DocaException.check(attr != null, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": null init attributes");
        attr.live(w);
        DocaException.check(attr.pd != null, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": no PD (doca_verbs_qp_init_attr_set_pd)");
        DocaException.check(verbsContext == attr.pd, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": the PD is of another device than the verbs context");
        attr.pd.checkOpen(w);
        DocaException.check(attr.qpType == DocaVerbsQpInitAttr.QP_TYPE_RC, DocaError.DOCA_ERROR_NOT_SUPPORTED, w + ": only RC QPs are built");
        DocaException.check(attr.externalDatapath, DocaError.DOCA_ERROR_NOT_SUPPORTED,
                w + ": only a data path on the DPA is built (doca_verbs_qp_init_attr_set_external_datapath_en)");
        DocaException.check(attr.sendCompletion != null && attr.receiveCompletion != null, DocaError.DOCA_ERROR_INVALID_VALUE,
                w + ": no " + (attr.sendCompletion == null ? "send" : "receive") + " DPA completion context (the QP's CQ)");
        DocaException.check(attr.sendCompletion.dpa() == attr.receiveCompletion.dpa(), DocaError.DOCA_ERROR_INVALID_VALUE,
                w + ": the send completion context is of " + attr.sendCompletion.dpa() + ", the receive one of another DPA context, "
                        + attr.receiveCompletion.dpa());
        DocaException.check(attr.sendCompletion.dpa().dev() == attr.pd, DocaError.DOCA_ERROR_INVALID_VALUE,
                w + ": the completion contexts' DPA context is on " + attr.sendCompletion.dpa().dev().name() + ", the PD on " + attr.pd.name());
        DocaVerbsQp q = new DocaVerbsQp(attr.copy());
        q.build(w);
        attr.pd.hold(q);
        return q;
    }

    private void build(String w) {
        int logSq = log2(init.sqWr);
        int logRq = log2(init.rqWr);
        int logStride = 2; // 64-byte receive WQEs: up to three data segments and the terminator
        FlexioCq scq = init.sendCompletion.flexioCq(); // BAD_STATE unless started
        FlexioCq rcq = init.receiveCompletion.flexioCq();
        try {
            wq = dpa.memAlloc(((16L << logStride) << logRq) + (64L << logSq));
            dbr = dpa.memAlloc(64);
            dpa.memset(dbr, 0, 64);
            qp = FlexioQp.create(dpa.flexioProcess(), new FlexioQp.Attr(scq, rcq, logSq, logRq, logStride, wq, dbr));
            outbox = FlexioOutbox.create(dpa.flexioProcess());
            desc = dpa.memAlloc(QP_DESC_SIZE);
            dpa.memset(desc, 0, QP_DESC_SIZE);
            ByteBuffer b = ByteBuffer.allocate(QP_DESC_SIZE).order(ByteOrder.LITTLE_ENDIAN);
            b.putInt(Q_QPN, qp.qpNum()).putInt(Q_OUTBOX, outbox.id()).putInt(Q_STATE, QP_STATE_RST).putInt(Q_LOG_SQ, logSq)
                    .putInt(Q_LOG_RQ, logRq).putInt(Q_LOG_RQ_STRIDE, logStride).putInt(Q_MAX_SEND_SGE, init.sendMaxSges)
                    .putInt(Q_MAX_RECV_SGE, init.receiveMaxSges).putLong(Q_WQ, wq).putLong(Q_DBR, dbr);
            dpa.h2dMemcpy(desc, b.array());
            init.sendCompletion.attachQp(qp.qpNum(), 0);
            attached = 1;
            if (init.receiveCompletion != init.sendCompletion) {
                init.receiveCompletion.attachQp(qp.qpNum(), 0);
                attached = 2;
            }
        } catch (FlexioException e) {
            release();
            throw new DocaException(DocaError.DOCA_ERROR_DRIVER, w + ": " + e.getMessage(), e);
        } catch (RuntimeException e) {
            release();
            throw e;
        }
    }

    /**
     * {@code doca_verbs_qp_modify}: the attributes {@code mask} names, with the transition to
     * {@code attr}'s next state when it names {@link DocaVerbsQpAttr#NEXT_STATE} (else a modify
     * within the current state). Any state may go to ERR or RESET with NEXT_STATE alone.
     *
     * @throws DocaException BAD_STATE (a transition RC does not have), INVALID_VALUE (a required
     *         attribute missing, one the transition does not take, an AH without a GID), DRIVER
     *         (the device refused; the QP keeps its state)
     */
    public void modify(DocaVerbsQpAttr attr, int mask) {
        String w = "doca_verbs_qp_modify";
        live(w);
        DocaException.check(attr != null, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": null attributes");
        attr.live(w);
        DocaException.check((mask & ~((1 << NAMES.length) - 1)) == 0, DocaError.DOCA_ERROR_INVALID_VALUE,
                String.format("%s: mask 0x%x has bits DOCA_VERBS_QP_ATTR_* does not define", w, mask));
        if ((mask & CURRENT_STATE) != 0) {
            DocaException.check(attr.currentState == state, DocaError.DOCA_ERROR_BAD_STATE,
                    w + ": current_state " + STATES[attr.currentState] + " but the QP is in " + STATES[state]);
        }
        int to = (mask & NEXT_STATE) != 0 ? attr.nextState : state;
        int given = mask & ~(NEXT_STATE | CURRENT_STATE);
        if (to == QP_STATE_ERR || to == QP_STATE_RST) {
            DocaException.check(given == 0, DocaError.DOCA_ERROR_INVALID_VALUE,
                    w + ": " + STATES[state] + "->" + STATES[to] + " takes no attributes, the mask has " + names(given));
            transition(w, to);
            return;
        }
        Rule r = rule(state, to);
        DocaException.check(r != null, DocaError.DOCA_ERROR_BAD_STATE, w + ": QP 0x" + Integer.toHexString(qp.qpNum()) + " is in "
                + STATES[state] + ", RC has no transition to " + STATES[to] + ((mask & NEXT_STATE) == 0 ? " (no NEXT_STATE in the mask)" : ""));
        int missing = r.required() & ~given;
        DocaException.check(missing == 0, DocaError.DOCA_ERROR_INVALID_VALUE,
                w + ": " + STATES[state] + "->" + STATES[to] + " requires " + names(missing) + " in the mask");
        int extra = given & ~(r.required() | r.optional());
        DocaException.check(extra == 0, DocaError.DOCA_ERROR_INVALID_VALUE,
                w + ": " + STATES[state] + "->" + STATES[to] + " does not take " + names(extra));
        if ((given & AH_ATTR) != 0) {
            DocaException.check(attr.ahAttr != null, DocaError.DOCA_ERROR_INVALID_VALUE,
                    w + ": AH_ATTR in the mask but no AH attributes (doca_verbs_qp_attr_set_ah_attr)");
            DocaException.check(attr.ahAttr.gid != null, DocaError.DOCA_ERROR_INVALID_VALUE,
                    w + ": the AH attributes have no GID (doca_verbs_ah_attr_set_gid): RoCE routes by the remote GID");
            DocaException.check(attr.ahAttr.dev == dev, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": the AH attributes are of another device");
        }
        DocaVerbsQpAttr next = DocaVerbsQpAttr.create();
        next.apply(cur, -1 & ~AH_ATTR);
        next.ahAttr = cur.ahAttr;
        next.apply(attr, given);
        transition(w, to, next);
        cur.apply(next, -1);
    }

    private void transition(String w, int to) {
        transition(w, to, cur);
    }

    /** The device command with every attribute of {@code a} (the device takes a whole context each time), then the DPA's view. */
    private void transition(String w, int to, DocaVerbsQpAttr a) {
        DocaVerbsAhAttr ah = a.ahAttr;
        int access = (a.allowRemoteWrite ? FlexioQp.ACCESS_REMOTE_WRITE : 0) | (a.allowRemoteRead ? FlexioQp.ACCESS_REMOTE_READ : 0)
                | (a.allowRemoteAtomic ? FlexioQp.ACCESS_REMOTE_ATOMIC : 0);
        FlexioQp.ModifyAttr m = new FlexioQp.ModifyAttr(QpState.values()[state], QpState.values()[to], Math.max(a.portNum, 1), a.pkeyIndex,
                access, a.pathMtu + 1 /* PRM: 1 = 256 bytes */, a.destQpNum, ah != null && ah.addrType != DocaVerbsAhAttr.ADDR_TYPE_IB_NO_GRH,
                ah == null ? null : ah.gid, ah == null ? 0 : ah.sgidIndex, ah == null ? 64 : ah.hopLimit, a.rqPsn, a.minRnrTimer,
                log2(a.maxDestRdAtomic), a.sqPsn, a.retryCnt, a.rnrRetry, a.ackTimeout, log2(a.maxQpRdAtomic));
        try {
            qp.modify(m);
        } catch (FlexioException e) {
            throw new DocaException(DocaError.DOCA_ERROR_DRIVER, w + ": " + STATES[state] + "->" + STATES[to] + ": " + e.getMessage(), e);
        }
        state = to;
        if (to == QP_STATE_RST) {
            // the device's queues start over: so do the DPA's producer indexes and the doorbell record
            dpa.memset(dbr, 0, 64);
            dpa.h2dMemcpy(desc + Q_SQ_PI, new byte[Q_WQ - Q_SQ_PI]);
        }
        dpa.h2dMemcpy(desc + Q_STATE, ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putInt(to).array());
    }

    /**
     * {@code doca_verbs_qp_query}: {@code attr} gets every attribute given so far and the state the
     * device reports (which differs from the last modify's after the device moved the QP to ERR);
     * {@code initAttr}, when not null, what the QP was created with. Returns the mask of what was filled.
     */
    public int query(DocaVerbsQpAttr attr, DocaVerbsQpInitAttr initAttr) {
        String w = "doca_verbs_qp_query";
        live(w);
        DocaException.check(attr != null, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": null attributes");
        attr.live(w);
        QpState hw;
        try {
            hw = qp.queryState();
        } catch (FlexioException e) {
            throw new DocaException(DocaError.DOCA_ERROR_DRIVER, w + ": " + e.getMessage(), e);
        }
        attr.apply(cur, -1);
        attr.currentState = hw.ordinal(); // the enums share their order
        attr.nextState = attr.currentState;
        if (initAttr != null) {
            initAttr.live(w);
            DocaVerbsQpInitAttr c = init;
            initAttr.pd = c.pd;
            initAttr.qpType = c.qpType;
            initAttr.sqWr = c.sqWr;
            initAttr.rqWr = c.rqWr;
            initAttr.sendMaxSges = c.sendMaxSges;
            initAttr.receiveMaxSges = c.receiveMaxSges;
            initAttr.sendCompletion = c.sendCompletion;
            initAttr.receiveCompletion = c.receiveCompletion;
            initAttr.externalDatapath = c.externalDatapath;
        }
        return (1 << NAMES.length) - 1;
    }

    /** {@code doca_verbs_qp_get_qpn}. */
    public int getQpn() {
        live("doca_verbs_qp_get_qpn");
        return qp.qpNum();
    }

    /**
     * {@code doca_verbs_qp_get_dpa_handle}: what {@code doca_dpa_dev_verbs_qp_*} take, on {@code dpa}
     * (the DPA context whose heap holds the queues; another one is INVALID_VALUE).
     */
    public long getDpaHandle(DocaDpa on) {
        String w = "doca_verbs_qp_get_dpa_handle";
        live(w);
        DocaException.check(on == dpa, DocaError.DOCA_ERROR_INVALID_VALUE,
                w + ": the QP's queues are in " + dpa + "; " + on + " is another DPA context");
        return desc;
    }

    /** The DOCA state after the last modify. */
    public int state() {
        return state;
    }

    /**
     * {@code doca_verbs_qp_destroy}: the QP, its queues and descriptor; the completion contexts lose
     * a user (they can be stopped once none is left). INVALID_VALUE the second time.
     */
    public void destroy() {
        live("doca_verbs_qp_destroy");
        release();
        destroyed = true;
        dev.unhold(this);
    }

    private void release() {
        if (qp != null) {
            qp.destroy();
            qp = null;
        }
        if (attached > 0) {
            init.sendCompletion.detachQp();
        }
        if (attached > 1) {
            init.receiveCompletion.detachQp();
        }
        attached = 0;
        if (outbox != null) {
            outbox.destroy();
            outbox = null;
        }
        for (long a : new long[] {wq, dbr, desc}) {
            if (a != 0) {
                try {
                    dpa.memFree(a);
                } catch (DocaException e) {
                    // the DPA context stopped first: the memory went with its process
                }
            }
        }
        wq = dbr = desc = 0;
    }

    private void live(String w) {
        DocaException.check(!destroyed, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": the QP was destroyed");
    }

    private static Rule rule(int from, int to) {
        for (Rule r : RULES) {
            if (r.from() == from && r.to() == to) {
                return r;
            }
        }
        return null;
    }

    private static int log2(int n) {
        return Math.max(0, 32 - Integer.numberOfLeadingZeros(n - 1));
    }

    @Override
    public String toString() {
        return "doca_verbs_qp " + (qp == null ? "(destroyed)" : "0x" + Integer.toHexString(qp.qpNum())) + " " + STATES[state] + " on " + dev.name();
    }
}

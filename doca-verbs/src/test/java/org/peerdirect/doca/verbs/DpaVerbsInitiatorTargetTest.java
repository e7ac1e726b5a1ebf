package org.peerdirect.doca.verbs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.peerdirect.dpa.samples.dev.VerbsInitiatorTargetDev.*;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;

import org.junit.jupiter.api.Test;
import org.peerdirect.doca.DocaAccessFlag;
import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.dpa.DocaDpaCompletion;
import org.peerdirect.doca.dpa.DocaDpaThread;
import org.peerdirect.doca.dpa.DpaLabFixture;
import org.peerdirect.doca.dpa.dev.DocaDpaDevCompletion;
import org.peerdirect.doca.syncevent.DocaSyncEvent;
import org.peerdirect.dpa.samples.dev.VerbsInitiatorTargetDevStubs;
import org.peerdirect.flexio.FlexioQp;

/**
 * DPA_MODEL.md §4 scenario 8, DOCA's {@code dpa_verbs_initiator_target} sample: an initiator and a
 * target, each a DOCA verbs RC QP with its data path on the DPA, a DOCA DPA completion context as
 * its send and receive CQ, a thread polling it, an 8-byte buffer in DPA memory with a DOCA mmap,
 * and a sync event (DPA publisher; [model] DPA subscriber, the sample's is the CPU) the host waits past 9 for. The initiator sends
 * its value, the target increments it and writes it back, three times: the initiator's buffer ends
 * at 0xf. [model] Both sides share one DPA context (the sample runs them on two hosts); the QPs are
 * joined in loopback through the port's GID.
 */
class DpaVerbsInitiatorTargetTest extends DpaLabFixture {

    private static final Duration BOUND = Duration.ofSeconds(60);
    private static final int RW = DocaAccessFlag.DOCA_ACCESS_FLAG_LOCAL_READ_WRITE | DocaAccessFlag.DOCA_ACCESS_FLAG_RDMA_WRITE
            | DocaAccessFlag.DOCA_ACCESS_FLAG_RDMA_READ;
    /** {@code VERBS_SAMPLE_EVENT_WAIT_THRESHOLD}, {@code VERBS_SAMPLE_QUEUE_SIZE}. */
    private static final long THRESHOLD = 9;
    private static final int QUEUE_SIZE = 4;

    DpaVerbsInitiatorTargetTest() {
        super(VerbsInitiatorTargetDevStubs.APP);
    }

    /** One side of the sample: its QP, thread, completion context, buffer, event and argument block. */
    record Side(DocaVerbsQp qp, long qpHandle, DocaDpaThread thread, DocaDpaCompletion comp, long buf, int mkey, DocaSyncEvent ev, long arg) {
    }

    /** {@code doca_mmap_obj_init} of the sample: a map of DPA memory; its DPA handle. */
    private int dpaMap(long daddr, long len) {
        return dpaMmap(dpa, dev, daddr, len, RW).devGetDpaHandle(dev);
    }

    /** The sample's {@code create_verbs_qp}: RC, the completion context as send and receive CQ, the data path on the DPA. */
    DocaVerbsQp createQp(DocaDpaCompletion comp) {
        DocaVerbsQpInitAttr ia = DocaVerbsQpInitAttr.create();
        ia.setExternalDatapathEn(true);
        ia.setPd(dev);
        ia.setSqWr(QUEUE_SIZE);
        ia.setRqWr(QUEUE_SIZE);
        ia.setQpType(DocaVerbsQpInitAttr.QP_TYPE_RC);
        ia.setSendDpaCompletion(comp);
        ia.setReceiveDpaCompletion(comp);
        ia.setSendMaxSges(1);
        ia.setReceiveMaxSges(1);
        DocaVerbsQp qp = DocaVerbsQp.create(dev, ia);
        ia.destroy();
        undo.add(qp::destroy);
        return qp;
    }

    private DocaDpaCompletion completion(DocaDpaThread t) {
        DocaDpaCompletion comp = DocaDpaCompletion.create(dpa, QUEUE_SIZE);
        undo.add(comp::destroy);
        comp.setThread(t);
        comp.start();
        return comp;
    }

    private Side side(boolean initiator) {
        long buf = alloc(8);
        int mkey = dpaMap(buf, 8);
        long arg = alloc(A_SIZE);
        DocaDpaThread t = DocaDpaThread.create(dpa);
        undo.add(t::destroy);
        t.setFuncArg(initiator ? VerbsInitiatorTargetDevStubs.INITIATOR_THREAD : VerbsInitiatorTargetDevStubs.TARGET_THREAD, arg);
        t.start();
        DocaDpaCompletion comp = completion(t);
        t.run();
        DocaVerbsQp qp = createQp(comp);
        DocaSyncEvent ev = dpaEvent(); // [model] a DPA subscriber where the sample's is the CPU
        return new Side(qp, qp.getDpaHandle(dpa), t, comp, buf, mkey, ev, arg);
    }

    /** The sample's {@code connect_verbs_qp}: RESET→INIT→RTR→RTS towards {@code remoteQpn}, the masks as the sample gives them. */
    void connect(DocaVerbsQp qp, int remoteQpn) {
        DocaVerbsAhAttr ah = DocaVerbsAhAttr.create(dev);
        ah.setAddrType(DocaVerbsAhAttr.ADDR_TYPE_IPV4);
        ah.setSgidIndex(0);
        ah.setHopLimit(255);
        ah.setGid(FlexioQp.gid(dev.ibvContext().queryGid(1, 0)));
        DocaVerbsQpAttr a = DocaVerbsQpAttr.create();
        a.setNextState(DocaVerbsQpAttr.QP_STATE_INIT);
        a.setAllowRemoteWrite(true);
        a.setAllowRemoteRead(true);
        a.setPortNum(1);
        qp.modify(a, DocaVerbsQpAttr.NEXT_STATE | DocaVerbsQpAttr.ALLOW_REMOTE_WRITE | DocaVerbsQpAttr.ALLOW_REMOTE_READ
                | DocaVerbsQpAttr.PKEY_INDEX | DocaVerbsQpAttr.PORT_NUM);
        a.setNextState(DocaVerbsQpAttr.QP_STATE_RTR);
        a.setRqPsn(0);
        a.setDestQpNum(remoteQpn);
        a.setMinRnrTimer(1);
        a.setPathMtu(DocaVerbsQpAttr.MTU_SIZE_1K_BYTES);
        a.setAhAttr(ah);
        qp.modify(a, DocaVerbsQpAttr.NEXT_STATE | DocaVerbsQpAttr.RQ_PSN | DocaVerbsQpAttr.DEST_QP_NUM | DocaVerbsQpAttr.MIN_RNR_TIMER
                | DocaVerbsQpAttr.PATH_MTU | DocaVerbsQpAttr.AH_ATTR);
        a.setNextState(DocaVerbsQpAttr.QP_STATE_RTS);
        a.setSqPsn(0);
        a.setAckTimeout(14);
        a.setRetryCnt(7);
        a.setRnrRetry(1);
        qp.modify(a, DocaVerbsQpAttr.NEXT_STATE | DocaVerbsQpAttr.SQ_PSN | DocaVerbsQpAttr.ACK_TIMEOUT | DocaVerbsQpAttr.RETRY_CNT
                | DocaVerbsQpAttr.RNR_RETRY);
        a.destroy();
        ah.destroy();
    }

    /** The sample's {@code init_datapath_attr_in_dpa}: the thread's argument block. */
    private void initArg(Side me, Side peer, boolean initiator) {
        if (initiator) {
            dpa.h2dMemcpy(me.buf(), le(START_VALUE));
        }
        dpa.h2dMemcpy(me.arg(), le(me.comp().getDpaHandle(), me.qpHandle(), me.ev().getDpaHandle(dpa), THRESHOLD + 1, me.buf(), peer.buf(),
                me.mkey(), peer.mkey(), 8));
    }

    private static byte[] le(long... v) {
        ByteBuffer b = ByteBuffer.allocate(8 * v.length).order(ByteOrder.LITTLE_ENDIAN);
        for (long x : v) {
            b.putLong(x);
        }
        return b.array();
    }

    private long[] words(long daddr, int n) {
        ByteBuffer b = ByteBuffer.wrap(dpa.d2hMemcpy(daddr, 8 * n)).order(ByteOrder.LITTLE_ENDIAN);
        long[] w = new long[n];
        for (int i = 0; i < n; i++) {
            w[i] = b.getLong();
        }
        return w;
    }

    private Side[] build() {
        return build(true);
    }

    private Side[] build(boolean connect) {
        Side target = side(false);
        Side initiator = side(true);
        if (connect) {
            connect(target.qp(), initiator.qp().getQpn());
            connect(initiator.qp(), target.qp().getQpn());
        }
        initArg(target, initiator, false);
        initArg(initiator, target, true);
        return new Side[] {initiator, target};
    }

    @Test
    void theInitiatorsValueGoesRoundThreeTimesAndEndsAt0xf() {
        Side[] s = build();
        Side ini = s[0], tgt = s[1];
        dpa.rpc(VerbsInitiatorTargetDevStubs.TARGET_TRIGGER_FIRST_ITERATION, tgt.qpHandle(), tgt.buf(), tgt.mkey(), 8, tgt.arg());
        dpa.rpc(VerbsInitiatorTargetDevStubs.INITIATOR_TRIGGER_FIRST_ITERATION, ini.qpHandle(), ini.buf(), ini.mkey(), 8, tgt.buf(), tgt.mkey(), ini.arg());
        tgt.ev().waitGt(THRESHOLD, -1L, BOUND);
        ini.ev().waitGt(THRESHOLD, -1L, BOUND);
        assertEquals(END_VALUE, words(ini.buf(), 1)[0], "the initiator's buffer after the sample");
        assertEquals(END_VALUE - 1, words(tgt.buf(), 1)[0], "the target's buffer: the last value it wrote");
        assertEquals(0, words(ini.arg() + A_STATUS, 1)[0], "the initiator's return_status");
        long[] il = words(ini.arg() + A_LOG, 4 * EXPECTED);
        assertEquals(EXPECTED, words(ini.arg() + A_NUM, 1)[0], "the initiator took one send completion per send");
        for (int n = 0; n < EXPECTED; n++) {
            assertEquals(DocaDpaDevCompletion.COMP_SEND, il[4 * n + L_TYPE / 8], "initiator completion " + n + " is its send's");
            assertEquals(ini.qp().getQpn(), il[4 * n + L_QPN / 8], "initiator completion " + n + ": its QP");
            assertEquals(n, il[4 * n + L_WQE_COUNTER / 8], "initiator completion " + n + ": WQE counter");
        }
        int n = (int) words(tgt.arg() + A_NUM, 1)[0];
        assertEquals(2 * EXPECTED, n, "the target: three receives and three writes");
        long[] tl = words(tgt.arg() + A_LOG, 4 * n);
        int recvs = 0;
        int writes = 0;
        for (int i = 0; i < n; i++) {
            long type = tl[4 * i];
            assertEquals(tgt.qp().getQpn(), tl[4 * i + 1], "target completion " + i + ": its QP");
            if (type == DocaDpaDevCompletion.COMP_RECV_SEND) {
                assertEquals(8, tl[4 * i + 3], "target receive " + recvs + ": 8 bytes");
                assertEquals(recvs++, tl[4 * i + 2], "target receive WQE counter");
            } else {
                assertEquals(DocaDpaDevCompletion.COMP_SEND, type, "target completion " + i + ": a receive or its write's");
                assertEquals(writes++, tl[4 * i + 2], "target write WQE counter");
            }
        }
        assertEquals(EXPECTED, recvs, "target receives");
        assertEquals(1, ini.thread().activations(), "the initiator's thread ran once (it polls)");
        assertTrue(lab.dpa().stream().noneMatch(l -> l.matches(".*\\bC[1-7]\\b.*")), "no memory-model finding: " + lab.dpa());
        DocaVerbsQpAttr q = DocaVerbsQpAttr.create();
        DocaVerbsQpInitAttr qi = DocaVerbsQpInitAttr.create();
        ini.qp().query(q, qi);
        assertEquals(DocaVerbsQpAttr.QP_STATE_RTS, q.getCurrentState(), "the device's state");
        assertEquals(tgt.qp().getQpn(), q.getDestQpNum());
        assertEquals(14, q.getAckTimeout());
        assertEquals(QUEUE_SIZE, qi.getSqWr());
    }

    /**
     * Mutant: the initiator's first send rung without the write-back before the doorbell
     * ({@code qp_commit_send} without its {@code __dpa_thread_memory_writeback}): the checker names
     * the RPC's doorbell line (C1), the process ends (strict), the event is never set.
     */
    @Test
    void aCommitWithoutWritebackIsC1NamingItsLine() {
        Side[] s = build();
        Side ini = s[0], tgt = s[1];
        dpa.rpc(VerbsInitiatorTargetDevStubs.TARGET_TRIGGER_FIRST_ITERATION, tgt.qpHandle(), tgt.buf(), tgt.mkey(), 8, tgt.arg());
        try {
            dpa.rpc(VerbsInitiatorTargetDevStubs.COMMIT_SEND_WITHOUT_WRITEBACK, ini.qpHandle(), ini.buf(), ini.mkey(), 8, tgt.buf(), tgt.mkey(), ini.arg());
        } catch (DocaException e) { // the process may end before the RPC answers
            assertEquals(DocaError.DOCA_ERROR_DRIVER, e.error(), e.getMessage());
        }
        String ps = awaitFinding("C1");
        assertTrue(ps.contains("without __dpa_thread_memory_writeback before the doorbell") && ps.contains("VerbsInitiatorTargetDev.commitSendWithoutWriteback"), ps);
        assertThrows(DocaException.class, () -> ini.ev().waitGt(THRESHOLD, -1L, Duration.ofMillis(200)));
    }

    /**
     * Mutant: the target's first receive committed without the W→W fence between its WQE and the
     * doorbell record: when the NIC takes the WQE for the initiator's send, C6 names the record's store.
     */
    @Test
    void aReceiveCommittedWithoutFenceIsC6() {
        Side[] s = build();
        Side ini = s[0], tgt = s[1];
        dpa.rpc(VerbsInitiatorTargetDevStubs.COMMIT_RECV_WITHOUT_FENCE, tgt.qpHandle(), tgt.buf(), tgt.mkey(), 8, tgt.arg());
        try {
            dpa.rpc(VerbsInitiatorTargetDevStubs.INITIATOR_TRIGGER_FIRST_ITERATION, ini.qpHandle(), ini.buf(), ini.mkey(), 8, tgt.buf(), tgt.mkey(), ini.arg());
        } catch (DocaException e) {
            assertEquals(DocaError.DOCA_ERROR_DRIVER, e.error(), e.getMessage());
        }
        String ps = awaitFinding("C6");
        assertTrue(ps.contains("memory_fence(W, W) missing"), ps);
    }

    /**
     * Mutant: the sample's connect with its RESET→INIT step left out. INIT→RTR on a QP in RESET is
     * BAD_STATE naming both states, the QP stays in RESET, and the initiator's first send on it
     * ends the DPA process with ERROR_QP_STATE (DOCA's post returns nothing to report it with).
     */
    @Test
    void aQpModifiedOutOfOrderIsBadStateAndCannotPost() {
        Side[] s = build(false);
        Side ini = s[0], tgt = s[1];
        DocaVerbsAhAttr ah = DocaVerbsAhAttr.create(dev);
        ah.setGid(FlexioQp.gid(dev.ibvContext().queryGid(1, 0)));
        DocaVerbsQpAttr a = DocaVerbsQpAttr.create();
        a.setNextState(DocaVerbsQpAttr.QP_STATE_RTR);
        a.setDestQpNum(tgt.qp().getQpn());
        a.setAhAttr(ah);
        DocaException e = assertThrows(DocaException.class, () -> ini.qp().modify(a, DocaVerbsQpAttr.NEXT_STATE | DocaVerbsQpAttr.RQ_PSN
                | DocaVerbsQpAttr.DEST_QP_NUM | DocaVerbsQpAttr.MIN_RNR_TIMER | DocaVerbsQpAttr.PATH_MTU | DocaVerbsQpAttr.AH_ATTR));
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, e.error(), e.getMessage());
        assertTrue(e.getMessage().contains("is in RST, RC has no transition to RTR"), e.getMessage());
        assertEquals(DocaVerbsQpAttr.QP_STATE_RST, ini.qp().state());
        e = assertThrows(DocaException.class, () -> dpa.rpc(VerbsInitiatorTargetDevStubs.INITIATOR_TRIGGER_FIRST_ITERATION, ini.qpHandle(), ini.buf(),
                ini.mkey(), 8, tgt.buf(), tgt.mkey(), ini.arg()));
        assertEquals(DocaError.DOCA_ERROR_DRIVER, e.error(), e.getMessage());
        assertTrue(e.getMessage().contains(Integer.toHexString(org.peerdirect.doca.dpa.dev.DocaDpaDevVerbs.ERROR_QP_STATE)), e.getMessage());
    }

    private String awaitFinding(String check) {
        long deadline = System.nanoTime() + BOUND.toNanos();
        String ps;
        while (!(ps = String.join("\n", lab.dpa())).contains(check)) {
            assertTrue(System.nanoTime() < deadline, check + " reported: " + ps);
            Thread.onSpinWait();
        }
        return ps;
    }
}

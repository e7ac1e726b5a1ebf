package org.peerdirect.doca.verbs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.peerdirect.doca.verbs.DocaVerbsQpAttr.*;
import static org.peerdirect.dpa.samples.dev.VerbsInitiatorTargetDev.*;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;
import org.peerdirect.doca.DocaAccessFlag;
import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.dpa.DocaDpa;
import org.peerdirect.doca.dpa.DocaDpaCompletion;
import org.peerdirect.doca.dpa.DocaDpaRegistry;
import org.peerdirect.doca.dpa.DocaDpaThread;
import org.peerdirect.doca.dpa.DpaLabFixture;
import org.peerdirect.doca.dpa.dev.DocaDpaDevCompletion;
import org.peerdirect.doca.dpa.dev.DocaDpaDevVerbs;
import org.peerdirect.doca.syncevent.DocaSyncEvent;
import org.peerdirect.dpa.samples.dev.VerbsInitiatorTargetDevStubs;
import org.peerdirect.flexio.FlexioQp;

/**
 * DOCA verbs QPs on their own: the modify state machine and its masks, query, the opcodes a DPA
 * posts with the completion elements they give, and bad input (a completion context of another
 * DPA context, a post on a QP not in RTS, destroy order).
 */
class DocaVerbsQpTest extends DpaLabFixture {

    private static final int RW = DocaAccessFlag.DOCA_ACCESS_FLAG_LOCAL_READ_WRITE | DocaAccessFlag.DOCA_ACCESS_FLAG_RDMA_WRITE
            | DocaAccessFlag.DOCA_ACCESS_FLAG_RDMA_READ;

    DocaVerbsQpTest() {
        super(VerbsInitiatorTargetDevStubs.APP);
    }

    /** A completion context whose thread never runs (its CQ is never armed): the host polls it by RPC. */
    private DocaDpaCompletion polled(DocaDpa on) {
        DocaDpaThread t = DocaDpaThread.create(on);
        t.setFuncArg(VerbsInitiatorTargetDevStubs.INITIATOR_THREAD, 0);
        t.start();
        undo.add(t::destroy);
        DocaDpaCompletion c = DocaDpaCompletion.create(on, 16);
        c.setThread(t);
        c.start();
        undo.add(c::destroy);
        return c;
    }

    private DocaVerbsQpInitAttr init(DocaDpaCompletion send, DocaDpaCompletion recv) {
        DocaVerbsQpInitAttr ia = DocaVerbsQpInitAttr.create();
        ia.setExternalDatapathEn(true);
        ia.setPd(dev);
        ia.setSqWr(8);
        ia.setRqWr(8);
        ia.setSendDpaCompletion(send);
        ia.setReceiveDpaCompletion(recv);
        return ia;
    }

    private DocaVerbsQp qp(DocaDpaCompletion comp) {
        DocaVerbsQp q = DocaVerbsQp.create(dev, init(comp, comp));
        undo.add(q::destroy);
        return q;
    }

    private DocaVerbsAhAttr ah() {
        DocaVerbsAhAttr ah = DocaVerbsAhAttr.create(dev);
        ah.setGid(FlexioQp.gid(dev.ibvContext().queryGid(1, 0)));
        return ah;
    }

    private static DocaError status(Executable e) {
        return assertThrows(DocaException.class, e).error();
    }

    private static String message(Executable e) {
        return assertThrows(DocaException.class, e).getMessage();
    }

    private void toInit(DocaVerbsQp q) {
        DocaVerbsQpAttr a = DocaVerbsQpAttr.create();
        a.setNextState(QP_STATE_INIT);
        a.setPortNum(1);
        a.setAllowRemoteWrite(true);
        a.setAllowRemoteRead(true);
        q.modify(a, NEXT_STATE | PORT_NUM | PKEY_INDEX | ALLOW_REMOTE_WRITE | ALLOW_REMOTE_READ);
    }

    private void toRts(DocaVerbsQp q, int remote) {
        toInit(q);
        DocaVerbsQpAttr a = DocaVerbsQpAttr.create();
        a.setNextState(QP_STATE_RTR);
        a.setDestQpNum(remote);
        a.setAhAttr(ah());
        q.modify(a, NEXT_STATE | RQ_PSN | DEST_QP_NUM | MIN_RNR_TIMER | PATH_MTU | AH_ATTR);
        a.setNextState(QP_STATE_RTS);
        a.setAckTimeout(14);
        a.setRetryCnt(7);
        a.setRnrRetry(7);
        q.modify(a, NEXT_STATE | SQ_PSN | ACK_TIMEOUT | RETRY_CNT | RNR_RETRY);
    }

    private int state(DocaVerbsQp q) {
        DocaVerbsQpAttr a = DocaVerbsQpAttr.create();
        q.query(a, null);
        return a.getCurrentState();
    }

    @Test
    void modifyFollowsTheRcStateTableAndNamesWhatIsWrong() {
        DocaVerbsQp q = qp(polled(dpa));
        DocaVerbsQpAttr a = DocaVerbsQpAttr.create();
        a.setNextState(QP_STATE_RTR);
        a.setDestQpNum(q.getQpn());
        a.setAhAttr(ah());
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, status(() -> q.modify(a, NEXT_STATE | RQ_PSN | DEST_QP_NUM | MIN_RNR_TIMER | PATH_MTU | AH_ATTR)),
                "RESET->RTR out of order");
        assertEquals(QP_STATE_RST, state(q), "the device's QP stayed in RESET");
        a.setNextState(QP_STATE_INIT);
        a.setPortNum(1);
        String m = message(() -> q.modify(a, NEXT_STATE | PKEY_INDEX));
        assertTrue(m.contains("requires PORT_NUM"), m);
        m = message(() -> q.modify(a, NEXT_STATE | PKEY_INDEX | PORT_NUM | SQ_PSN));
        assertTrue(m.contains("does not take SQ_PSN"), m);
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(() -> q.modify(a, NEXT_STATE | 1 << 30)), "an undefined mask bit");
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(() -> a.setPortNum(0)), "port 0");
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(() -> a.setRqPsn(1 << 24)), "a PSN past 24 bits");
        toInit(q);
        assertEquals(QP_STATE_INIT, state(q));
        a.setNextState(QP_STATE_RTS);
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, status(() -> q.modify(a, NEXT_STATE | SQ_PSN | ACK_TIMEOUT | RETRY_CNT | RNR_RETRY)),
                "INIT->RTS skips RTR");
        DocaVerbsQpAttr r = DocaVerbsQpAttr.create();
        r.setNextState(QP_STATE_RTR);
        r.setDestQpNum(q.getQpn());
        m = message(() -> q.modify(r, NEXT_STATE | RQ_PSN | DEST_QP_NUM | MIN_RNR_TIMER | PATH_MTU | AH_ATTR));
        assertTrue(m.contains("no AH attributes"), m);
        r.setAhAttr(DocaVerbsAhAttr.create(dev));
        m = message(() -> q.modify(r, NEXT_STATE | RQ_PSN | DEST_QP_NUM | MIN_RNR_TIMER | PATH_MTU | AH_ATTR));
        assertTrue(m.contains("no GID"), m);
        m = message(() -> q.modify(r, NEXT_STATE | RQ_PSN | DEST_QP_NUM | MIN_RNR_TIMER | PATH_MTU));
        assertTrue(m.contains("requires AH_ATTR"), m);
        r.setAhAttr(ah());
        r.setRqPsn(0x123);
        r.setPathMtu(MTU_SIZE_2K_BYTES);
        q.modify(r, NEXT_STATE | RQ_PSN | DEST_QP_NUM | MIN_RNR_TIMER | PATH_MTU | AH_ATTR);
        DocaVerbsQpAttr got = DocaVerbsQpAttr.create();
        DocaVerbsQpInitAttr gi = DocaVerbsQpInitAttr.create();
        q.query(got, gi);
        assertEquals(QP_STATE_RTR, got.getCurrentState());
        assertEquals(0x123, got.getRqPsn());
        assertEquals(MTU_SIZE_2K_BYTES, got.getPathMtu());
        assertTrue(got.getAllowRemoteWrite() && got.getAllowRemoteRead() && !got.getAllowRemoteAtomic(), "the INIT access flags kept");
        assertEquals(8, gi.getRqWr());
        DocaVerbsQpAttr err = DocaVerbsQpAttr.create();
        err.setNextState(QP_STATE_ERR);
        m = message(() -> q.modify(err, NEXT_STATE | SQ_PSN));
        assertTrue(m.contains("takes no attributes"), m);
        q.modify(err, NEXT_STATE);
        assertEquals(QP_STATE_ERR, state(q));
        err.setNextState(QP_STATE_RST);
        q.modify(err, NEXT_STATE);
        assertEquals(QP_STATE_RST, state(q));
        toRts(q, q.getQpn());
        assertEquals(QP_STATE_RTS, state(q), "RESET again, then to RTS");
    }

    @Test
    void badInputAndDestroyOrder() {
        DocaDpaCompletion mine = polled(dpa);
        DocaDpa other = started(dev, VerbsInitiatorTargetDevStubs.APP); // stopped and destroyed after this one
        DocaDpaCompletion theirs = polled(other);
        String m = message(() -> DocaVerbsQp.create(dev, init(mine, theirs)));
        assertTrue(m.contains("another DPA context"), m);
        assertEquals(DocaError.DOCA_ERROR_NOT_SUPPORTED, status(() -> {
            DocaVerbsQpInitAttr ia = init(mine, mine);
            ia.setExternalDatapathEn(false);
            DocaVerbsQp.create(dev, ia);
        }), "the host data path");
        assertEquals(DocaError.DOCA_ERROR_NOT_SUPPORTED, status(() -> {
            DocaVerbsQpInitAttr ia = init(mine, mine);
            ia.setQpType(DocaVerbsQpInitAttr.QP_TYPE_UD);
            DocaVerbsQp.create(dev, ia);
        }), "UD");
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(() -> DocaVerbsQp.create(dev, DocaVerbsQpInitAttr.create())), "no PD");
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(() -> init(mine, mine).setSendMaxSges(3)), "3 send SGEs");
        DocaVerbsQp q = DocaVerbsQp.create(dev, init(mine, mine));
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(() -> q.getDpaHandle(other)), "a handle on another DPA context");
        assertEquals(DocaError.DOCA_ERROR_IN_USE, status(mine::stop), "the completion context while a QP uses it");
        q.destroy();
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(q::destroy), "double destroy");
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(q::getQpn), "a destroyed QP");
    }

    /** A post on a QP in INIT: DOCA's call returns nothing, the process ends with ERROR_QP_STATE, the host sees it. */
    @Test
    void aPostOnAQpNotInRtsEndsTheProcess() {
        DocaVerbsQp q = qp(polled(dpa));
        toInit(q);
        long wrs = dpa.memAlloc(A_SIZE);
        try {
            DocaException e = assertThrows(DocaException.class, () -> dpa.rpc(VerbsInitiatorTargetDevStubs.POST, q.getDpaHandle(dpa),
                    DocaDpaDevVerbs.SEND_WR_OPCODE_SEND, wrs, 0, 8, 0L, 0, 0, 1, wrs));
            assertEquals(DocaError.DOCA_ERROR_DRIVER, e.error(), e.getMessage());
            assertTrue(e.getMessage().contains(Integer.toHexString(DocaDpaDevVerbs.ERROR_QP_STATE)), e.getMessage());
        } finally {
            try {
                dpa.memFree(wrs);
            } catch (DocaException e) {
                // the process ended with its heap
            }
        }
    }

    /**
     * Each opcode from QP a to QP b in loopback: SEND_IMM and WRITE_IMM consume a receive and carry
     * their immediate, READ brings the remote bytes; the elements give type, send opcode, QP,
     * WQE counter, bytes and immediate.
     */
    @Test
    void everyOpcodeAndItsCompletionElement() {
        DocaDpaCompletion ca = polled(dpa);
        DocaDpaCompletion cb = polled(dpa);
        DocaVerbsQp a = qp(ca);
        DocaVerbsQp b = qp(cb);
        toRts(a, b.getQpn());
        toRts(b, a.getQpn());
        long wrs = alloc(A_SIZE);
        long src = alloc(64);
        long dst = alloc(64);
        dpa.h2dMemcpy(src, le(0x1111, 0x2222, 0x3333));
        dpa.h2dMemcpy(dst + 32, le(0x4444));
        int ks = map(src, 64);
        int kd = map(dst, 64);
        long ha = a.getDpaHandle(dpa);
        long hb = b.getDpaHandle(dpa);
        dpa.rpc(VerbsInitiatorTargetDevStubs.POST_RECV, hb, dst, kd, 16, wrs);
        dpa.rpc(VerbsInitiatorTargetDevStubs.POST_RECV, hb, dst + 16, kd, 16, wrs);
        dpa.rpc(VerbsInitiatorTargetDevStubs.POST, ha, DocaDpaDevVerbs.SEND_WR_OPCODE_SEND_IMM, src, ks, 8, 0L, 0, 0xabc, 1, wrs);
        dpa.rpc(VerbsInitiatorTargetDevStubs.POST, ha, DocaDpaDevVerbs.SEND_WR_OPCODE_WRITE_IMM, src + 8, ks, 8, dst + 24, kd, 0xdef, 1, wrs);
        dpa.rpc(VerbsInitiatorTargetDevStubs.POST, ha, DocaDpaDevVerbs.SEND_WR_OPCODE_READ, src + 16, ks, 8, dst + 32, kd, 0, 1, wrs);
        dpa.rpc(VerbsInitiatorTargetDevStubs.POST, ha, DocaDpaDevVerbs.SEND_WR_OPCODE_WRITE, src + 8, ks, 8, dst + 40, kd, 0, 0, wrs); // unsignaled
        long[][] sends = poll(ca, wrs, 3);
        long[][] recvs = poll(cb, wrs, 2);
        int[] ops = {DocaDpaDevVerbs.SEND_WR_OPCODE_SEND_IMM, DocaDpaDevVerbs.SEND_WR_OPCODE_WRITE_IMM, DocaDpaDevVerbs.SEND_WR_OPCODE_READ};
        for (int i = 0; i < 3; i++) {
            assertEquals(DocaDpaDevCompletion.COMP_SEND, sends[i][0] & 0xff, "send completion " + i);
            assertEquals(ops[i], sends[i][0] >> 8 & 0xff, "send completion " + i + ": its WQE's opcode");
            assertEquals(a.getQpn(), sends[i][1]);
            assertEquals(i, sends[i][2], "WQE counter");
        }
        assertEquals(DocaDpaDevCompletion.COMP_RECV_SEND_IMM, recvs[0][0] & 0xff);
        assertEquals(0xabc, recvs[0][0] >>> 16, "the SEND's immediate");
        assertEquals(8, recvs[0][3], "bytes received");
        assertEquals(DocaDpaDevCompletion.COMP_RECV_RDMA_WRITE_IMM, recvs[1][0] & 0xff);
        assertEquals(0xdef, recvs[1][0] >>> 16, "the WRITE's immediate");
        assertEquals(b.getQpn(), recvs[1][1]);
        long[] d = words(dst, 6);
        assertEquals(0x1111, d[0], "the SEND's bytes");
        assertEquals(0x2222, d[3], "the WRITE_IMM's bytes");
        assertEquals(0x4444, words(src + 16, 1)[0], "the READ brought the remote word");
        long deadline = System.nanoTime() + 30_000_000_000L;
        while (words(dst + 40, 1)[0] != 0x2222) { // the unsignaled WRITE: no completion, its bytes only
            assertTrue(System.nanoTime() < deadline, "the unsignaled write landed");
            Thread.onSpinWait();
        }
        assertEquals(-1L, dpa.rpc(VerbsInitiatorTargetDevStubs.POLL_ONE, ca.getDpaHandle(), wrs, 7), "no completion for the unsignaled write");
        assertTrue(lab.dpa().stream().noneMatch(l -> l.matches(".*\\bC[1-7]\\b.*")), "no memory-model finding: " + lab.dpa());
    }

    /**
     * Check C8 on verbs QPs (DocaDpaDevVerbs' rule: sends keyed on the QP, receives on its receive
     * half): a rank sending beside a rank receiving on one QP is silent (their queues are
     * disjoint); two ranks sending on one QP are C8 naming the post (strict: the process ends).
     * Posts are never committed: nothing reaches the NIC.
     */
    @Test
    void twoRanksSendingOnOneQpIsC8AndASendBesideAReceiveIsSilent() {
        DocaDpaCompletion comp = polled(dpa);
        DocaVerbsQp q = qp(comp);
        toRts(q, q.getQpn());
        long buf = alloc(64);
        int key = map(buf, 64);
        DocaSyncEvent done = DocaSyncEvent.create();
        done.addPublisherLocationDpa(dpa);
        done.addSubscriberLocationCpu(dev);
        done.start();
        undo.add(done::destroy);
        long b = alloc(VL_SIZE);
        long h = q.getDpaHandle(dpa);
        java.util.function.LongUnaryOperator posts = r -> dpa.rpc(VerbsInitiatorTargetDevStubs.LOAD64, b + VL_POSTS + 8 * r);

        dpa.h2dMemcpy(b, le(0, h, h, 0, 1, key, buf, 0, 0, 0)); // rank 0 sends, rank 1 receives, on one QP
        dpa.kernelLaunchUpdateSet(null, 0, done, 1, 2, VerbsInitiatorTargetDevStubs.POST_LOOP, b);
        long deadline = System.nanoTime() + 60_000_000_000L;
        while (posts.applyAsLong(0) < 500 || posts.applyAsLong(1) < 500) {
            assertTrue(dpa.kernelFailure() == null && System.nanoTime() < deadline, "both ranks post: " + lab.findings());
        }
        dpa.memset(b + VL_STOP, 1, 8);
        done.waitGt(0, -1L, java.time.Duration.ofSeconds(60));
        assertTrue(lab.findings().stream().noneMatch(l -> l.contains("C8")), lab.findings().toString());

        dpa.h2dMemcpy(b, le(0, h, h, 0, 0, key, buf, 0, 0, 0)); // the mutant: both send; barrier and counts reset
        dpa.kernelLaunchUpdateSet(null, 0, done, 2, 2, VerbsInitiatorTargetDevStubs.POST_LOOP, b);
        while (dpa.kernelFailure() == null) {
            assertTrue(System.nanoTime() < deadline, "strict C8 ends the process: " + lab.findings());
            Thread.onSpinWait();
        }
        List<String> crashes = lab.crashes();
        assertTrue(crashes.stream().anyMatch(l -> l.contains("C8") && l.contains("VerbsInitiatorTargetDev.postSendWr:")
                && l.contains("DocaDpaDevVerbs.qpPostSendWr:")), crashes.toString());
    }

    /** {@code dpa:doca} (doca-dpa's {@code DocaDpaObjects}) shows each QP under its completion context's thread. */
    @Test
    void dpaDocaListsTheQpsUnderTheirCompletionContexts() {
        DocaDpaCompletion comp = polled(dpa);
        DocaVerbsQp a = qp(comp);
        DocaVerbsQp b = qp(comp);
        String qps = "qps 0x" + Integer.toHexString(a.getQpn()) + " 0x" + Integer.toHexString(b.getQpn());
        List<String> lines = new DocaDpaRegistry().contexts().stream().filter(c -> c.device().equals(dev.name()))
                .flatMap(c -> c.threads().stream()).flatMap(t -> t.completions().stream()).toList();
        assertTrue(lines.stream().anyMatch(l -> l.startsWith("doca_dpa_completion") && l.endsWith(qps)), qps + " in " + lines);
    }

    /** {@code n} completions of {@code comp}, each (type | swqe opcode << 8 | imm << 16, qpn, wqe counter, bytes). */
    private long[][] poll(DocaDpaCompletion comp, long wrs, int n) {
        long[][] r = new long[n][];
        long deadline = System.nanoTime() + 30_000_000_000L;
        for (int i = 0; i < n; i++) {
            while (dpa.rpc(VerbsInitiatorTargetDevStubs.POLL_ONE, comp.getDpaHandle(), wrs, i) != 0) {
                assertTrue(System.nanoTime() < deadline, "completion " + i + " of " + comp);
            }
            r[i] = words(wrs + A_LOG + (long) LOG_ENTRY * i, 4);
        }
        return r;
    }

    private int map(long daddr, long len) {
        return dpaMmap(dpa, dev, daddr, len, RW).devGetDpaHandle(dev);
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
}

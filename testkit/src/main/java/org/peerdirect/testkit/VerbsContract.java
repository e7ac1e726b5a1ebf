package org.peerdirect.testkit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.List;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.peerdirect.ib.core.verbs.IbvAh;
import org.peerdirect.ib.core.verbs.IbvAhAttr;
import org.peerdirect.ib.core.verbs.IbvGid;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvQpAttr;
import org.peerdirect.ib.core.verbs.IbvQpState;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvRecvWr;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvSge;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWcOpcode;
import org.peerdirect.ib.core.verbs.IbvWcStatus;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.ib.core.verbs.PostException;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;

/**
 * The provider verbs contract: the traffic semantics every verbs provider shares, as the IBA,
 * libibverbs' man pages and rdma-core's providers define them, run against the real core on two
 * devices of the driver (extend it as {@link AsyncEventContract} is; it includes the destroy
 * half, {@link VerbsLifecycleContract}, and {@code ibv_reg_mr_ex}'s, {@link VerbsMrExContract}). A difference between two providers here that the real ones
 * do not have is a defect of one of them.
 *
 * <p>Checked: a request completes only when signaled, or always on a QP with {@code sq_sig_all};
 * inline data up to the QP's {@code max_inline_data} is copied at post time (its lkey not
 * checked) and one byte more is refused at post with ENOMEM ({@code set_data_inl_seg}); more
 * SGEs than {@code max_send_sge} are refused at post with ENOMEM (libmlx4/libmlx5's
 * {@code max gs exceeded}), a gather and a scatter of several SGEs move the bytes in order; a
 * full send or receive queue is ENOMEM at post, naming the first request that did not fit; a READ
 * into memory without local write is {@code LOC_PROT_ERR}; a bad
 * rkey is {@code REM_ACCESS_ERR}, a bad lkey {@code LOC_PROT_ERR}, a receive too short
 * {@code LOC_LEN_ERR} at the responder and {@code REM_INV_REQ_ERR} at the requester, a READ
 * without the remote read right {@code REM_ACCESS_ERR}, a misaligned atomic
 * {@code REM_INV_REQ_ERR}; an immediate and an SRQ's receives arrive as sent; after an
 * error the later requests and the receive queue flush ({@code WR_FLUSH_ERR}) in posting order
 * and new ones flush too; RNR with no retries is {@code RNR_RETRY_EXC_ERR}, with retries the
 * late receive gets the message; a UD receive starts with the 40-byte GRH space, flagged
 * {@code IBV_WC_GRH} and filled only when the sender gave a GRH; fetch-and-add and
 * compare-and-swap return the original value; zero-length SEND, WRITE, WRITE_WITH_IMM and READ
 * complete; a message longer than the port's {@code max_msg_sz} (UD: the MTU) is
 * {@code LOC_LEN_ERR} and moves nothing.
 *
 * @since 0.6
 */
public abstract class VerbsContract extends VerbsMrExContract {

    private static final int NO_RNR_RETRY = 0;
    private static final int RNR_FOREVER = 7;

    private static void ok(IbvWc c, long wrId, IbvWcOpcode op) {
        assertEquals(IbvWcStatus.SUCCESS, c.status, c.toString());
        assertEquals(wrId, c.wrId, c.toString());
        assertEquals(op, c.opcode, c.toString());
    }

    private static void status(IbvWc c, long wrId, IbvWcStatus s) {
        assertEquals(s, c.status, c.toString());
        assertEquals(wrId, c.wrId, c.toString());
    }

    private static IbvSendWr unsignaled(IbvSendWr w) {
        w.sendFlags &= ~IbvSendWr.SEND_SIGNALED;
        return w;
    }

    private static IbvSendWr chain(IbvSendWr... ws) {
        for (int i = 0; i + 1 < ws.length; i++) {
            ws[i].next = ws[i + 1];
        }
        return ws[0];
    }

    // ------------------------------------------------------------------ signaling

    @Test
    void onlySignaledRequestsComplete() {
        IbvQp[] q = rcPair(RNR_FOREVER, null);
        q[0].postSend(chain(unsignaled(rdma(IbvWrOpcode.RDMA_WRITE, a, 0, 64, b, 0, 1)),
                unsignaled(rdma(IbvWrOpcode.RDMA_WRITE, a, 64, 64, b, 64, 2)), rdma(IbvWrOpcode.RDMA_WRITE, a, 128, 64, b, 128, 3)));
        ok(await1(a.cq), 3, IbvWcOpcode.RDMA_WRITE);
        quiet(a.cq, "the unsignaled writes");
    }

    /** {@code sq_sig_all}: rdma-core's mlx5 keeps {@code sq_signal_bits} and ORs it into every WQE's control segment. */
    @Test
    void sqSigAllCompletesEveryRequest() {
        IbvQp[] q = rcPair(RNR_FOREVER, x -> x.sqSigAll = true);
        q[1].postRecv(recv(b, 4096, 64, 40));
        q[0].postSend(chain(unsignaled(rdma(IbvWrOpcode.RDMA_WRITE, a, 0, 64, b, 0, 1)),
                unsignaled(rdma(IbvWrOpcode.RDMA_READ, a, 64, 64, b, 64, 2)), unsignaled(wr(IbvWrOpcode.SEND, a, 128, 64, 3))));
        List<IbvWc> c = await(a.cq, 3);
        ok(c.get(0), 1, IbvWcOpcode.RDMA_WRITE);
        ok(c.get(1), 2, IbvWcOpcode.RDMA_READ);
        ok(c.get(2), 3, IbvWcOpcode.SEND);
        ok(await1(b.cq), 40, IbvWcOpcode.RECV);
        quiet(a.cq, "three requests, three completions");
    }

    // ------------------------------------------------------------------ inline, SGEs

    @Test
    void inlineDataUpToMaxInlineDataIsCopiedAtPostAndOneByteMoreIsEnomem() {
        int max = Math.min(a.attr().maxInlineData(), b.attr().maxInlineData());
        Assumptions.assumeTrue(max > 0, "the device has no inline data");
        KernelException over = assertThrows(KernelException.class, () -> a.qp(IbvQpType.RC, x -> x.maxInlineData = max + 1));
        assertEquals(Errno.EINVAL, over.errno(), "max_inline_data above the device's: " + over.getMessage());
        IbvQp[] q = rcPair(RNR_FOREVER, x -> x.maxInlineData = max);
        byte[] data = pattern(max, 5);
        a.write(0, data);
        q[1].postRecv(recv(b, 0, 8192, 10));
        IbvSendWr w = wr(IbvWrOpcode.SEND, a, 0, max, 1);
        w.sendFlags |= IbvSendWr.SEND_INLINE;
        w.sgList[0].lkey = a.mr.lkey() ^ 0x5a5a00; // an inline request's lkey is not looked at
        q[0].postSend(w);
        a.write(0, new byte[max]); // copied at post: changing the source now changes nothing
        ok(await1(a.cq), 1, IbvWcOpcode.SEND);
        IbvWc r = await1(b.cq);
        ok(r, 10, IbvWcOpcode.RECV);
        assertEquals(max, r.byteLen);
        assertArrayEquals(data, b.read(0, max), "the bytes as they were at post");
        IbvSendWr big = wr(IbvWrOpcode.SEND, a, 0, max + 1, 2);
        big.sendFlags |= IbvSendWr.SEND_INLINE;
        PostException e = assertThrows(PostException.class, () -> q[0].postSend(big));
        assertSame(big, e.badWr());
        assertEquals(Errno.ENOMEM, e.errno(), "set_data_inl_seg: inl > max_inline_data is ENOMEM: " + e.getMessage());
        quiet(a.cq, "the refused request was not posted");
    }

    @Test
    void moreSgesThanMaxSendSgeIsEnomemAndSeveralSgesGatherAndScatterInOrder() {
        IbvQp[] q = rcPair(RNR_FOREVER, x -> {
            x.maxSendSge = 2;
            x.maxRecvSge = 2;
        });
        byte[] one = pattern(100, 1);
        byte[] two = pattern(60, 2);
        a.write(0, one);
        a.write(8192, two);
        IbvRecvWr r = new IbvRecvWr();
        r.wrId = 20;
        r.sgList = new IbvSge[] {new IbvSge(b.buf + 4096, 30, b.mr.lkey()), new IbvSge(b.buf + 12288, 200, b.mr.lkey())};
        r.numSge = 2;
        q[1].postRecv(r);
        IbvSendWr w = wr(IbvWrOpcode.SEND, a, 0, 100, 1);
        w.sgList = new IbvSge[] {new IbvSge(a.buf, 100, a.mr.lkey()), new IbvSge(a.buf + 8192, 60, a.mr.lkey()),
                new IbvSge(a.buf + 16384, 8, a.mr.lkey())};
        w.numSge = 3;
        PostException e = assertThrows(PostException.class, () -> q[0].postSend(w));
        assertSame(w, e.badWr());
        assertEquals(Errno.ENOMEM, e.errno(), "num_sge > max_send_sge is ENOMEM (max gs exceeded): " + e.getMessage());
        IbvRecvWr r3 = new IbvRecvWr();
        r3.sgList = new IbvSge[] {new IbvSge(b.buf, 8, b.mr.lkey()), new IbvSge(b.buf, 8, b.mr.lkey()), new IbvSge(b.buf, 8, b.mr.lkey())};
        r3.numSge = 3;
        assertSame(r3, assertThrows(PostException.class, () -> q[1].postRecv(r3)).badWr(), "num_sge > max_recv_sge is refused at post");
        quiet(a.cq, "nothing posted");
        w.numSge = 2;
        q[0].postSend(w);
        ok(await1(a.cq), 1, IbvWcOpcode.SEND);
        IbvWc c = await1(b.cq);
        ok(c, 20, IbvWcOpcode.RECV);
        assertEquals(160, c.byteLen);
        byte[] sent = new byte[160];
        System.arraycopy(one, 0, sent, 0, 100);
        System.arraycopy(two, 0, sent, 100, 60);
        assertArrayEquals(Arrays.copyOfRange(sent, 0, 30), b.read(4096, 30), "the first scatter entry");
        assertArrayEquals(Arrays.copyOfRange(sent, 30, 160), b.read(12288, 130), "the second, from where the first ended");
    }

    /**
     * A full queue refuses at post with ENOMEM naming the first request not posted
     * ({@code mlx5_wq_overflow}/{@code wq_overflow}); unsignaled requests hold their slots until
     * a later completion, so posting only unsignaled ones fills the send queue whatever the timing.
     */
    @Test
    void aFullQueueIsEnomemAtPost() {
        IbvQp[] q = rcPair(RNR_FOREVER, x -> {
            x.maxSendWr = 16;
            x.maxRecvWr = 16;
        });
        int limit = 16 * 64; // far past any rounding of the 16 asked for
        IbvSendWr[] ws = new IbvSendWr[limit];
        for (int i = 0; i < limit; i++) {
            ws[i] = unsignaled(rdma(IbvWrOpcode.RDMA_WRITE, a, 0, 8, b, 0, i));
        }
        PostException e = assertThrows(PostException.class, () -> q[0].postSend(chain(ws)), "a send queue of 16 takes " + limit);
        assertEquals(Errno.ENOMEM, e.errno(), e.getMessage());
        int at = Arrays.asList(ws).indexOf(e.badWr());
        assertTrue(at >= 16 && at < limit, "bad_wr is the first request that did not fit: index " + at);
        IbvRecvWr[] rs = new IbvRecvWr[limit];
        for (int i = 0; i < limit; i++) {
            rs[i] = recv(b, 0, 8, 1000 + i);
            if (i > 0) {
                rs[i - 1].next = rs[i];
            }
        }
        PostException r = assertThrows(PostException.class, () -> q[1].postRecv(rs[0]));
        assertEquals(Errno.ENOMEM, r.errno(), r.getMessage());
        int rat = Arrays.asList(rs).indexOf(r.badWr());
        assertTrue(rat >= 16 && rat < limit, "bad_wr is the first receive that did not fit: index " + rat);
    }

    @Test
    void aReadIntoMemoryWithoutLocalWriteIsLocProtErr() {
        IbvQp[] q = rcPair(RNR_FOREVER, null);
        long va = process().mmap(1 << 16);
        process().populate(va, 1 << 16, true);
        org.peerdirect.ib.core.verbs.IbvMr ro = a.pd.regMr(va, 1 << 16, org.peerdirect.ib.core.umem.IbAccess.REMOTE_READ);
        IbvSendWr w = rdma(IbvWrOpcode.RDMA_READ, a, 0, 64, b, 0, 1);
        w.sgList[0].set(va, 64, ro.lkey());
        q[0].postSend(w);
        status(await1(a.cq), 1, IbvWcStatus.LOC_PROT_ERR);
    }

    // ------------------------------------------------------------------ error completions and flush

    @Test
    void aBadRkeyIsRemAccessErrAndLaterRequestsFlushInOrder() {
        IbvQp[] q = rcPair(RNR_FOREVER, null);
        q[0].postRecv(recv(a, 8192, 64, 90));
        q[0].postRecv(recv(a, 8192, 64, 91));
        IbvSendWr bad = rdma(IbvWrOpcode.RDMA_WRITE, a, 0, 64, b, 0, 1);
        bad.rkey ^= 0x5a5a00;
        q[0].postSend(chain(bad, rdma(IbvWrOpcode.RDMA_WRITE, a, 0, 64, b, 0, 2), rdma(IbvWrOpcode.RDMA_READ, a, 0, 64, b, 0, 3),
                wr(IbvWrOpcode.SEND, a, 0, 8, 4)));
        List<IbvWc> c = await(a.cq, 6);
        status(c.get(0), 1, IbvWcStatus.REM_ACCESS_ERR);
        long[] sends = c.stream().filter(x -> x.wrId < 90).skip(1).mapToLong(x -> x.wrId).toArray();
        long[] recvs = c.stream().filter(x -> x.wrId >= 90).mapToLong(x -> x.wrId).toArray();
        assertArrayEquals(new long[] {2, 3, 4}, sends, "the send queue flushes in posting order: " + c);
        assertArrayEquals(new long[] {90, 91}, recvs, "the receive queue flushes in posting order: " + c);
        c.stream().skip(1).forEach(x -> assertEquals(IbvWcStatus.WR_FLUSH_ERR, x.status, x.toString()));
        c.stream().filter(x -> x.wrId >= 90).forEach(x -> assertEquals(IbvWcOpcode.RECV, x.opcode, "a flushed receive: " + x));
        assertEquals(IbvQpState.ERR, awaitState(q[0], IbvQpState.ERR), "the requester is in error");
    }

    /** What is posted to a QP in ERR completes with WR_FLUSH_ERR (what {@code ib_drain_sq}/{@code ib_drain_rq} rely on). */
    @Test
    void requestsPostedInErrFlush() {
        IbvQp[] q = rcPair(RNR_FOREVER, null);
        IbvQpAttr x = new IbvQpAttr();
        x.qpState = IbvQpState.ERR;
        q[0].modify(x, IbvQpAttr.STATE);
        q[0].postSend(wr(IbvWrOpcode.SEND, a, 0, 8, 5));
        status(await1(a.cq), 5, IbvWcStatus.WR_FLUSH_ERR);
        q[0].postRecv(recv(a, 8192, 64, 92));
        IbvWc r = await1(a.cq);
        status(r, 92, IbvWcStatus.WR_FLUSH_ERR);
        assertEquals(IbvWcOpcode.RECV, r.opcode, r.toString());
    }

    @Test
    void aBadLkeyIsLocProtErr() {
        IbvQp[] q = rcPair(RNR_FOREVER, null);
        IbvSendWr w = rdma(IbvWrOpcode.RDMA_WRITE, a, 0, 64, b, 0, 1);
        w.sgList[0].lkey ^= 0x5a5a00;
        q[0].postSend(w);
        status(await1(a.cq), 1, IbvWcStatus.LOC_PROT_ERR);
        w.sgList[0].lkey = a.mr.lkey();
        w.sgList[0].addr = a.buf + BUF - 32; // past the MR's end
        IbvQp[] q2 = rcPair(RNR_FOREVER, null);
        w.wrId = 2;
        q2[0].postSend(w);
        status(await1(a.cq), 2, IbvWcStatus.LOC_PROT_ERR);
    }

    @Test
    void aReceiveTooShortIsLocLenErrThereAndRemInvReqErrHere() {
        IbvQp[] q = rcPair(RNR_FOREVER, null);
        q[1].postRecv(recv(b, 0, 16, 30));
        q[0].postSend(wr(IbvWrOpcode.SEND, a, 0, 64, 1));
        status(await1(b.cq), 30, IbvWcStatus.LOC_LEN_ERR);
        status(await1(a.cq), 1, IbvWcStatus.REM_INV_REQ_ERR);
    }

    /**
     * A READ to a QP whose access flags lack remote read is an invalid request, not an access
     * error: the responder takes it for an operation the QP does not support, as rxe's
     * {@code check_op_valid} (NAK invalid request, the requester's REM_INV_REQ_ERR); a key
     * without the right would be the remote access error.
     */
    @Test
    void aReadTheQpDoesNotAllowIsRemInvReqErr() {
        IbvQp qa = a.qp(IbvQpType.RC, null);
        IbvQp qb = b.qp(IbvQpType.RC, null);
        connect(qa, qb, RNR_FOREVER, org.peerdirect.ib.core.umem.IbAccess.LOCAL_WRITE | org.peerdirect.ib.core.umem.IbAccess.REMOTE_WRITE);
        qa.postSend(rdma(IbvWrOpcode.RDMA_WRITE, a, 0, 64, b, 0, 1));
        ok(await1(a.cq), 1, IbvWcOpcode.RDMA_WRITE);
        qa.postSend(rdma(IbvWrOpcode.RDMA_READ, a, 0, 64, b, 0, 2));
        status(await1(a.cq), 2, IbvWcStatus.REM_INV_REQ_ERR);
    }

    @Test
    void aMisalignedAtomicIsRemInvReqErr() {
        Assumptions.assumeTrue(a.attr().atomicCap() != 0 && b.attr().atomicCap() != 0, "the device has no atomics");
        IbvQp[] q = rcPair(RNR_FOREVER, null);
        b.putLong(4096, 10);
        IbvSendWr fa = rdma(IbvWrOpcode.ATOMIC_FETCH_AND_ADD, a, 0, 8, b, 4096 + 4, 1);
        fa.compareAdd = 5;
        q[0].postSend(fa);
        status(await1(a.cq), 1, IbvWcStatus.REM_INV_REQ_ERR);
        assertEquals(10, b.getLong(4096), "nothing added");
    }

    @Test
    void sendWithImmediateCarriesItAndTheData() {
        IbvQp[] q = rcPair(RNR_FOREVER, null);
        byte[] data = pattern(200, 4);
        a.write(0, data);
        q[1].postRecv(recv(b, 0, 256, 80));
        IbvSendWr w = wr(IbvWrOpcode.SEND_WITH_IMM, a, 0, 200, 1);
        w.immData = 0x5eed;
        q[0].postSend(w);
        ok(await1(a.cq), 1, IbvWcOpcode.SEND);
        IbvWc c = await1(b.cq);
        ok(c, 80, IbvWcOpcode.RECV);
        assertEquals(200, c.byteLen);
        assertTrue((c.wcFlags & IbvWc.WC_WITH_IMM) != 0, c.toString());
        assertEquals(0x5eed, c.immData);
        assertEquals(q[1].qpNum(), c.qpNum);
        assertArrayEquals(data, b.read(0, 200));
    }

    @Test
    void anSrqFeedsEveryQpOnItInPostingOrder() {
        org.peerdirect.ib.core.verbs.IbvSrq srq = b.pd.createSrq(16, 1);
        IbvQp a1 = a.qp(IbvQpType.RC, null);
        IbvQp a2 = a.qp(IbvQpType.RC, null);
        IbvQp b1 = b.qp(IbvQpType.RC, x -> {
            x.srq = srq;
            x.maxRecvWr = 0;
        });
        IbvQp b2 = b.qp(IbvQpType.RC, x -> {
            x.srq = srq;
            x.maxRecvWr = 0;
        });
        connect(a1, b1, RNR_FOREVER);
        connect(a2, b2, RNR_FOREVER);
        srq.postRecv(recv(b, 0, 64, 90));
        srq.postRecv(recv(b, 64, 64, 91));
        a.write(0, pattern(64, 1));
        a1.postSend(wr(IbvWrOpcode.SEND, a, 0, 64, 1));
        ok(await1(a.cq), 1, IbvWcOpcode.SEND);
        IbvWc c1 = await1(b.cq);
        ok(c1, 90, IbvWcOpcode.RECV);
        assertEquals(b1.qpNum(), c1.qpNum, "the first receive of the SRQ, on the QP the message came to");
        a.write(64, pattern(64, 2));
        a2.postSend(wr(IbvWrOpcode.SEND, a, 64, 64, 2));
        ok(await1(a.cq), 2, IbvWcOpcode.SEND);
        IbvWc c2 = await1(b.cq);
        ok(c2, 91, IbvWcOpcode.RECV);
        assertEquals(b2.qpNum(), c2.qpNum);
        assertArrayEquals(pattern(64, 1), b.read(0, 64));
        assertArrayEquals(pattern(64, 2), b.read(64, 64));
    }

    // ------------------------------------------------------------------ RNR

    @Test
    void noReceiveAndNoRnrRetryIsRnrRetryExcErr() {
        IbvQp[] q = rcPair(NO_RNR_RETRY, null);
        q[0].postSend(wr(IbvWrOpcode.SEND, a, 0, 64, 1));
        status(await1(a.cq), 1, IbvWcStatus.RNR_RETRY_EXC_ERR);
        assertEquals(IbvQpState.ERR, awaitState(q[0], IbvQpState.ERR));
    }

    @Test
    void withRnrRetriesALateReceiveGetsTheMessage() {
        IbvQp[] q = rcPair(RNR_FOREVER, null);
        byte[] data = pattern(64, 9);
        a.write(0, data);
        q[0].postSend(wr(IbvWrOpcode.SEND, a, 0, 64, 1));
        quiet(a.cq, "no receive yet: the requester retries");
        q[1].postRecv(recv(b, 0, 64, 31));
        ok(await1(a.cq), 1, IbvWcOpcode.SEND);
        ok(await1(b.cq), 31, IbvWcOpcode.RECV);
        assertArrayEquals(data, b.read(0, 64));
    }

    // ------------------------------------------------------------------ UD

    @Test
    void udReceivesStartWithTheGrhSpaceFilledOnlyWhenTheSenderGaveOne() {
        IbvQp ua = a.qp(IbvQpType.UD, null);
        IbvQp ub = b.qp(IbvQpType.UD, null);
        udToRts(ua);
        udToRts(ub);
        byte[] data = pattern(100, 3);
        a.write(0, data);
        b.write(0, new byte[40]);
        ub.postRecv(recv(b, 0, 40 + 100, 50));
        ub.postRecv(recv(b, 4096, 40 + 100, 51));
        IbvAh plain = a.pd.createAh(b.lid, 1);
        IbvAhAttr g = IbvAhAttr.gid(IbvGid.parse(b.ctx.queryGid(1, 0)), 0, 1);
        g.dlid = b.lid;
        IbvAh global = a.pd.createAh(g);
        IbvSendWr w = wr(IbvWrOpcode.SEND, a, 0, 100, 1);
        w.ah = plain;
        w.remoteQpn = ub.qpNum();
        w.remoteQkey = QKEY;
        ua.postSend(w);
        ok(await1(a.cq), 1, IbvWcOpcode.SEND);
        IbvWc c = await1(b.cq);
        ok(c, 50, IbvWcOpcode.RECV);
        assertEquals(140, c.byteLen, "a UD receive counts the 40 bytes of GRH space");
        assertEquals(0, c.wcFlags & IbvWc.WC_GRH, "no GRH sent: IBV_WC_GRH clear " + c);
        assertEquals(ua.qpNum(), c.srcQp);
        assertArrayEquals(data, b.read(40, 100), "the payload after the GRH space");
        w.ah = global;
        w.wrId = 2;
        ua.postSend(w);
        ok(await1(a.cq), 2, IbvWcOpcode.SEND);
        c = await1(b.cq);
        ok(c, 51, IbvWcOpcode.RECV);
        assertEquals(140, c.byteLen);
        assertTrue((c.wcFlags & IbvWc.WC_GRH) != 0, "a GRH sent: IBV_WC_GRH set " + c);
        assertEquals(6, (b.read(4096, 1)[0] & 0xff) >> 4, "IP version 6 in the GRH's first nibble");
        assertArrayEquals(data, b.read(4096 + 40, 100));
    }

    /** The GRH a UD receive gets names the sender's GID (SGID) and the receiver's (DGID), as the AH gave them. */
    @Test
    void theUdGrhCarriesTheSendersAndTheReceiversGids() {
        IbvQp ua = a.qp(IbvQpType.UD, null);
        IbvQp ub = b.qp(IbvQpType.UD, null);
        udToRts(ua);
        udToRts(ub);
        ub.postRecv(recv(b, 0, 40 + 8, 52));
        IbvAhAttr g = IbvAhAttr.gid(IbvGid.parse(b.ctx.queryGid(1, 0)), 0, 1);
        g.dlid = b.lid;
        IbvSendWr w = wr(IbvWrOpcode.SEND, a, 0, 8, 1);
        w.ah = a.pd.createAh(g);
        w.remoteQpn = ub.qpNum();
        w.remoteQkey = QKEY;
        ua.postSend(w);
        ok(await1(a.cq), 1, IbvWcOpcode.SEND);
        ok(await1(b.cq), 52, IbvWcOpcode.RECV);
        assertEquals(b.ctx.queryGid(1, 0), IbvGid.format(b.read(24, 16)), "the GRH's DGID is the receiver's GID");
        assertEquals(a.ctx.queryGid(1, 0), IbvGid.format(b.read(8, 16)), "the GRH's SGID is the sender's GID");
    }

    // ------------------------------------------------------------------ atomics

    @Test
    void atomicsReturnTheOriginalValue() {
        Assumptions.assumeTrue(a.attr().atomicCap() != 0 && b.attr().atomicCap() != 0, "the device has no atomics");
        IbvQp[] q = rcPair(RNR_FOREVER, null);
        b.putLong(4096, 10);
        IbvSendWr fa = rdma(IbvWrOpcode.ATOMIC_FETCH_AND_ADD, a, 0, 8, b, 4096, 1);
        fa.compareAdd = 5;
        q[0].postSend(fa);
        ok(await1(a.cq), 1, IbvWcOpcode.FETCH_ADD);
        assertEquals(10, a.getLong(0), "fetch-and-add returns the value before the add");
        assertEquals(15, b.getLong(4096));
        IbvSendWr cs = rdma(IbvWrOpcode.ATOMIC_CMP_AND_SWP, a, 8, 8, b, 4096, 2);
        cs.compareAdd = 15;
        cs.swap = 99;
        q[0].postSend(cs);
        ok(await1(a.cq), 2, IbvWcOpcode.COMP_SWAP);
        assertEquals(15, a.getLong(8), "compare-and-swap returns the value before the swap");
        assertEquals(99, b.getLong(4096));
        cs.wrId = 3;
        cs.sgList[0].addr = a.buf + 16;
        q[0].postSend(cs); // compares 15 with 99: no swap
        ok(await1(a.cq), 3, IbvWcOpcode.COMP_SWAP);
        assertEquals(99, a.getLong(16), "a failed compare returns the value found");
        assertEquals(99, b.getLong(4096), "and leaves it");
    }

    // ------------------------------------------------------------------ message sizes

    @Test
    void zeroLengthMessagesComplete() {
        IbvQp[] q = rcPair(RNR_FOREVER, null);
        IbvRecvWr r = new IbvRecvWr();
        r.wrId = 60;
        q[1].postRecv(r); // no SGE: a zero-length receive
        q[1].postRecv(recv(b, 0, 64, 61));
        IbvSendWr send = new IbvSendWr();
        send.opcode = IbvWrOpcode.SEND;
        send.sendFlags = IbvSendWr.SEND_SIGNALED;
        send.wrId = 1;
        IbvSendWr write = rdma(IbvWrOpcode.RDMA_WRITE, a, 0, 0, b, 0, 2);
        write.numSge = 0;
        IbvSendWr read = rdma(IbvWrOpcode.RDMA_READ, a, 0, 0, b, 0, 3);
        read.numSge = 0;
        IbvSendWr imm = rdma(IbvWrOpcode.RDMA_WRITE_WITH_IMM, a, 0, 0, b, 0, 4);
        imm.numSge = 0;
        imm.immData = 0x1234;
        q[0].postSend(chain(send, write, read, imm));
        List<IbvWc> c = await(a.cq, 4);
        ok(c.get(0), 1, IbvWcOpcode.SEND);
        ok(c.get(1), 2, IbvWcOpcode.RDMA_WRITE);
        ok(c.get(2), 3, IbvWcOpcode.RDMA_READ);
        ok(c.get(3), 4, IbvWcOpcode.RDMA_WRITE);
        List<IbvWc> rc = await(b.cq, 2);
        ok(rc.get(0), 60, IbvWcOpcode.RECV);
        assertEquals(0, rc.get(0).byteLen);
        ok(rc.get(1), 61, IbvWcOpcode.RECV_RDMA_WITH_IMM);
        assertEquals(0, rc.get(1).byteLen);
        assertEquals(0x1234, rc.get(1).immData);
    }

    @Test
    void aMessageOverMaxMsgSzIsLocLenErrAndMovesNothing() {
        long max = a.ctx.queryPort(1).maxMsgSz();
        Assumptions.assumeTrue(max < 0xFFFF_FFFFL, "max_msg_sz " + max + " leaves no SGE length above it");
        IbvQp[] q = rcPair(RNR_FOREVER, null);
        b.write(0, new byte[64]);
        a.write(0, pattern(64, 7));
        IbvSendWr w = rdma(IbvWrOpcode.RDMA_WRITE, a, 0, (int) (max + 1), b, 0, 1);
        q[0].postSend(w);
        status(await1(a.cq), 1, IbvWcStatus.LOC_LEN_ERR);
        assertArrayEquals(new byte[64], b.read(0, 64), "nothing was written");
    }

    @Test
    void aUdMessageOverTheMtuIsLocLenErr() {
        IbvQp ua = a.qp(IbvQpType.UD, null);
        IbvQp ub = b.qp(IbvQpType.UD, null);
        udToRts(ua);
        udToRts(ub);
        int mtu = 128 << a.ctx.queryPort(1).activeMtu();
        ub.postRecv(recv(b, 0, 40 + mtu + 1, 70));
        IbvSendWr w = wr(IbvWrOpcode.SEND, a, 0, mtu, 1);
        w.ah = a.pd.createAh(b.lid, 1);
        w.remoteQpn = ub.qpNum();
        w.remoteQkey = QKEY;
        ua.postSend(w);
        ok(await1(a.cq), 1, IbvWcOpcode.SEND);
        IbvWc c = await1(b.cq);
        ok(c, 70, IbvWcOpcode.RECV);
        assertEquals(40 + mtu, c.byteLen, "exactly one MTU goes");
        ub.postRecv(recv(b, 8192, 40 + mtu + 1, 71));
        w.sgList[0].length = mtu + 1;
        w.wrId = 2;
        ua.postSend(w); // a local error: the QP leaves RTS, so it comes last
        status(await1(a.cq), 2, IbvWcStatus.LOC_LEN_ERR);
        quiet(b.cq, "nothing sent");
    }
}

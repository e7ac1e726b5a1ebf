package org.peerdirect.hca.engine;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

import org.peerdirect.kernel.iommu.IommuFault;

/**
 * The responder ({@code rxe_resp.c}): checks an incoming request against the responder QP's
 * remote-access bits and the rkey's MPT entry, consumes receive WQEs, places the data and writes
 * the receive CQE. It runs in the requester's thread and works in the requester's scratch cursors.
 */
final class Responder {

    private static final ValueLayout.OfInt BE_INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    private static final ValueLayout.OfLong BE_LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    private Responder() {
    }

    /** The responder of an RC request: the requester's outcome. */
    static Outcome respondRc(HwQp r, Requester req, HwQp rq, SendWqe w, long len) {
        Segs dst = req.remote.reset(r.dev);
        switch (w.opcode) {
            case Wqe.OP_RDMA_WRITE, Wqe.OP_RDMA_WRITE_IMM -> {
                Outcome o = remoteRange(r, dst, w.rkey, w.remoteAddr, len, QpContext.BIT_RWE, HcaDevice.PERM_REMOTE_WRITE);
                if (o != null) {
                    return o;
                }
                if (w.opcode == Wqe.OP_RDMA_WRITE_IMM) {
                    long idx = takeRecv(r, req.recvCopy);
                    if (idx < 0) {
                        return Outcome.RNR_NAK;
                    }
                    o = DmaMover.move(req.local, dst, len, Outcome.LOC_PROT_ERR, Outcome.REM_ACCESS_ERR);
                    if (o != null) {
                        // the receive was consumed: it completes with the error (rxe's class C handling)
                        recvComplete(r, idx, o == Outcome.REM_ACCESS_ERR ? Outcome.REM_ACCESS_ERR : Outcome.WR_FLUSH_ERR,
                                Cqe.RECV_RDMA_WRITE_IMM, 0, 0, 0, rq.qpn, 0, w);
                        return o;
                    }
                    recvComplete(r, idx, Outcome.SUCCESS, Cqe.RECV_RDMA_WRITE_IMM, (int) len, w.imm, Cqe.FLAG_IMM, rq.qpn,
                            rq.dev.ports[rq.portNum - 1].lid, w);
                    return Outcome.SUCCESS;
                }
                return orOk(DmaMover.move(req.local, dst, len, Outcome.LOC_PROT_ERR, Outcome.REM_ACCESS_ERR));
            }
            case Wqe.OP_SEND, Wqe.OP_SEND_IMM -> {
                long idx = takeRecv(r, req.recvCopy);
                if (idx < 0) {
                    return Outcome.RNR_NAK;
                }
                return deliver(r, req, rq, w, idx, len, false);
            }
            case Wqe.OP_RDMA_READ -> {
                Outcome o = remoteRange(r, dst, w.rkey, w.remoteAddr, len, QpContext.BIT_RRE, HcaDevice.PERM_REMOTE_READ);
                if (o != null) {
                    return o;
                }
                return orOk(DmaMover.move(dst, req.local, len, Outcome.REM_ACCESS_ERR, Outcome.LOC_PROT_ERR));
            }
            case Wqe.OP_ATOMIC_CS, Wqe.OP_ATOMIC_FA -> {
                return atomic(r, req, w);
            }
            default -> {
                return Outcome.REM_INV_REQ_ERR; // an opcode the responder does not know: invalid request
            }
        }
    }

    /** A UD datagram arriving at {@code r}: consumed receive WQE or dropped. */
    static void deliverUd(HwQp r, Requester req, HwQp sender, SendWqe w, long len) {
        long idx = takeRecv(r, req.recvCopy);
        if (idx >= 0) {
            deliver(r, req, sender, w, idx, len, true);
        }
    }

    /** Checks the QP's remote-access bit and the rkey's entry; fills the cursor. Null when allowed. */
    private static Outcome remoteRange(HwQp r, Segs dst, int rkey, long va, long len, int qpBit, int perm) {
        if ((r.remoteAccess & qpBit) == 0) {
            return Outcome.REM_ACCESS_ERR;
        }
        if (len == 0) {
            return null;
        }
        Mpt m = r.dev.mpt(rkey);
        if (m == null || m.state != Mpt.State.VALID || m.pdn != r.pdn || (m.access & perm) == 0 || !m.contains(va, len)) {
            return Outcome.REM_ACCESS_ERR;
        }
        dst.add(m, va, len);
        return null;
    }

    private static Outcome atomic(HwQp r, Requester req, SendWqe w) {
        if ((w.remoteAddr & 7) != 0) {
            return Outcome.REM_INV_REQ_ERR;
        }
        Outcome o = remoteRange(r, req.remote, w.rkey, w.remoteAddr, 8, QpContext.BIT_RAE, HcaDevice.PERM_ATOMIC);
        if (o != null) {
            return o;
        }
        Mpt m = req.remote.mpt[0];
        long old;
        long st = m.lock.readLock();
        try {
            if (m.state != Mpt.State.VALID) {
                return Outcome.REM_ACCESS_ERR;
            }
            long iova = m.iova(w.remoteAddr);
            old = w.opcode == Wqe.OP_ATOMIC_FA ? r.dev.domain.fetchAdd(iova, w.compareAdd)
                    : r.dev.domain.compareAndSwap(iova, w.compareAdd, w.swap);
        } catch (IommuFault f) {
            return Outcome.REM_ACCESS_ERR;
        } finally {
            m.lock.unlockRead(st);
        }
        req.scratch.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, old);
        Segs src = req.grhSrc.reset(req.local.dev).inline(req.scratch, 0, 8);
        return orOk(DmaMover.move(src, req.local, 8, Outcome.LOC_PROT_ERR, Outcome.LOC_PROT_ERR));
    }

    private static Outcome orOk(Outcome moveResult) {
        return moveResult == null ? Outcome.SUCCESS : moveResult;
    }

    /** Takes the head receive WQE (own RQ or SRQ) into {@code copy}: its index, or -1 when none. */
    private static long takeRecv(HwQp r, RecvWqe copy) {
        return (r.srq != null ? r.srq.rq : r.rq).take(copy);
    }

    /**
     * Delivers a SEND into the consumed receive WQE {@code idx}: checks its data segments and
     * length, moves the data (after a GRH for UD), completes the receive. The requester's outcome.
     */
    private static Outcome deliver(HwQp r, Requester req, HwQp sender, SendWqe w, long idx, long len, boolean grh) {
        RecvWqe rw = req.recvCopy;
        Segs dst = req.remote.reset(r.dev);
        int rpdn = r.srq != null ? r.srq.pdn : r.pdn;
        boolean rc = r.serviceType == HcaDevice.ST_RC;
        for (int i = 0; i < rw.numSge; i++) {
            long l = rw.byteCount[i] & 0xFFFF_FFFFL;
            if (l == 0) {
                continue;
            }
            Mpt m = r.dev.mpt(rw.lkey[i]);
            if (m == null || m.state != Mpt.State.VALID || m.pdn != rpdn || (m.access & HcaDevice.PERM_LOCAL_WRITE) == 0
                    || !m.contains(rw.addr[i], l)) {
                recvComplete(r, idx, Outcome.LOC_PROT_ERR, Cqe.RECV_SEND, 0, 0, 0, sender.qpn, 0, w);
                if (rc) {
                    r.toError();
                }
                return Outcome.REM_OP_ERR;
            }
            dst.add(m, rw.addr[i], l);
        }
        long need = len + (grh ? 40 : 0);
        if (dst.total() < need) {
            recvComplete(r, idx, Outcome.LOC_LEN_ERR, Cqe.RECV_SEND, 0, 0, 0, sender.qpn, 0, w);
            if (rc) {
                r.toError();
            }
            return Outcome.REM_INV_REQ_ERR;
        }
        int slid = sender.dev.ports[sender.portNum - 1].lid;
        if (grh) {
            writeGrh(req.scratch, slid, r.dev.ports[r.portNum - 1].lid, len);
            Outcome o = DmaMover.move(req.grhSrc.reset(sender.dev).inline(req.scratch, 0, 40), dst, 40, Outcome.LOC_PROT_ERR,
                    Outcome.REM_OP_ERR);
            if (o != null) {
                recvComplete(r, idx, Outcome.LOC_PROT_ERR, Cqe.RECV_SEND, 0, 0, 0, sender.qpn, 0, w);
                return o;
            }
        }
        Outcome o = DmaMover.move(req.local, dst, len, Outcome.LOC_PROT_ERR, Outcome.REM_OP_ERR);
        if (o != null) {
            recvComplete(r, idx, Outcome.LOC_PROT_ERR, Cqe.RECV_SEND, 0, 0, 0, sender.qpn, 0, w);
            return o;
        }
        boolean imm = Wqe.hasImm(w.opcode);
        recvComplete(r, idx, Outcome.SUCCESS, imm ? Cqe.RECV_SEND_IMM : Cqe.RECV_SEND, (int) need, imm ? w.imm : 0,
                (imm ? Cqe.FLAG_IMM : 0) | (grh ? Cqe.FLAG_GRH : 0), sender.qpn, slid, w);
        return Outcome.SUCCESS;
    }

    private static void recvComplete(HwQp r, long idx, Outcome o, int opcode, int byteLen, int imm, int flags, int srcQp, int slid,
            SendWqe w) {
        boolean solicited = (w.ctrl & Wqe.CTRL_SOLICITED) != 0;
        if (!r.rcq.push(r.qpn, false, idx, opcode, o, byteLen, imm, flags, srcQp, slid, solicited)) {
            r.toError();
        }
    }

    /** A GRH (IPv6-like, 40 bytes): version 6, payload length, next header 0x1B, hop limit, GIDs. */
    private static void writeGrh(MemorySegment g, int slid, int dlid, long len) {
        g.set(BE_INT, 0, 0x6000_0000);
        g.set(BE_INT, 4, (int) ((len & 0xFFFF) << 16) | 0x1B << 8 | 64);
        g.set(BE_LONG, 8, 0xfe80_0000_0000_0000L);
        g.set(BE_LONG, 16, slid);
        g.set(BE_LONG, 24, 0xfe80_0000_0000_0000L);
        g.set(BE_LONG, 32, dlid);
    }
}

package org.peerdirect.hca.engine;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

import org.peerdirect.kernel.iommu.IommuFault;

/**
 * The responder ({@code rxe_resp.c}): checks an incoming request against the responder QP's
 * remote-access bits and the rkey's MPT entry, consumes receive WQEs, places the data and writes
 * the receive CQE. In one JVM it runs in the requester's thread and works in the requester's
 * scratch cursors; for a port on a wire ({@link WireResp}) in the link's receive thread with the
 * port's. The {@link Exchange} names the sender (QPN, LID, GID, PSN) either way.
 */
final class Responder {

    private static final ValueLayout.OfInt BE_INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    private static final ValueLayout.OfLong BE_LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    private Responder() {
    }

    /**
     * The responder of an RC request: the requester's outcome. {@link Outcome#PAGE_FAULT} means a
     * page on the requester's side was missing ({@code req.local} says where); a page missing on
     * this side raised this side's fault and answers {@link Outcome#RNR_NAK}.
     */
    static Outcome respondRc(HwQp r, Exchange req, SendWqe w, long len) {
        Outcome pending = r.resp.faultOutcome();
        if (pending != null) {
            return pending;
        }
        Segs dst = req.remote.reset(r.dev);
        switch (w.opcode) {
            case Wqe.OP_RDMA_WRITE, Wqe.OP_RDMA_WRITE_IMM -> {
                Outcome o = remoteRange(r, req, dst, w.rkey, w.remoteAddr, len, QpContext.BIT_RWE, HcaDevice.PERM_REMOTE_WRITE);
                if (o != null) {
                    return o;
                }
                if (w.opcode == Wqe.OP_RDMA_WRITE_IMM) {
                    RecvQueue q = srqOf(r, req) != null ? srqOf(r, req).rq : r.rq;
                    long idx = q.peekAndLock(req.recvCopy);
                    if (idx < 0) {
                        return Outcome.RNR_NAK;
                    }
                    o = DmaMover.move(req.local, dst, len, Outcome.LOC_PROT_ERR, Outcome.REM_ACCESS_ERR);
                    if (o == Outcome.PAGE_FAULT) {
                        q.unlock(); // the receive WQE stays for the retry
                        return miss(r, req, PageFault.SUBTYPE_RDMA, -1, Outcome.REM_ACCESS_ERR);
                    }
                    q.commitAndUnlock(idx);
                    if (o != null) {
                        // the receive was consumed: it completes with the error (rxe's class C handling)
                        req.errorInReceiveCqe = true;
                        recvComplete(r, req, idx, o == Outcome.REM_ACCESS_ERR ? Outcome.REM_ACCESS_ERR : Outcome.WR_FLUSH_ERR,
                                Cqe.RECV_RDMA_WRITE_IMM, 0, 0, 0, req.srcQpn, 0, w);
                        return o;
                    }
                    recvComplete(r, req, idx, Outcome.SUCCESS, Cqe.RECV_RDMA_WRITE_IMM, (int) (req.msgLen >= 0 ? req.msgLen : len), w.imm,
                            Cqe.FLAG_IMM, req.srcQpn,
                            req.slid, w);
                    return Outcome.SUCCESS;
                }
                o = DmaMover.move(req.local, dst, len, Outcome.LOC_PROT_ERR, Outcome.REM_ACCESS_ERR);
                return o == Outcome.PAGE_FAULT ? miss(r, req, PageFault.SUBTYPE_RDMA, -1, Outcome.REM_ACCESS_ERR) : orOk(o);
            }
            case Wqe.OP_SEND, Wqe.OP_SEND_IMM -> {
                return deliver(r, req, w, len, false);
            }
            case Wqe.OP_RDMA_READ -> {
                Outcome o = remoteRange(r, req, dst, w.rkey, w.remoteAddr, len, QpContext.BIT_RRE, HcaDevice.PERM_REMOTE_READ);
                if (o != null) {
                    return o;
                }
                o = DmaMover.move(dst, req.local, len, Outcome.REM_ACCESS_ERR, Outcome.LOC_PROT_ERR);
                return o == Outcome.PAGE_FAULT ? miss(r, req, PageFault.SUBTYPE_RDMA, -1, Outcome.REM_ACCESS_ERR) : orOk(o);
            }
            case Wqe.OP_ATOMIC_CS, Wqe.OP_ATOMIC_FA, Wqe.OP_ATOMIC_WRITE -> {
                return atomic(r, req, w);
            }
            case Wqe.OP_FLUSH -> {
                return flush(r, req, w, len);
            }
            default -> {
                return Outcome.REM_INV_REQ_ERR; // an opcode the responder does not know: invalid request
            }
        }
    }

    /**
     * A UD datagram arriving at {@code r}: delivered into a receive WQE or dropped (no receive WQE,
     * or a page of the receive buffer missing: that raises the responder's fault, the datagram is
     * lost as UD allows). {@link Outcome#PAGE_FAULT} when the sender's own page was missing.
     */
    static Outcome deliverUd(HwQp r, Exchange req, SendWqe w, long len) {
        if (r.resp.faultOutcome() != null) {
            return Outcome.SUCCESS; // dropped while the responder's fault is served, or after it failed
        }
        Outcome o = deliver(r, req, w, len, true);
        return o == Outcome.PAGE_FAULT ? o : Outcome.SUCCESS;
    }

    /**
     * A move came back {@link Outcome#PAGE_FAULT}. When the missing page is this responder's
     * ({@code req.remote} recorded it), raises its fault event and answers RNR NAK, or
     * {@code unserved} when no one serves faults; otherwise it is the requester's page and the
     * requester raises its own.
     */
    private static Outcome miss(HwQp r, Exchange req, int subtype, long wqeIndex, Outcome unserved) {
        Segs d = req.remote;
        if (d.faultMpt == null) {
            return Outcome.PAGE_FAULT;
        }
        int token = r.dev.pendingFault(r, false, subtype);
        if (token == 0) {
            return unserved;
        }
        r.resp.fault = token; // before the event: a resume racing it finds the token set
        HwSrq s = subtype == PageFault.SUBTYPE_WQE ? srqOf(r, req) : null;
        int flags = (subtype == PageFault.SUBTYPE_RDMA ? PageFault.FLAG_RDMA : 0) | (s != null ? PageFault.FLAG_SRQ : 0);
        r.dev.raise(d.faultEvent(token, subtype, flags, s != null ? s.srqn : r.qpn, wqeIndex));
        return Outcome.RNR_NAK;
    }

    /**
     * Checks the QP's remote-access bit and the rkey's entry; fills the cursor. Null when allowed.
     * A request the QP's access flags do not allow is an invalid request, as rxe's
     * {@code check_op_valid} (RESPST_ERR_UNSUPPORTED_OPCODE, NAK 0x61, IB_WC_REM_INV_REQ_ERR),
     * checked before the length and the key; a key without the right, or a range outside it, is a
     * remote access error ({@code check_rkey}: RESPST_ERR_RKEY_VIOLATION, NAK 0x62).
     */
    private static Outcome remoteRange(HwQp r, Exchange req, Segs dst, int rkey, long va, long len, int qpBit, int perm) {
        if ((r.remoteAccess & qpBit) == 0) {
            return Outcome.REM_INV_REQ_ERR;
        }
        if (len == 0) {
            return null;
        }
        Mpt m = r.dev.mpt(rkey);
        int g = m == null ? -1 : m.admit(keyPdn(r, req), va, len, perm);
        if (g < 0) {
            return Outcome.REM_ACCESS_ERR;
        }
        dst.add(m, va, len, g);
        return null;
    }

    /**
     * An 8-byte operation at the remote address: compare-and-swap or fetch-and-add (the QP's
     * remote-atomic bit and the key's atomic right; the original value goes back to the requester)
     * or ATOMIC WRITE (as rxe's {@code check_op_valid}/{@code check_rkey}: the remote-write bit
     * and right; only an acknowledgement goes back). Misaligned: invalid request
     * ({@code RESPST_ERR_MISALIGNED_ATOMIC}), found after the QP's and the key's checks as rxe
     * finds it (in {@code atomic_reply}, after {@code check_rkey}): a misaligned address under a
     * bad key is a remote access error.
     */
    private static Outcome atomic(HwQp r, Exchange req, SendWqe w) {
        boolean store = w.opcode == Wqe.OP_ATOMIC_WRITE;
        Outcome o = store ? remoteRange(r, req, req.remote, w.rkey, w.remoteAddr, 8, QpContext.BIT_RWE, HcaDevice.PERM_REMOTE_WRITE)
                : remoteRange(r, req, req.remote, w.rkey, w.remoteAddr, 8, QpContext.BIT_RAE, HcaDevice.PERM_ATOMIC);
        if (o != null) {
            return o;
        }
        if ((w.remoteAddr & 7) != 0) {
            return Outcome.REM_INV_REQ_ERR;
        }
        Mpt m = req.remote.mpt[0];
        // an indirect (KSM) key is resolved under its read lock first, then its target locked (DmaMover's order)
        Mpt ind = m.indirect ? m : null;
        long is = ind == null ? 0 : ind.lock.readLock();
        try {
            Mpt t = m;
            long tva = w.remoteAddr;
            if (ind != null) {
                o = DmaMover.resolve(req.remote, ind, w.remoteAddr, 8, Outcome.REM_ACCESS_ERR, true);
                t = req.remote.tgt;
                tva = req.remote.tgtVa;
            }
            if (o == null) {
                o = atomicAt(r, req, w, store, m, t, tva);
            }
        } finally {
            if (ind != null) {
                ind.lock.unlockRead(is);
            }
        }
        if (o != null && o != Outcome.PAGE_FAULT) {
            return o;
        }
        if (o == Outcome.PAGE_FAULT) {
            return miss(r, req, PageFault.SUBTYPE_RDMA, -1, Outcome.REM_ACCESS_ERR);
        }
        if (store) {
            return Outcome.SUCCESS; // stored: nothing to place at the requester, so nothing to replay
        }
        o = placeAtomicResponse(req);
        if (o == Outcome.PAGE_FAULT) {
            // executed, but the response cannot be placed: the responder keeps the result for the
            // duplicate the requester sends after its fault is served, and has moved past the PSN
            r.resp.atomicReplayValue = req.scratch.get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
            r.resp.atomicReplayPsn = req.srcPsn;
            r.resp.ePsn = (r.resp.ePsn + 1) & 0xFFFFFF;
        }
        return o;
    }

    /**
     * The atomic ({@code store}: the ATOMIC WRITE) on entry {@code t} at {@code tva} under its read lock ({@code t} is the key's own
     * entry {@code m}, or an indirect key's target): null when executed (the original value in the
     * requester's scratch), {@link Outcome#PAGE_FAULT} on a miss (recorded on {@code m}), else the error.
     */
    private static Outcome atomicAt(HwQp r, Exchange req, SendWqe w, boolean store, Mpt m, Mpt t, long tva) {
        long st = t.lock.readLock();
        try {
            if (t.state != Mpt.State.VALID || (t == m ? t.gen != req.remote.gen[0] : !t.contains(tva, 8))) {
                return Outcome.REM_ACCESS_ERR;
            }
            if (!t.mapped(tva, store ? Mpt.MTT_WRITE : Mpt.MTT_READ | Mpt.MTT_WRITE)) {
                req.remote.fault(m, w.remoteAddr, true);
                return Outcome.PAGE_FAULT;
            }
            long iova = t.iova(tva);
            org.peerdirect.kernel.dma.DmaPort port = t.port(r.dev.domain);
            if (store) {
                port.atomicWrite(iova, w.compareAdd);
                return null;
            }
            long old = w.opcode == Wqe.OP_ATOMIC_FA ? port.fetchAdd(iova, w.compareAdd) : port.compareAndSwap(iova, w.compareAdd, w.swap);
            req.scratch.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, old);
            return null;
        } catch (IommuFault f) {
            return Outcome.REM_ACCESS_ERR;
        } finally {
            t.lock.unlockRead(st);
        }
    }

    /**
     * RDMA FLUSH at the responder, as rxe's {@code check_op_valid}, {@code check_rkey} and
     * {@code process_flush}: the QP must accept each placement type asked (else an invalid
     * request, rxe's {@code RESPST_ERR_UNSUPPORTED_OPCODE}); a length above 2^31 is an invalid
     * request ({@code RESPST_ERR_LENGTH}); the key must carry the matching FLUSH rights, in the
     * QP's PD, valid, and (level {@link Wqe#FLUSH_RANGE}) hold the range, else a remote access
     * error (RKEY_VIOLATION). Then, for the persistent type, the flushing reads of every present
     * page of the range (or the whole MR at level {@link Wqe#FLUSH_MR}); for the global type alone
     * a full fence: every earlier write of the QP was placed before this request was taken (the
     * engine executes a QP's requests in order) and is visible once the fence passes. A device
     * behind the range that fails its flush (a media error) is a remote operational error. No
     * page faults: on-demand pages the device cannot reach hold nothing it wrote and did not make
     * visible (rxe faults them in; stated in the model's notes). Acknowledged like a zero-length
     * RDMA READ: nothing is placed at the requester.
     */
    private static Outcome flush(HwQp r, Exchange req, SendWqe w, long len) {
        int type = w.flushType;
        int qpNeed = ((type & Wqe.FLUSH_GLOBAL) != 0 ? QpContext.BIT_FLUSH_GLOBAL : 0)
                | ((type & Wqe.FLUSH_PERSISTENT) != 0 ? QpContext.BIT_FLUSH_PERSISTENT : 0);
        if ((r.remoteAccess & qpNeed) != qpNeed || len > 0x8000_0000L) {
            return Outcome.REM_INV_REQ_ERR;
        }
        int perm = ((type & Wqe.FLUSH_GLOBAL) != 0 ? HcaDevice.PERM_FLUSH_GLOBAL : 0)
                | ((type & Wqe.FLUSH_PERSISTENT) != 0 ? HcaDevice.PERM_FLUSH_PERSISTENT : 0);
        Mpt m = r.dev.mpt(w.rkey);
        boolean wholeMr = w.flushLevel == Wqe.FLUSH_MR;
        int g = m == null ? -1 : m.admit(keyPdn(r, req), wholeMr ? m.start : w.remoteAddr, wholeMr ? 0 : len, perm);
        if (g < 0) {
            return Outcome.REM_ACCESS_ERR;
        }
        if ((type & Wqe.FLUSH_PERSISTENT) == 0) {
            java.lang.invoke.VarHandle.fullFence();
            return Outcome.SUCCESS;
        }
        long s = m.lock.readLock();
        try {
            if (m.state != Mpt.State.VALID || m.gen != g) {
                return Outcome.REM_ACCESS_ERR; // revoked or changed since the check
            }
            long va = wholeMr ? m.start : w.remoteAddr;
            long n = wholeMr ? m.length : len;
            if (m.indirect) {
                flushIndirect(r.dev, m, va, n);
            } else {
                m.flush(va, n, m.port(r.dev.domain));
            }
            return Outcome.SUCCESS;
        } catch (IommuFault f) {
            return Outcome.REM_ACCESS_ERR;
        } catch (org.peerdirect.kernel.mm.KernelException e) {
            return Outcome.REM_OP_ERR; // the memory's device completed the flushing read with an error
        } finally {
            m.lock.unlockRead(s);
        }
    }

    /**
     * The persistent flush through an indirect (KSM) key, its read lock held: each block with a
     * target flushed through the target under the target's read lock (indirect before direct, as
     * {@link DmaMover}); blocks without one hold nothing; the walk ends at the key's last block.
     */
    private static void flushIndirect(HcaDevice dev, Mpt ind, long va, long len) {
        long end = va + len < va ? Long.MAX_VALUE : va + len;
        for (long p = va; p < end;) {
            long n = Math.min(end - p, ind.blockLeft(p));
            long key = ind.target(p);
            if (key < 0) {
                return;
            }
            Mpt t = key == 0 ? null : dev.mpt((int) key);
            if (t != null) {
                long ts = t.lock.readLock();
                try {
                    long tva = ind.targetVa(p);
                    if (t.state == Mpt.State.VALID && t.contains(tva, n)) {
                        t.flush(tva, n, t.port(dev.domain));
                    }
                } finally {
                    t.lock.unlockRead(ts);
                }
            }
            p += n;
        }
    }

    /**
     * The requester retransmitted an atomic the responder already executed (its PSN is the one
     * {@link QpResp#atomicReplayPsn} saved): the saved original value is the response, nothing
     * executes again.
     */
    static Outcome replayAtomic(HwQp r, Exchange req) {
        req.scratch.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, r.resp.atomicReplayValue);
        Outcome o = placeAtomicResponse(req);
        if (o == Outcome.SUCCESS) {
            r.resp.atomicReplayPsn = -1;
        }
        return o;
    }

    /** Writes the atomic's original value (in the requester's scratch) into the local buffer. */
    private static Outcome placeAtomicResponse(Exchange req) {
        if (req.senderQp == null) {
            return Outcome.SUCCESS; // the requester is across a wire: the value travels in the atomic ACK ({@link WireResp})
        }
        Segs src = req.grhSrc.reset(req.local.dev).inline(req.scratch, 0, 8);
        return orOk(DmaMover.move(src, req.local, 8, Outcome.LOC_PROT_ERR, Outcome.LOC_PROT_ERR));
    }

    private static Outcome orOk(Outcome moveResult) {
        return moveResult == null ? Outcome.SUCCESS : moveResult;
    }

    /**
     * The PD a request's rkeys are checked against: the responder QP's, or at an XRC target the
     * named XRC SRQ's (the target QP's own PD checks nothing).
     */
    private static int keyPdn(HwQp r, Exchange req) {
        return req.xrcSrq != null ? req.xrcSrq.pdn : r.pdn;
    }

    /**
     * The SRQ a request's receive comes from: the XRC SRQ its XRCETH named at an XRC target, the
     * QP's SRQ, or null (the QP's own receive queue).
     */
    private static HwSrq srqOf(HwQp r, Exchange req) {
        return req.xrcSrq != null ? req.xrcSrq : r.srq;
    }

    /**
     * Delivers a SEND into the head receive WQE: checks its data segments and length, moves the
     * data (for UD after the 40 bytes every UD receive buffer reserves for a GRH: the GRH is
     * written there and flagged only when the datagram carries one, {@link SendWqe#grh}; the byte
     * count includes the 40 bytes either way, as IPoIB's unconditional pull of
     * {@code IB_GRH_BYTES} relies on), consumes the WQE and completes it. The requester's outcome:
     * {@link Outcome#RNR_NAK} when there is no receive WQE or a page of its buffer is missing (the
     * WQE is not consumed; the responder raised its fault), {@link Outcome#PAGE_FAULT} when the
     * sender's page is missing (the WQE is not consumed either).
     */
    private static Outcome deliver(HwQp r, Exchange req, SendWqe w, long len, boolean ud) {
        boolean grh = ud && w.grh;
        RecvQueue q = srqOf(r, req) != null ? srqOf(r, req).rq : r.rq;
        RecvWqe rw = req.recvCopy;
        long idx = q.peekAndLock(rw);
        if (idx < 0) {
            return Outcome.RNR_NAK;
        }
        // under the consumer lock until the WQE is consumed or left: no completion, no QP to ERR
        Segs dst = req.remote.reset(r.dev);
        HwSrq srq = srqOf(r, req);
        int rpdn = srq != null ? srq.pdn : r.pdn;
        Outcome recvStatus = null; // the receive CQE's error, when the WQE is consumed with one
        Outcome result = null;
        for (int i = 0; i < rw.numSge && recvStatus == null; i++) {
            long l = rw.byteCount[i] & 0xFFFF_FFFFL;
            if (l == 0) {
                continue;
            }
            Mpt m = r.dev.mpt(rw.lkey[i]);
            int g = m == null ? -1 : m.admit(rpdn, rw.addr[i], l, HcaDevice.PERM_LOCAL_WRITE);
            if (g < 0) {
                recvStatus = Outcome.LOC_PROT_ERR;
                result = Outcome.REM_OP_ERR;
            } else {
                dst.add(m, rw.addr[i], l, g);
            }
        }
        long need = len + (ud ? 40 : 0);
        if (recvStatus == null && dst.total() < need) {
            recvStatus = Outcome.LOC_LEN_ERR;
            result = Outcome.REM_INV_REQ_ERR;
        }
        int slid = req.slid;
        if (recvStatus == null && grh) {
            writeGrh(req, w, len);
            Outcome o = DmaMover.move(req.grhSrc.reset(r.dev).inline(req.scratch, 0, 40), dst, 40, Outcome.LOC_PROT_ERR,
                    Outcome.REM_OP_ERR);
            if (o != null) {
                recvStatus = Outcome.LOC_PROT_ERR;
                result = o;
            }
        } else if (recvStatus == null && ud) {
            dst.skip(40); // no GRH arrived: its 40 bytes stay reserved and untouched
        }
        if (recvStatus == null) {
            Outcome o = DmaMover.move(req.local, dst, len, Outcome.LOC_PROT_ERR, Outcome.REM_OP_ERR);
            if (o != null) {
                recvStatus = Outcome.LOC_PROT_ERR;
                result = o;
            }
        }
        if (result == Outcome.PAGE_FAULT) {
            q.unlock(); // the receive WQE stays for the retry
            return miss(r, req, PageFault.SUBTYPE_WQE, idx, Outcome.REM_OP_ERR);
        }
        q.commitAndUnlock(idx);
        if (recvStatus != null) {
            // an RC responder's class A/C errors move it to ERR in the requester (executeRc)
            req.errorInReceiveCqe = true;
            recvComplete(r, req, idx, recvStatus, Cqe.RECV_SEND, 0, 0, 0, req.srcQpn, 0, w);
            return result;
        }
        boolean imm = Wqe.hasImm(w.opcode);
        recvComplete(r, req, idx, Outcome.SUCCESS, imm ? Cqe.RECV_SEND_IMM : Cqe.RECV_SEND, (int) need, imm ? w.imm : 0,
                (imm ? Cqe.FLAG_IMM : 0) | (grh ? Cqe.FLAG_GRH : 0), req.srcQpn, slid, w);
        return Outcome.SUCCESS;
    }

    /** The receive CQE: to the XRC SRQ's CQ at an XRC target, else the QP's receive CQ; with the SRQ's number when one fed it. */
    private static void recvComplete(HwQp r, Exchange req, long idx, Outcome o, int opcode, int byteLen, int imm, int flags, int srcQp,
            int slid, SendWqe w) {
        boolean solicited = (w.ctrl & Wqe.CTRL_SOLICITED) != 0;
        HwSrq s = srqOf(r, req);
        HwCq cq = req.xrcSrq != null ? req.xrcSrq.cq : r.rcq;
        if (!cq.push(r.qpn, s == null ? 0 : s.srqn, false, idx, opcode, o, byteLen, imm, flags, srcQp, slid, solicited)) {
            r.transportError();
        }
    }

    /**
     * A GRH (IPv6-like, 40 bytes): version 6, payload length, next header 0x1B, hop limit; the
     * SGID is the sending port's GID 0 as its device names it, the DGID the one the sender's
     * address vector carried.
     */
    private static void writeGrh(Exchange req, SendWqe w, long len) {
        MemorySegment g = req.scratch;
        g.set(BE_INT, 0, 0x6000_0000);
        g.set(BE_INT, 4, (int) ((len & 0xFFFF) << 16) | 0x1B << 8 | 64);
        req.writeSgid(g, 8);
        MemorySegment.copy(w.dgid, 0, g, ValueLayout.JAVA_BYTE, 24, 16);
    }
}

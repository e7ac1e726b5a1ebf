package org.peerdirect.hca.cx3.fw;

import static org.peerdirect.hca.cx3.ifc.Be.BE32;

import java.lang.foreign.MemorySegment;
import java.util.Map;

import org.peerdirect.hca.cx3.ifc.DiagRprt;
import org.peerdirect.hca.cx3.ifc.Mlx4Cmd;
import org.peerdirect.hca.engine.Cqe;
import org.peerdirect.hca.engine.HcaDevice;
import org.peerdirect.hca.engine.PortCounters;

/**
 * {@code DIAG_RPRT}: the transport and CI error counters of a port (in_modifier the port), from
 * the engine's port counters: error completions by syndrome on the send and receive queues
 * (local length, QP operation and protection errors, flushes, remote invalid request, access and
 * operation errors, transport and RNR retries exceeded), RNR NAKs sent and received,
 * out-of-sequence requests received and sequence NAKs received, duplicate requests, ACK
 * timeouts. Memory-window bind and bad-response errors the engine never produces stay zero.
 * The counters are 32 bits wide, as the hardware's (they wrap). In_modifier 0 (the device's
 * sums, with CQ overruns) and other op_modifiers are refused with a bad parameter naming them.
 *
 * <p>Lock rules: the command thread; the counters are the engine's atomics.
 */
final class Diag {

    private final Firmware fw;
    private final int nports;

    Diag(Firmware fw, int nports) {
        this.fw = fw;
        this.nports = nports;
    }

    void register(Map<Integer, Firmware.Handler> table) {
        table.put(Mlx4Cmd.DIAG_RPRT, this::diagRprt);
    }

    private long diagRprt(Firmware.Cmd c) throws Refused {
        fw.needUp(c);
        if (c.opMod() != DiagRprt.OP_MOD_QUERY_TRANSPORT_CI_ERRORS) {
            throw new Refused(Mlx4Cmd.STAT_BAD_PARAM, "DIAG_RPRT op_modifier " + c.opMod() + " is not modelled (2: transport and CI errors)");
        }
        int p = c.inMod();
        if (p < 1 || p > nports) {
            throw new Refused(Mlx4Cmd.STAT_BAD_INDEX, "DIAG_RPRT of port " + p + " (ports 1.." + nports + "; the device's sums are not modelled)");
        }
        HcaDevice e = fw.engine();
        PortCounters pc = e.port(p).counters();
        MemorySegment o = MemorySegment.ofArray(new byte[DiagRprt.OUT_SIZE]);
        errors(o, pc, DiagRprt.SQ_NUM_LLE, DiagRprt.RQ_NUM_LLE, Cqe.SYNDROME_LOCAL_LENGTH_ERR);
        errors(o, pc, DiagRprt.SQ_NUM_LQPOE, DiagRprt.RQ_NUM_LQPOE, Cqe.SYNDROME_LOCAL_QP_OP_ERR);
        errors(o, pc, DiagRprt.SQ_NUM_LPE, DiagRprt.RQ_NUM_LPE, Cqe.SYNDROME_LOCAL_PROT_ERR);
        errors(o, pc, DiagRprt.SQ_NUM_WRFE, DiagRprt.RQ_NUM_WRFE, Cqe.SYNDROME_WR_FLUSH_ERR);
        errors(o, pc, DiagRprt.SQ_NUM_RIRE, DiagRprt.RQ_NUM_RIRE, Cqe.SYNDROME_REMOTE_INVAL_REQ_ERR);
        errors(o, pc, DiagRprt.SQ_NUM_RAE, DiagRprt.RQ_NUM_RAE, Cqe.SYNDROME_REMOTE_ACCESS_ERR);
        put(o, DiagRprt.SQ_NUM_ROE, pc.errorCompletions(true, Cqe.SYNDROME_REMOTE_OP_ERR));
        put(o, DiagRprt.SQ_NUM_TREE, pc.errorCompletions(true, Cqe.SYNDROME_TRANSPORT_RETRY_EXC_ERR));
        put(o, DiagRprt.SQ_NUM_RREE, pc.errorCompletions(true, Cqe.SYNDROME_RNR_RETRY_EXC_ERR));
        put(o, DiagRprt.RQ_NUM_RNR, pc.get(PortCounters.RNR_NAK_SENT));
        put(o, DiagRprt.SQ_NUM_RNR, pc.get(PortCounters.RNR_NAK_RCVD));
        put(o, DiagRprt.RQ_NUM_OOS, pc.get(PortCounters.OUT_OF_SEQUENCE));
        put(o, DiagRprt.SQ_NUM_OOS, pc.get(PortCounters.PACKET_SEQ_ERR));
        put(o, DiagRprt.RQ_NUM_DUP, pc.get(PortCounters.DUPLICATE_REQUEST));
        put(o, DiagRprt.SQ_NUM_TO, pc.get(PortCounters.LOCAL_ACK_TIMEOUT_ERR));
        fw.outbox(c, o);
        return 0;
    }

    private static void errors(MemorySegment o, PortCounters pc, int sqOffset, int rqOffset, int syndrome) {
        put(o, sqOffset, pc.errorCompletions(true, syndrome));
        put(o, rqOffset, pc.errorCompletions(false, syndrome));
    }

    /** A 32-bit counter: the low bits of the engine's (it wraps as the hardware's does). */
    private static void put(MemorySegment o, int offset, long v) {
        o.set(BE32, offset, (int) v);
    }
}

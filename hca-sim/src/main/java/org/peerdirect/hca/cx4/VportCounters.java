package org.peerdirect.hca.cx4;

import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE64;

import java.lang.foreign.MemorySegment;

import org.peerdirect.hca.cx4.ifc.Counters;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.engine.HcaDevice;
import org.peerdirect.hca.engine.PortCounters;

/**
 * The port's counters as firmware hands them out: {@code QUERY_VPORT_COUNTER} (the traffic
 * counters {@code mlx5_ib} turns into the PMA PortCountersExtended, {@code
 * mlx5_core_query_vport_counter}) and {@code QUERY_Q_COUNTER} (the transport's queue counters
 * behind {@code mlx5_ib}'s {@code hw_counters}, {@code mlx5_core_query_q_counter}). The model's
 * port has one queue counter set, id 0, counting every QP of the port (the vport's default set);
 * queue counters are 32 bits wide as the hardware's, the traffic counters 64.
 *
 * <p>Lock rules: the firmware thread; the counters are the engine's atomics.
 */
final class VportCounters {

    private final HcaDevice engine;

    VportCounters(HcaDevice engine) {
        this.engine = engine;
    }

    void register(CommandTable t) {
        t.add(Mlx5Cmd.QUERY_VPORT_COUNTER, Counters.VPORT_IN_LEN, Counters.VPORT_OUT_LEN, (opMod, in, out) -> vport(in, out));
        t.add(Mlx5Cmd.QUERY_Q_COUNTER, Counters.Q_IN_LEN, Counters.Q_OUT_LEN, (opMod, in, out) -> queue(in, out));
    }

    private void vport(MemorySegment in, MemorySegment out) throws Refused {
        int p = Counters.VPORT_IN_PORT_NUM.get(in, 0);
        if (p != 1) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_FUNCTION, "port " + p + " does not exist (the model has port 1)");
        }
        PortCounters c = engine.port(p).counters();
        long s = Counters.VPORT_OUT_SET;
        out.set(BE64, s + Counters.RECEIVED_ERRORS + Counters.PACKETS, c.get(PortCounters.RCV_ERRORS));
        out.set(BE64, s + Counters.TRANSMIT_ERRORS + Counters.PACKETS, c.get(PortCounters.XMIT_DISCARDS));
        out.set(BE64, s + Counters.RECEIVED_IB_UNICAST + Counters.PACKETS, c.get(PortCounters.RCV_PACKETS));
        out.set(BE64, s + Counters.RECEIVED_IB_UNICAST + Counters.OCTETS, c.get(PortCounters.RCV_OCTETS));
        out.set(BE64, s + Counters.TRANSMITTED_IB_UNICAST + Counters.PACKETS, c.get(PortCounters.XMIT_PACKETS));
        out.set(BE64, s + Counters.TRANSMITTED_IB_UNICAST + Counters.OCTETS, c.get(PortCounters.XMIT_OCTETS));
        // the model has no multicast groups: the multicast counters stay as the output came (zeros)
    }

    private void queue(MemorySegment in, MemorySegment out) throws Refused {
        int id = Counters.Q_IN_COUNTER_SET_ID.get(in, 0);
        if (id != 0) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_LIMIT, "q counter set " + id + ": the port has set 0 only");
        }
        PortCounters c = engine.port(1).counters();
        put(out, Counters.RX_WRITE_REQUESTS, c, PortCounters.RX_WRITE_REQUESTS);
        put(out, Counters.RX_READ_REQUESTS, c, PortCounters.RX_READ_REQUESTS);
        put(out, Counters.RX_ATOMIC_REQUESTS, c, PortCounters.RX_ATOMIC_REQUESTS);
        put(out, Counters.OUT_OF_SEQUENCE, c, PortCounters.OUT_OF_SEQUENCE);
        put(out, Counters.DUPLICATE_REQUEST, c, PortCounters.DUPLICATE_REQUEST);
        put(out, Counters.RNR_NAK_RETRY_ERR, c, PortCounters.RNR_NAK_RETRY_ERR);
        put(out, Counters.PACKET_SEQ_ERR, c, PortCounters.PACKET_SEQ_ERR);
        put(out, Counters.LOCAL_ACK_TIMEOUT_ERR, c, PortCounters.LOCAL_ACK_TIMEOUT_ERR);
    }

    /** A 32-bit hardware counter: the low 32 bits of the engine's (it wraps as the hardware's does). */
    private static void put(MemorySegment out, org.peerdirect.hca.cx4.ifc.IfcField f, PortCounters c, int counter) {
        f.set(out, 0, (int) c.get(counter));
    }
}

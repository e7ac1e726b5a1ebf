package org.peerdirect.hca.engine;

import java.util.concurrent.atomic.AtomicLongArray;

/**
 * What a port's counting logic keeps, in hardware terms: the vport traffic counters
 * ({@code struct mlx5_ifc_vport_counter_bits}: octets and packets per direction, errors) and the
 * transport's queue counters ({@code struct mlx5_ifc_query_q_counter_out_bits}: out_of_sequence,
 * duplicate_request, rnr_nak_retry_err, ...). Drivers read them only through the personality's
 * commands ({@code QUERY_VPORT_COUNTER}, {@code QUERY_Q_COUNTER} on the cx4,
 * {@code QUERY_IF_STAT} on the cx3); nothing else of the model hands them out.
 *
 * <p>What moves them: on a wire port every frame the MAC sends or accepts (its whole length, the
 * Ethernet header included, as a NIC's port counters count); on the in-JVM fabric, which carries
 * messages rather than packets, each message counts as the packets an MTU cuts it into and its
 * payload octets, and each RC request the responder accepts is answered by one acknowledgement
 * packet (READ responses carry the data instead). Counters only grow (a 64-bit counter does not
 * wrap in a test's lifetime).
 *
 * <p>Lock rules: none; every counter is an independent atomic (the data path increments, a
 * firmware command reads).
 */
public final class PortCounters {

    /** Vport traffic counters. */
    public static final int XMIT_OCTETS = 0, XMIT_PACKETS = 1, RCV_OCTETS = 2, RCV_PACKETS = 3, RCV_ERRORS = 4, XMIT_DISCARDS = 5;
    /** Queue (transport) counters, mlx5's q counter names. */
    public static final int OUT_OF_SEQUENCE = 6, DUPLICATE_REQUEST = 7, RNR_NAK_RETRY_ERR = 8, PACKET_SEQ_ERR = 9,
            LOCAL_ACK_TIMEOUT_ERR = 10, RX_WRITE_REQUESTS = 11, RX_READ_REQUESTS = 12, RX_ATOMIC_REQUESTS = 13;
    /**
     * The port's error counters by reason (PPCNT's groups): each refused frame counts in
     * {@link #RCV_ERRORS} and in one of these: a bad ICRC ({@code rx_icrc_encapsulated}), a length
     * that disagrees with the headers or the frame (IEEE 802.3's {@code a_in_range_length_errors}),
     * an opcode the port does not know (RFC 2863's {@code ifInUnknownProtos}); and the times the
     * link went down ({@code link_downed_counter}).
     */
    public static final int RX_ICRC_ENCAPSULATED = 14, RCV_LENGTH_ERRORS = 15, RCV_UNKNOWN_PROTOS = 16, LINK_DOWNED = 17;
    /** RNR NAKs the port's responders sent and its requesters received (ConnectX-3's {@code rq_num_rnr}, {@code sq_num_rnr}). */
    public static final int RNR_NAK_SENT = 18, RNR_NAK_RCVD = 19;
    static final int COUNT = 20;

    private final AtomicLongArray c = new AtomicLongArray(COUNT);
    /**
     * Error completions of the port's QPs by CQE syndrome, send queue then receive queue (the
     * transport and CI error counters ConnectX-3's {@code DIAG_RPRT} reports: local length, QP
     * operation and protection errors, flushes, remote invalid request, access and operation
     * errors, retries exceeded).
     */
    private final AtomicLongArray errorCqes = new AtomicLongArray(2 * 256);

    /** One error completion with CQE {@code syndrome} on a send ({@code sq}) or receive queue. */
    void errorCompletion(boolean sq, int syndrome) {
        errorCqes.incrementAndGet((sq ? 0 : 256) + (syndrome & 0xFF));
    }

    /** Error completions with CQE {@code syndrome} ({@link Cqe}'s syndromes) on the send or receive queues of the port's QPs. */
    public long errorCompletions(boolean sq, int syndrome) {
        return errorCqes.get((sq ? 0 : 256) + (syndrome & 0xFF));
    }

    void add(int counter, long delta) {
        c.addAndGet(counter, delta);
    }

    void inc(int counter) {
        c.incrementAndGet(counter);
    }

    /** {@code counter}'s value (for the personalities' counter commands). */
    public long get(int counter) {
        return c.get(counter);
    }

    /** One packet of {@code octets} sent. */
    void xmit(long octets) {
        c.incrementAndGet(XMIT_PACKETS);
        c.addAndGet(XMIT_OCTETS, octets);
    }

    /** The packet {@link #xmit} counted did not leave after all: a transmit discard instead. */
    void discard(long octets) {
        c.decrementAndGet(XMIT_PACKETS);
        c.addAndGet(XMIT_OCTETS, -octets);
        c.incrementAndGet(XMIT_DISCARDS);
    }

    /** One packet of {@code octets} accepted. */
    void rcv(long octets) {
        c.incrementAndGet(RCV_PACKETS);
        c.addAndGet(RCV_OCTETS, octets);
    }

    /**
     * A message of {@code octets} in {@code packets} packets crossed the fabric from {@code from}
     * to {@code to} (either may be null: an unreachable peer counts only the sender's side).
     */
    static void fabric(HcaPort from, HcaPort to, int packets, long octets) {
        if (from != null) {
            from.counters.add(XMIT_PACKETS, packets);
            from.counters.add(XMIT_OCTETS, octets);
        }
        if (to != null) {
            to.counters.add(RCV_PACKETS, packets);
            to.counters.add(RCV_OCTETS, octets);
        }
    }
}

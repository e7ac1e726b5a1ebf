package org.peerdirect.hca.wire;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLongArray;

/**
 * A port's hardware counters with rxe's names ({@code rxe_hw_counters.c}), then the model's own
 * drop reasons (rxe logs them instead): what {@code rdma statistic} and the sysfs
 * {@code hw_counters} directory show.
 *
 * @see <a href="https://elixir.bootlin.com/linux/latest/source/drivers/infiniband/sw/rxe/rxe_hw_counters.c">rxe_hw_counters.c</a>
 */
public final class RxeCounters {

    public static final int SENT_PKTS = 0, RCVD_PKTS = 1, DUP_REQ = 2, OUT_OF_SEQ_REQ = 3, RCV_RNR = 4, SND_RNR = 5, RCV_SEQ_ERR = 6,
            ACK_DEFERRED = 7, RETRY_EXCEEDED = 8, RNR_RETRY_EXCEEDED = 9, COMP_RETRY = 10, SEND_ERR = 11, LINK_DOWNED = 12,
            RDMA_SEND = 13, RDMA_RECV = 14,
            // the model's: frames dropped on receive, by reason
            RCVD_ICRC_ERR = 15, RCVD_MALFORMED = 16, RCVD_UNKNOWN_OPCODE = 17, RCVD_NO_QP = 18, RCVD_BAD_HDR = 19, RCVD_GHOST = 20,
            ARP_REQUESTS = 21, ARP_REPLIES = 22;

    public static final String[] NAMES = {"sent_pkts", "rcvd_pkts", "duplicate_request", "out_of_seq_request", "rcvd_rnr_err",
            "send_rnr_err", "rcvd_seq_err", "ack_deferred", "retry_exceeded_err", "retry_rnr_exceeded_err", "completer_retry_err",
            "send_err", "link_downed", "rdma_sends", "rdma_recvs", "rcvd_icrc_err", "rcvd_malformed", "rcvd_unknown_opcode",
            "rcvd_no_qp", "rcvd_bad_header", "rcvd_unexpected_ack", "arp_requests", "arp_replies"};

    private final AtomicLongArray c = new AtomicLongArray(NAMES.length);

    public void inc(int counter) {
        c.incrementAndGet(counter);
    }

    public long get(int counter) {
        return c.get(counter);
    }

    /** Index of a counter by its name, -1 when none has it. */
    public static int index(String name) {
        for (int i = 0; i < NAMES.length; i++) {
            if (NAMES[i].equals(name)) {
                return i;
            }
        }
        return -1;
    }

    /** Every counter, by name, in rxe's order. */
    public Map<String, Long> snapshot() {
        Map<String, Long> m = new LinkedHashMap<>();
        for (int i = 0; i < NAMES.length; i++) {
            m.put(NAMES[i], c.get(i));
        }
        return m;
    }
}

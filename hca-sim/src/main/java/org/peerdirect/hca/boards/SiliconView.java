package org.peerdirect.hca.boards;

import java.util.List;

import org.osgi.annotation.versioning.ProviderType;

/**
 * What a lab sees of a board's silicon, as a debug dump or a test bench shows it: the resources
 * alive in its tables, the transport's error counters and the QP contexts; and the one thing a
 * bench does to a board, pulling or plugging a port's cable. Read-only otherwise: a driver talks
 * to the board through its PCI function, never through this view.
 */
@ProviderType
public interface SiliconView {

    /**
     * A QP context as the silicon holds it ({@code QUERY_QP}'s view), taken when it was asked for.
     *
     * @param qpn the QP number
     * @param serviceType the context's service type ({@code MLX4_QP_ST_*}: 0 RC, 3 UD, 6 XRC; 0xc mlx5's REG_UMR)
     * @param state the transport's state code ({@code MLX4_QP_STATE_*}: 0 RST, 1 INIT, 2 RTR,
     *        3 RTS, 4 SQER, 5 SQD, 6 ERR; a ConnectX-4+ QPC says SQD as 7, the rest alike)
     * @param outstandingSends send WQEs posted (doorbell record) and not yet consumed
     */
    record Qp(int qpn, int serviceType, int state, long outstandingSends) {
    }

    /** The silicon's name (its function's bus address). */
    String name();

    /** MPT entries (memory keys) alive. */
    int mptCount();

    /** CQs alive. */
    int cqCount();

    /** Every QP context alive, by QP number. */
    List<Qp> qps();

    /** RNR NAKs the requesters met (each one answered a request; the request waits for its RNR timer or fails). */
    long rnrNaks();

    /** Requests that met no acknowledgement (an unreachable or down destination) and were retried or failed. */
    long transportRetries();

    /** Completions whose CQ was full (the CQ went to error). */
    long cqOverruns();

    /**
     * How often the silicon failed on an exception of its own: a model bug, never a driver's or a
     * user's error (those get syndromes); every lab's audit requires 0.
     */
    long engineFailures();

    /**
     * Pulls ({@code up} false) or plugs a port's cable: traffic over a down port ends in
     * {@code RETRY_EXC_ERR}, and the board reports the change as a port event.
     */
    void setPortActive(int port, boolean up);
}

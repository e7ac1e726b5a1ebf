package org.peerdirect.hca.engine;

/**
 * The sizes of a QP's queues as the driver asks for them: send and receive WQEs, data segments
 * per WQE, inline bytes, and whether every send WQE generates a CQE ({@code sq_sig_all}).
 */
public record QpCaps(int maxSendWr, int maxRecvWr, int maxSendSge, int maxRecvSge, int maxInlineData, boolean sqSigAll) {
}

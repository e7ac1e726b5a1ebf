package org.peerdirect.hca.cx4;

/**
 * A page fault waiting for its {@code PAGE_FAULT_RESUME}: the token of its EQE and the
 * {@code wq_number} and {@code page_fault_type} a resume must name (test and tool view,
 * {@link ConnectX4Device#pendingPageFaults}).
 */
public record PendingPageFault(int token, int wqNumber, int type) {
}

package org.peerdirect.hca.dpa;

/**
 * A DPA_OUTBOX object: bound to a process and the process's UAR (FlexIO ignores the deprecated
 * {@code uar} attribute). A thread configured with it rings doorbells through its EU's outbox
 * page on queues of the process's own uid only.
 */
record Outbox(int id, DpaProcess process) {
}

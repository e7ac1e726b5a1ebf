package org.peerdirect.hca.dpa.isa;

/**
 * What {@code flexio_dev_get_thread_ctx} gives a running DPA thread: its id (the DPA_THREAD
 * object id), its thread-local storage address, the argument the host gave it, the outbox page of
 * the EU it runs on, the EU id and whether the activation resumed a continuable yield.
 *
 * @param threadId the thread's object id ({@code flexio_dev_get_thread_id})
 * @param tls the thread-local storage DPA address ({@code flexio_dev_get_thread_local_storage}), 0 if none
 * @param arg the thread argument ({@code uint64_t thread_arg} of the handler)
 * @param outboxBase the DPA address of the current EU's outbox page
 * @param eu the execution unit the activation runs on (meaningful only while it stays there)
 */
public record ThreadCtx(int threadId, long tls, long arg, long outboxBase, int eu) {
}

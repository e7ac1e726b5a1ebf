package org.peerdirect.hca.engine;

/**
 * How a receive queue in host memory (both personalities) learns of new WQEs: the
 * hardware reads the queue's doorbell record and the WQEs below it when it needs a receive WQE
 * and has none, rather than being told by a doorbell register. Called under the queue's consumer
 * lock with the engine's view [{@code head}, {@code tail}) empty; fills slots from {@code tail}
 * on ({@link RecvQueue#slot}) and returns the new tail (≥ {@code tail}).
 */
@FunctionalInterface
public interface RecvFetcher {

    long fetch(RecvQueue q, long head, long tail);

    /**
     * Under the queue's consumer lock: WQEs the driver posted (its doorbell record) that are not
     * fetched into the ring yet, for the limit check of an armed SRQ. None by default.
     */
    default long notFetched(RecvQueue q) {
        return 0;
    }
}

package org.peerdirect.ib.core.provider;

import org.osgi.annotation.versioning.ConsumerType;

/** {@code struct ib_ucontext}'s driver part. */
@ConsumerType
public interface IbUcontextOps {

    /** {@code alloc_pd}. */
    IbPdOps allocPd();

    /**
     * {@code create_cq}: at least {@code cqe} entries. The driver calls {@code events} when an
     * armed CQ gets a completion or when the CQ overruns ({@code comp_handler} / {@code event_handler}).
     */
    IbCqOps createCq(int cqe, IbCqEvents events);

    /** {@code dealloc_ucontext}: called after the core destroyed the context's objects. */
    void deallocUcontext();
}

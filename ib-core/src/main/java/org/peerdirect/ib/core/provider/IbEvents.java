package org.peerdirect.ib.core.provider;

import org.osgi.annotation.versioning.ProviderType;
import org.peerdirect.ib.core.verbs.IbvEventType;

/**
 * The core's handler of one QP's or SRQ's affiliated asynchronous events ({@code ib_qp.event_handler},
 * {@code ib_srq.event_handler}; for user objects {@code ib_uverbs_qp_event_handler} and
 * {@code ib_uverbs_srq_event_handler}, which queue them on the owner's async event file). The
 * driver calls it from its event-queue handler with the type its hardware event maps to
 * ({@code mlx5_ib_qp_event}, {@code mlx4_ib_qp_event}); it does not block.
 */
@ProviderType
public interface IbEvents {

    /** Queues {@code type} for the object's owner; a type about another kind of object is ignored. */
    void event(IbvEventType type);
}

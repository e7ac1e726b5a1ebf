package org.peerdirect.ib.core.provider;

import org.osgi.annotation.versioning.ProviderType;

/** The core's handlers of one CQ, called by the driver ({@code ib_cq.comp_handler} and {@code event_handler}). */
@ProviderType
public interface IbCqEvents {

    /** A completion arrived on the armed CQ. */
    void completion();

    /** The CQ overran: {@code IB_EVENT_CQ_ERR} to the owner's async events, and its channel's waiter woken. */
    void error();
}

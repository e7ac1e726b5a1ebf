package org.peerdirect.ib.core.provider;

import org.osgi.annotation.versioning.ProviderType;
import org.peerdirect.ib.core.verbs.IbvEventType;

/**
 * The core's dispatcher of a device's unaffiliated events ({@code ib_dispatch_event} with a port
 * event: {@code PORT_ACTIVE}, {@code PORT_ERR}, {@code LID_CHANGE}, {@code PKEY_CHANGE},
 * {@code GID_CHANGE}, {@code CLIENT_REREGISTER}, {@code SM_CHANGE}): every context open on the
 * device gets it. Given to the driver by {@link IbDeviceOps#setEventHandler}; it does not block.
 */
@ProviderType
public interface IbDeviceEvents {

    /** {@code type} happened on {@code port} (from 1); a type that is not a port event is ignored. */
    void portEvent(int port, IbvEventType type);
}

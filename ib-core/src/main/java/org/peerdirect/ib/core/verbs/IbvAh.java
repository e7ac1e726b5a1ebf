package org.peerdirect.ib.core.verbs;

import org.osgi.annotation.versioning.ProviderType;

/** {@code struct ibv_ah}: where a UD datagram goes. */
@ProviderType
public interface IbvAh {
    int dlid();

    int portNum();

    void destroy();
}

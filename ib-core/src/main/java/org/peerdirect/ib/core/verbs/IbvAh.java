package org.peerdirect.ib.core.verbs;

import org.osgi.annotation.versioning.ProviderType;

/** {@code struct ibv_ah}: where a UD datagram goes. */
@ProviderType
public interface IbvAh {
    int dlid();

    int portNum();

    /** {@code is_global}: the datagrams carry a GRH to {@link #dgidHigh()}/{@link #dgidLow()}. @since 0.8 */
    boolean isGlobal();

    /** The destination GID's first 8 bytes, big-endian (0 without a GRH): what a driver copies into a WQE, no allocation. @since 0.8 */
    long dgidHigh();

    /** The destination GID's last 8 bytes, big-endian. @since 0.8 */
    long dgidLow();

    /** {@code grh.sgid_index}. @since 0.8 */
    int sgidIndex();

    /** {@code grh.hop_limit}. @since 0.8 */
    int hopLimit();

    /** {@code ibv_destroy_ah}; idempotent. */
    void destroy();
}

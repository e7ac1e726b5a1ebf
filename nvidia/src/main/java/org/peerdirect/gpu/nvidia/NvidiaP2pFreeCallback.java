package org.peerdirect.gpu.nvidia;

/**
 * {@code nvidia_p2p_get_pages}' free callback ({@code nv-p2p.h}): called when the pages go before they
 * were put.
 */
@FunctionalInterface
public interface NvidiaP2pFreeCallback {
    void free();
}

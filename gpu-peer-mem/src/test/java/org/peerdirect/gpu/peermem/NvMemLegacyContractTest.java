package org.peerdirect.gpu.peermem;

import java.util.List;

import org.peerdirect.gpu.nvidia.NvidiaRm;

/** peerdirect_support=1: the legacy invalidating client, without INVALIDATE_UNMAPS (the core unmaps inside the free callback, which nv_mem skips on the callback thread). */
class NvMemLegacyContractTest extends NvMemContract {
    @Override
    NvPeerMem client(List<NvidiaRm> gpus) {
        return new NvPeerMem("nv_mem", () -> gpus, false, false);
    }
}

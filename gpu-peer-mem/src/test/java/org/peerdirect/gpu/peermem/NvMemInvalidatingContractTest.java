package org.peerdirect.gpu.peermem;

import java.util.List;

import org.peerdirect.gpu.nvidia.NvidiaRm;

/** persistent_api_support=0: the invalidating "ex" client with INVALIDATE_UNMAPS (the RM unmaps after the free callback). */
class NvMemInvalidatingContractTest extends NvMemContract {
    @Override
    NvPeerMem client(List<NvidiaRm> gpus) {
        return new NvPeerMem("nv_mem", () -> gpus, false, true);
    }
}

package org.peerdirect.gpu.peermem;

import java.util.List;

import org.peerdirect.gpu.nvidia.NvidiaRm;

/** The default (persistent_api_support=1): the persistent client, named nv_mem, without invalidation. */
class NvMemPersistentContractTest extends NvMemContract {
    @Override
    NvPeerMem client(List<NvidiaRm> gpus) {
        return new NvPeerMem("nv_mem", () -> gpus, true, false);
    }
}

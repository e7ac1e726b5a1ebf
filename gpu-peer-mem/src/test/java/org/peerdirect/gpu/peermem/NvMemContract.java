package org.peerdirect.gpu.peermem;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.peerdirect.gpu.model.GpuBoard;
import org.peerdirect.gpu.nvidia.NvidiaRm;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.peermem.PeerMemoryClient;
import org.peerdirect.testkit.Machine;
import org.peerdirect.testkit.PeerMemoryClientContract;

/**
 * nv_mem against the peer-memory contract kit, over a GPU model on the machine's bus: its memory
 * is written by the copy engine (the CPU cannot reach it) and reached by the test device through
 * the GPU's BAR1. The invalidation path is the application's {@code cuMemFree}.
 */
abstract class NvMemContract extends PeerMemoryClientContract {

    GpuBoard board;
    NvidiaRm rm;
    NvPeerMem nv;

    abstract NvPeerMem client(List<NvidiaRm> gpus);

    @Override
    protected PeerMemoryClient createClient(Machine m) {
        board = new GpuBoard("NVIDIA A100-PCIE-40GB", 64L << 20, 32L << 20);
        rm = new NvidiaRm(m.mm(), m.plug(board.spec()), 0);
        nv = client(List.of(rm));
        return nv;
    }

    @Override
    protected long alloc(AddressSpace p, long bytes) {
        return rm.cuMemAlloc(p, bytes);
    }

    /** Frees, unless the invalidation (a cuMemFree) already did. */
    @Override
    protected void free(AddressSpace p, long va) {
        if (rm.owns(p.pid(), va, 1)) {
            rm.cuMemFree(p, va);
        }
    }

    @Override
    protected void invalidate(AddressSpace p, long va) {
        rm.cuMemFree(p, va); // the free callback invalidates, then the RM unmaps
    }

    @Override
    protected void write(AddressSpace p, long va, byte[] data) {
        rm.cuMemcpyHtoD(p, va, data, 0, data.length);
    }

    @Override
    protected boolean invalidationRequired() {
        return !nv.persistent();
    }

    @AfterEach
    void gpuDown() {
        assertEquals(List.of(), rm.shutdown(), "the GPU holds nothing at the end");
        assertEquals(0, nv.inUse(), "no module reference left");
        board.close();
    }
}

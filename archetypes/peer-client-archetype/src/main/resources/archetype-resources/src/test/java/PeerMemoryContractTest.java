package ${package};

import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.peermem.PeerMemoryClient;
import org.peerdirect.testkit.Machine;
import org.peerdirect.testkit.PeerMemoryClientContract;

/**
 * The testkit's peer-memory client contract against this client: registration with a real IB
 * core, acquire, dma_map's table, statistics, invalidation, unregister and their races, each test
 * ending with the simulated machine's IOMMU audit.
 */
class PeerMemoryContractTest extends PeerMemoryClientContract {

    private PeerMemory memory;

    @Override
    protected PeerMemoryClient createClient(Machine m) {
        memory = new PeerMemory(m.mm(), PeerMemoryComponent.NAME, 4096, false);
        return memory;
    }

    @Override
    protected long alloc(AddressSpace p, long bytes) {
        return memory.alloc(p.pid(), bytes);
    }

    @Override
    protected void free(AddressSpace p, long va) {
        memory.free(p.pid(), va);
    }

    @Override
    protected void invalidate(AddressSpace p, long va) {
        memory.invalidate(p.pid(), va);
    }
}

package org.peerdirect.ssd;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.peermem.PeerMemoryClient;
import org.peerdirect.ssd.model.NvmeSsd;
import org.peerdirect.ssd.nvme.NvmePmr;
import org.peerdirect.ssd.peermem.SsdPeerMem;
import org.peerdirect.testkit.Machine;
import org.peerdirect.testkit.PeerMemoryClientContract;

/**
 * ssd_mem against the peer-memory contract kit: the SSD's PMR mapped into the process, reached by
 * the test device through the PMR BAR; the invalidation path is the application's munmap.
 */
class SsdMemContractTest extends PeerMemoryClientContract {

    NvmeSsd ssd;
    NvmePmr pmr;
    SsdPeerMem client;

    @Override
    protected PeerMemoryClient createClient(Machine m) {
        ssd = new NvmeSsd("contract-ssd", tmp.resolve("nvme0.pmr"), 16L << 20);
        pmr = new NvmePmr(m.mm(), m.plug(ssd.spec()), 0);
        client = new SsdPeerMem(() -> List.of(pmr));
        return client;
    }

    @Override
    protected long alloc(AddressSpace p, long bytes) {
        return pmr.alloc(p, bytes);
    }

    @Override
    protected void free(AddressSpace p, long va) {
        if (pmr.owns(p.pid(), va, 1)) {
            pmr.munmap(p.pid(), va);
        }
    }

    @Override
    protected void invalidate(AddressSpace p, long va) {
        pmr.munmap(p.pid(), va);
    }

    @AfterEach
    void ssdDown() {
        assertEquals(List.of(), pmr.shutdown(), "the SSD holds nothing at the end");
        assertEquals(0, client.inUse(), "no module reference left");
        ssd.close();
    }
}

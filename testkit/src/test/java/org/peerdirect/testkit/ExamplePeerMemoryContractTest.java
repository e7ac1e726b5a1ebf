package org.peerdirect.testkit;

import org.peerdirect.example.peermem.ExamplePeerMemory;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.peermem.PeerMemoryClient;

/** The reference client passes the contract, with 64 KiB pages as a GPU client has. */
class ExamplePeerMemoryContractTest extends PeerMemoryClientContract {

    private ExamplePeerMemory example;

    @Override
    protected PeerMemoryClient createClient(Machine m) {
        example = new ExamplePeerMemory(m.mm(), "example_peer", 65536, false);
        return example;
    }

    @Override
    protected long alloc(AddressSpace p, long bytes) {
        return example.alloc(p.pid(), bytes);
    }

    @Override
    protected void free(AddressSpace p, long va) {
        example.free(p.pid(), va);
    }

    @Override
    protected void invalidate(AddressSpace p, long va) {
        example.invalidate(p.pid(), va);
    }
}

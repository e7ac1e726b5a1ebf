package org.peerdirect.example.peermem;

import java.util.List;

import org.apache.felix.service.command.Descriptor;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.peerdirect.kernel.shell.Args;

/**
 * Gogo commands to drive the example client by hand: {@code example_peer:alloc <pid> [bytes]}
 * (prints the address), {@code example_peer:free <pid> <addr>},
 * {@code example_peer:invalidate <pid> <addr>}, {@code example_peer:list}.
 */
@Component(service = ExamplePeerCommands.class, property = {"osgi.command.scope=example_peer",
        "osgi.command.function=alloc", "osgi.command.function=free", "osgi.command.function=invalidate",
        "osgi.command.function=list"})
public final class ExamplePeerCommands {

    private final ExamplePeerMemComponent client;

    @Activate
    public ExamplePeerCommands(@Reference ExamplePeerMemComponent client) {
        this.client = client;
    }

    @Descriptor("allocates 'device memory' of the default region size and maps it into a process. Example: p = (example_peer:alloc $pid)")
    public String alloc(@Descriptor("process id") String pid) {
        return String.format("0x%x", client.alloc(Args.pid("example_peer:alloc", pid), client.defaultRegionSize()));
    }

    @Descriptor("allocates 'device memory' and maps it into a process; prints its address. Example: p = (example_peer:alloc $pid 1M)")
    public String alloc(@Descriptor("process id") String pid,
            @Descriptor("bytes (K/M/G suffixes), rounded up to the client's page size") String bytes) {
        return String.format("0x%x", client.alloc(Args.pid("example_peer:alloc", pid),
                Args.size("example_peer:alloc", "the size", bytes, 1, 1L << 40)));
    }

    @Descriptor("frees an allocation: its registrations are invalidated first (or EBUSY without invalidation)")
    public String free(@Descriptor("process id") String pid, @Descriptor("the allocation's address") String addr) {
        client.free(Args.pid("example_peer:free", pid), Args.address("example_peer:free", addr));
        return "freed " + addr;
    }

    @Descriptor("invalidates every registration of an allocation, as a GPU driver does before moving memory")
    public String invalidate(@Descriptor("process id") String pid, @Descriptor("the allocation's address") String addr) {
        int n = client.invalidate(Args.pid("example_peer:invalidate", pid), Args.address("example_peer:invalidate", addr));
        return "invalidated " + n + " registration(s) of " + addr;
    }

    @Descriptor("the client's allocations with their registrations")
    public String list() {
        List<String> l = client.list();
        return l.isEmpty() ? client.name() + ": no allocations" : String.join("\n", l);
    }
}

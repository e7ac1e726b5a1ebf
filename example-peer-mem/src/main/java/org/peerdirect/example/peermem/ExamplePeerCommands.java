package org.peerdirect.example.peermem;

import java.util.List;

import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;

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

    public String alloc(int pid) {
        return alloc(pid, client.defaultRegionSize());
    }

    public String alloc(int pid, long bytes) {
        return String.format("0x%x", client.alloc(pid, bytes));
    }

    public String free(int pid, String addr) {
        client.free(pid, Long.decode(addr));
        return "freed " + addr;
    }

    public String invalidate(int pid, String addr) {
        int n = client.invalidate(pid, Long.decode(addr));
        return "invalidated " + n + " registration(s) of " + addr;
    }

    public String list() {
        List<String> l = client.list();
        return l.isEmpty() ? client.name() + ": no allocations" : String.join("\n", l);
    }
}

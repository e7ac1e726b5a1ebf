package org.peerdirect.ib.core.impl;

import java.util.ArrayList;
import java.util.List;

import org.apache.felix.service.command.Descriptor;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.peerdirect.ib.core.peer.PeerMemoryController;
import org.peerdirect.peermem.PeerMemoryRegistration;
import org.peerdirect.peermem.PeerMemoryStatistics;

/**
 * {@code peermem:clients} (registered clients in brokering order, and those still draining) and
 * {@code peermem:stats [name]} (the sysfs counters, with the directory they are in).
 */
@Component(service = PeerMemCommands.class, property = {"osgi.command.scope=peermem", "osgi.command.function=clients",
        "osgi.command.function=stats"})
public final class PeerMemCommands {

    private final PeerMemoryController controller;
    private final String sysfsRoot;

    @Activate
    public PeerMemCommands(@Reference PeerMemoryControllerService peer, @Reference org.peerdirect.kernel.sysfs.Sysfs sysfs) {
        this.controller = peer.controller();
        this.sysfsRoot = sysfs.root().toString();
    }

    @Descriptor("the peer-memory clients, their flavour and live MRs")
    public String clients() {
        List<String> out = new ArrayList<>();
        out.add(String.format("%-3s %-24s %-10s %-12s %-18s %s", "#", "name", "version", "state", "flavour", "live MRs"));
        List<PeerMemoryRegistration> brokered = controller.clients();
        int i = 0;
        for (PeerMemoryRegistration r : controller.knownClients()) {
            boolean b = brokered.contains(r);
            out.add(String.format("%-3s %-24s %-10s %-12s %-18s %d", b ? Integer.toString(++i) : "-", r.name(),
                    r.statistics().version(), b ? "registered" : "unregistering",
                    r.invalidationRequired() ? "invalidation" : "no invalidation", controller.umemsOf(r).size()));
        }
        if (out.size() == 1) {
            out.add("(no peer memory clients registered)");
        }
        return String.join("\n", out);
    }

    @Descriptor("the statistics of every peer-memory client (as under /sys/kernel/infiniband/memory_peers)")
    public String stats() {
        List<String> out = new ArrayList<>();
        for (PeerMemoryRegistration r : controller.knownClients()) {
            out.add(stats(r.name()));
        }
        return out.isEmpty() ? "(no peer memory clients registered)" : String.join("\n\n", out);
    }

    @Descriptor("the statistics of one peer-memory client. Example: peermem:stats example_peer")
    public String stats(@Descriptor("client name (peermem:clients)") String name) {
        for (PeerMemoryRegistration r : controller.knownClients()) {
            if (r.name().equals(name)) {
                PeerMemoryStatistics s = r.statistics();
                List<String> out = new ArrayList<>();
                out.add(sysfsRoot + "/" + PeerMemoryController.SYSFS_DIR + "/" + name + "/");
                out.add("  version            " + s.version());
                out.add("  num_alloc_mrs      " + s.numAllocMrs());
                out.add("  num_dealloc_mrs    " + s.numDeallocMrs());
                out.add("  num_reg_pages      " + s.numRegPages());
                out.add("  num_dereg_pages    " + s.numDeregPages());
                out.add("  num_reg_bytes      " + s.numRegBytes());
                out.add("  num_dereg_bytes    " + s.numDeregBytes());
                out.add("  num_free_callbacks " + s.numFreeCallbacks());
                for (String u : controller.umemsOf(r)) {
                    out.add("  live: " + u);
                }
                return String.join("\n", out);
            }
        }
        throw new IllegalArgumentException("peermem:stats: no peer memory client named '" + name + "' (peermem:clients lists them)");
    }
}

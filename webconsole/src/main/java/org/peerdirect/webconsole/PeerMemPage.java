package org.peerdirect.webconsole;

import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.felix.webconsole.servlet.ServletConstants;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;

import jakarta.servlet.Servlet;

/**
 * Peer-memory clients with their statistics: {@code /sys/kernel/infiniband/memory_peers/<name>/},
 * the counters {@code peermem:stats} prints. {@code /pdpeermem/<name>} shows one client; 404 when
 * it is not (any more) registered.
 */
@Component(service = Servlet.class, property = {ServletConstants.PLUGIN_LABEL + "=" + PeerMemPage.LABEL,
        ServletConstants.PLUGIN_TITLE + "=Peer memory", ServletConstants.PLUGIN_CATEGORY + "=" + Page.CATEGORY})
public final class PeerMemPage extends Page {

    private static final long serialVersionUID = 1L;
    static final String LABEL = "pdpeermem";
    static final List<String> COLUMNS = List.of("version", "num_alloc_mrs", "num_dealloc_mrs", "num_reg_pages", "num_dereg_pages",
            "num_reg_bytes", "num_dereg_bytes", "num_free_callbacks");

    private final transient ConsoleData data;

    @Activate
    public PeerMemPage(@Reference ConsoleData data) {
        this.data = data;
    }

    @Override
    Object load(String sub) {
        Map<String, Map<String, String>> clients = new LinkedHashMap<>();
        if (!sub.isEmpty()) {
            clients.put(sub, data.peerClient(sub));
            return clients;
        }
        for (String name : data.peerClients()) {
            try {
                clients.put(name, data.peerClient(name));
            } catch (ConsoleData.Gone e) {
                // unloaded since the listing
            }
        }
        return clients;
    }

    @Override
    void render(Object model, String sub, PrintWriter out) {
        @SuppressWarnings("unchecked")
        Map<String, Map<String, String>> clients = (Map<String, Map<String, String>>) model;
        heading(out, clients.size() + " peer memory client(s), statistics from /sys/" + ConsoleData.MEMORY_PEERS);
        List<String> head = new ArrayList<>(List.of("name"));
        head.addAll(COLUMNS);
        List<List<String>> rows = new ArrayList<>();
        clients.forEach((name, stats) -> {
            List<String> r = new ArrayList<>(List.of(link(sub.isEmpty() ? LABEL + "/" + name : name, name)));
            for (String c : COLUMNS) {
                r.add(stats.getOrDefault(c, ""));
            }
            rows.add(r);
        });
        table(out, "peerclients", head, rows);
    }
}

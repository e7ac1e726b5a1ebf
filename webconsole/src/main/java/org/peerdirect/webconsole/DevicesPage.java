package org.peerdirect.webconsole;

import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;

import org.apache.felix.webconsole.servlet.ServletConstants;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;

import jakarta.servlet.Servlet;

/**
 * Devices and ports: the list {@code rdma:devices} prints, each device with its ports as
 * {@code /sys/class/infiniband} shows them (state, physical state, rate, link layer, LID) and
 * its ODP counters with its ODP MRs.
 * {@code /pddevices/<name>} shows one device; 404 when it is not (any more) there.
 */
@Component(service = Servlet.class, property = {ServletConstants.PLUGIN_LABEL + "=" + DevicesPage.LABEL,
        ServletConstants.PLUGIN_TITLE + "=RDMA devices", ServletConstants.PLUGIN_CATEGORY + "=" + Page.CATEGORY})
public final class DevicesPage extends Page {

    private static final long serialVersionUID = 1L;
    static final String LABEL = "pddevices";

    private final transient ConsoleData data;

    @Activate
    public DevicesPage(@Reference ConsoleData data) {
        this.data = data;
    }

    @Override
    Object load(String sub) {
        if (sub.isEmpty()) {
            List<ConsoleData.Device> all = new ArrayList<>();
            for (String n : data.deviceNames()) {
                try {
                    all.add(data.device(n));
                } catch (ConsoleData.Gone e) {
                    // removed since the listing: the list page simply no longer shows it
                }
            }
            return all;
        }
        return List.of(data.device(sub));
    }

    @Override
    void render(Object model, String sub, PrintWriter out) {
        @SuppressWarnings("unchecked")
        List<ConsoleData.Device> devices = (List<ConsoleData.Device>) model;
        heading(out, devices.size() + " RDMA device(s), as rdma:devices and /sys/class/infiniband show them");
        List<List<String>> rows = new ArrayList<>();
        for (ConsoleData.Device d : devices) {
            for (ConsoleData.Port p : d.ports()) {
                rows.add(List.of(link(sub.isEmpty() ? LABEL + "/" + d.name() : d.name(), d.name()), d.driver(),
                        String.format("%016x", d.nodeGuid()), d.fwVer(), d.hcaType(), Integer.toString(p.port()), p.state(), p.physState(),
                        p.rate(), p.linkLayer(), p.lid()));
            }
        }
        table(out, "devices", List.of("device", "driver", "node GUID", "fw_ver", "hca_type", "port", "state", "phys_state", "rate", "link_layer", "lid"), rows);
        for (ConsoleData.Device d : devices) {
            for (ConsoleData.Port p : d.ports()) {
                // the port counters as sysfs shows them (port_xmit_data in 4-byte words, as the kernel's)
                List<List<String>> counters = new ArrayList<>();
                data.portCounters(d.name(), Integer.toString(p.port())).forEach((k, v) -> counters.add(List.of(k, v)));
                if (!counters.isEmpty()) {
                    out.println("<h3>" + esc(d.name()) + " port " + p.port() + ": counters (class/infiniband/" + esc(d.name()) + "/ports/"
                            + p.port() + ")</h3>");
                    table(out, "counters-" + d.name() + "-" + p.port(), List.of("counter", "value"), counters);
                }
            }
        }
        for (ConsoleData.Device d : devices) {
            if (data.odpDevices().contains(d.name())) {
                List<List<String>> odp = new ArrayList<>();
                List<List<String>> mrs = new ArrayList<>();
                try {
                    data.odp(d.name()).forEach((k, v) -> {
                        if (k.equals("mrs")) { // one line per ODP or dma-buf MR with its counters, as rdma res show mr
                            v.lines().filter(l -> !l.isBlank()).forEach(l -> mrs.add(List.of(l.strip())));
                        } else {
                            odp.add(List.of(k, v.replace('\n', ' ')));
                        }
                    });
                } catch (ConsoleData.Gone e) {
                    continue; // the driver went away since load(): its counters with it
                }
                out.println("<h3>" + esc(d.name()) + ": ODP (class/infiniband/" + esc(d.name()) + "/odp)</h3>");
                table(out, "odp-" + d.name(), List.of("counter", "value"), odp);
                table(out, "odpmrs-" + d.name(), List.of("ODP and dma-buf MRs (mrs: key and per-MR counters)"), mrs);
            }
        }
    }
}

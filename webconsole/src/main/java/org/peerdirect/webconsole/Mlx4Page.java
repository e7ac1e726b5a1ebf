package org.peerdirect.webconsole;

import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

import org.apache.felix.webconsole.servlet.ServletConstants;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.peerdirect.mlx4.stats.Mlx4CoreStats;

import jakarta.servlet.Servlet;

/**
 * The mlx4 devices as the mlx4 driver sees them: the recent HCR commands ({@code mlx4:cmdlog})
 * and the DMA pages it holds ({@code mlx4:pages}), from the driver's read-only
 * {@link Mlx4CoreStats}. {@code /pdmlx4/<mlx4_N>} shows one device; 404 when it is not (any more)
 * bound.
 */
@Component(service = Servlet.class, property = {ServletConstants.PLUGIN_LABEL + "=" + Mlx4Page.LABEL,
        ServletConstants.PLUGIN_TITLE + "=mlx4 firmware", ServletConstants.PLUGIN_CATEGORY + "=" + Page.CATEGORY})
public final class Mlx4Page extends Page {

    private static final long serialVersionUID = 1L;
    static final String LABEL = "pdmlx4";
    /** Commands shown per device, as {@code mlx4:cmdlog}'s default. */
    static final int COMMANDS = 40;

    private final transient Mlx4CoreStats stats;

    @Activate
    public Mlx4Page(@Reference Mlx4CoreStats stats) {
        this.stats = stats;
    }

    @Override
    Object load(String sub) {
        List<Mlx4CoreStats.Device> out = new ArrayList<>(stats.devices(COMMANDS));
        if (!sub.isEmpty()) {
            out.removeIf(d -> !d.name().equals(sub));
            if (out.isEmpty()) {
                throw new ConsoleData.Gone("no mlx4 device " + sub);
            }
        }
        return out;
    }

    @Override
    void render(Object model, String sub, PrintWriter out) {
        @SuppressWarnings("unchecked")
        List<Mlx4CoreStats.Device> devs = (List<Mlx4CoreStats.Device>) model;
        heading(out, devs.size() + " mlx4 device(s), as mlx4:cmdlog and mlx4:pages show them");
        for (Mlx4CoreStats.Device d : devs) {
            out.println("<h3>" + link(sub.isEmpty() ? LABEL + "/" + d.name() : d.name(), d.name()) + " (" + esc(d.bdf()) + ", firmware "
                    + esc(d.firmware()) + ", board " + esc(d.boardId()) + "): " + d.commandsTotal() + " commands, the last " + d.commands().size()
                    + "; completion by " + (d.eventMode() ? "events" : "polling") + " now</h3>");
            List<List<String>> rows = new ArrayList<>();
            for (Mlx4CoreStats.Command c : d.commands()) {
                rows.add(List.of(Long.toString(c.seq()), c.opcode(), String.format("0x%x", c.opMod()), String.format("0x%x", c.inMod()),
                        c.events() ? "event" : "poll", String.format(Locale.ROOT, "%.1f", c.latencyMicros()), c.result()));
            }
            table(out, "cmdlog-" + d.name(), List.of("#", "command", "op_mod", "in_mod", "completion", "latency (us)", "status"), rows);
            List<List<String>> pages = new ArrayList<>();
            d.pages().forEach((k, v) -> pages.add(List.of(k, Long.toString(v))));
            table(out, "pages-" + d.name(), List.of("DMA pages", "count"), pages);
        }
    }
}

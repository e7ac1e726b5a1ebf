package org.peerdirect.webconsole;

import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CopyOnWriteArrayList;

import org.apache.felix.webconsole.servlet.ServletConstants;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.component.annotations.ReferenceCardinality;
import org.osgi.service.component.annotations.ReferencePolicy;
import org.osgi.service.component.annotations.ReferencePolicyOption;
import org.peerdirect.mlx5.stats.Mlx5CoreStats;

import jakarta.servlet.Servlet;

/**
 * The mlx5 devices as mlx5_core sees them: the recent firmware commands ({@code mlx5:cmdlog}),
 * the firmware pages ({@code mlx5:pages}) and the event queues ({@code mlx5:eqs}), from each
 * device's read-only {@link Mlx5CoreStats} service. {@code /pdmlx5/<mlx5_N>} shows one device;
 * 404 when it is not (any more) bound.
 */
@Component(service = Servlet.class, property = {ServletConstants.PLUGIN_LABEL + "=" + Mlx5Page.LABEL,
        ServletConstants.PLUGIN_TITLE + "=mlx5 firmware", ServletConstants.PLUGIN_CATEGORY + "=" + Page.CATEGORY})
public final class Mlx5Page extends Page {

    private static final long serialVersionUID = 1L;
    static final String LABEL = "pdmlx5";
    /** Commands shown per device, as {@code mlx5:cmdlog}'s default. */
    static final int COMMANDS = 40;

    /** The devices bound now; DS adds and removes them as mlx5_core binds and unbinds functions. */
    @Reference(cardinality = ReferenceCardinality.MULTIPLE, policy = ReferencePolicy.DYNAMIC, policyOption = ReferencePolicyOption.GREEDY)
    private final transient List<Mlx5CoreStats> devices = new CopyOnWriteArrayList<>();

    /** One device's snapshot, read before the page is framed. */
    record Snapshot(String name, String bdf, long total, List<Mlx5CoreStats.Command> commands, java.util.Map<String, Long> pages,
            List<String> eqs) {
    }

    @Override
    Object load(String sub) {
        List<Snapshot> out = new ArrayList<>();
        for (Mlx5CoreStats d : devices) {
            if (sub.isEmpty() || d.name().equals(sub)) {
                out.add(new Snapshot(d.name(), d.bdf(), d.commandsTotal(), d.commands(COMMANDS), d.pages(), d.eqs()));
            }
        }
        if (!sub.isEmpty() && out.isEmpty()) {
            throw new ConsoleData.Gone("no mlx5 device " + sub);
        }
        out.sort((a, b) -> a.name().compareTo(b.name()));
        return out;
    }

    @Override
    void render(Object model, String sub, PrintWriter out) {
        @SuppressWarnings("unchecked")
        List<Snapshot> devs = (List<Snapshot>) model;
        heading(out, devs.size() + " mlx5 device(s), as mlx5:cmdlog, mlx5:pages and mlx5:eqs show them");
        for (Snapshot d : devs) {
            out.println("<h3>" + link(sub.isEmpty() ? LABEL + "/" + d.name() : d.name(), d.name()) + " (" + esc(d.bdf()) + "): "
                    + d.total() + " commands, the last " + d.commands().size() + "</h3>");
            List<List<String>> rows = new ArrayList<>();
            for (Mlx5CoreStats.Command c : d.commands()) {
                rows.add(List.of(Long.toString(c.seq()), c.opcode(), String.format("0x%x", c.opMod()), c.events() ? "event" : "poll",
                        String.format(Locale.ROOT, "%.1f", c.latencyMicros()), c.result()));
            }
            table(out, "cmdlog-" + d.name(), List.of("#", "command", "op_mod", "completion", "latency (us)", "status"), rows);
            List<List<String>> pages = new ArrayList<>();
            d.pages().forEach((k, v) -> pages.add(List.of(k, Long.toString(v))));
            table(out, "pages-" + d.name(), List.of("firmware pages", "count"), pages);
            out.println("<pre id='eqs-" + esc(d.name()) + "'>" + esc(String.join("\n", d.eqs())) + "</pre>");
        }
    }
}

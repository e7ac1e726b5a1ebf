package org.peerdirect.webconsole;

import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;

import org.apache.felix.webconsole.servlet.ServletConstants;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.component.annotations.ReferenceCardinality;
import org.osgi.service.component.annotations.ReferencePolicy;
import org.osgi.service.component.annotations.ReferencePolicyOption;
import org.peerdirect.hca.dpaview.DpaView;
import org.peerdirect.mlx5.stats.Mlx5CoreStats;

import jakarta.servlet.Servlet;

/**
 * The BlueField-3 DPAs as {@code dpa:caps}, {@code dpa:ps} and {@code dpa:threads} show them: the
 * DPA capability block, the EUs that ran activations, the DPA processes and their threads (state,
 * EU, activations, triggers, each bound CQ armed or not), from the silicon side's read-only
 * {@link DpaView}. A function is named as mlx5_core names it ({@code mlx5_2}) when the driver has
 * bound it, else by its bus address. {@code /pddpa/<mlx5_N or bdf>} shows one; 404 when it is not
 * (any more) plugged in.
 */
@Component(service = Servlet.class, property = {ServletConstants.PLUGIN_LABEL + "=" + DpaPage.LABEL,
        ServletConstants.PLUGIN_TITLE + "=DPA", ServletConstants.PLUGIN_CATEGORY + "=" + Page.CATEGORY})
public final class DpaPage extends Page {

    private static final long serialVersionUID = 1L;
    static final String LABEL = "pddpa";

    private final transient DpaView dpas;

    /** The mlx5 devices bound now, only for their names. */
    @Reference(cardinality = ReferenceCardinality.MULTIPLE, policy = ReferencePolicy.DYNAMIC, policyOption = ReferencePolicyOption.GREEDY)
    private final transient List<Mlx5CoreStats> mlx5 = new CopyOnWriteArrayList<>();

    @Activate
    public DpaPage(@Reference DpaView dpas) {
        this.dpas = dpas;
    }

    /** One DPA as read before the page is framed. */
    record Snapshot(String name, DpaView.Dpa dpa, Map<String, Long> caps) {
    }

    @Override
    Object load(String sub) {
        List<Snapshot> out = new ArrayList<>();
        for (String bdf : dpas.functions()) {
            String name = nameOf(bdf);
            if (sub.isEmpty() || sub.equals(name) || sub.equals(bdf)) {
                try {
                    out.add(new Snapshot(name, dpas.dpa(bdf), dpas.caps(bdf)));
                } catch (IllegalArgumentException unplugged) { // between the listing and the read
                    if (!sub.isEmpty()) {
                        throw new ConsoleData.Gone(unplugged.getMessage());
                    }
                }
            }
        }
        if (!sub.isEmpty() && out.isEmpty()) {
            throw new ConsoleData.Gone("no BlueField-3 DPA " + sub);
        }
        return out;
    }

    /** {@code mlx5_N} of the function when mlx5_core has bound it, else its bus address. */
    private String nameOf(String bdf) {
        for (Mlx5CoreStats d : mlx5) {
            if (d.bdf().equals(bdf)) {
                return d.name();
            }
        }
        return bdf;
    }

    @Override
    void render(Object model, String sub, PrintWriter out) {
        @SuppressWarnings("unchecked")
        List<Snapshot> list = (List<Snapshot>) model;
        heading(out, list.size() + " BlueField-3 DPA(s), as dpa:caps, dpa:ps and dpa:threads show them");
        for (Snapshot s : list) {
            DpaView.Dpa d = s.dpa();
            String id = s.name().replace(':', '-').replace('.', '-');
            out.println("<h3>" + link(sub.isEmpty() ? LABEL + "/" + s.name() : s.name(), s.name()) + " (" + esc(d.bdf()) + "): "
                    + (d.running() ? "eus " + d.eusTotal() + " (reserved " + d.eusReserved() + ") busy " + d.eusBusy() : "no DPA object yet")
                    + "</h3>");
            List<List<String>> procs = new ArrayList<>();
            for (DpaView.Process p : d.processes()) {
                procs.add(List.of(Integer.toString(p.id()), Integer.toString(p.uid()), Integer.toString(p.pd()), String.format("0x%02x", p.status()),
                        String.format("0x%x+%d", p.heapBase(), p.heapSize()), Integer.toString(p.threads()), p.crash()));
            }
            table(out, "dpaprocs-" + id, List.of("process", "uid", "pd", "status", "heap", "threads", "crash"), procs);
            List<List<String>> threads = new ArrayList<>();
            for (DpaView.Thread t : d.threads()) {
                threads.add(List.of(Integer.toString(t.id()), Integer.toString(t.process()), t.entry(), t.state(), t.eu() < 0 ? "-" : Integer.toString(t.eu()),
                        Long.toString(t.activations()), Long.toString(t.triggersLatched()), Long.toString(t.triggersIgnored()), cqs(t.cqs())));
            }
            table(out, "dpathreads-" + id, List.of("thread", "process", "entry", "state", "eu", "activations", "latched", "ignored", "CQs"),
                    threads);
            List<List<String>> eus = new ArrayList<>();
            for (DpaView.Eu e : d.eus()) {
                eus.add(List.of(Integer.toString(e.eu()), e.busy() ? "busy" : "free", Long.toString(e.activations()), Long.toString(e.cycles()),
                        Long.toString(e.instret())));
            }
            table(out, "dpaeus-" + id, List.of("eu", "state", "activations", "cycles", "instret"), eus);
            List<List<String>> caps = new ArrayList<>();
            s.caps().forEach((k, v) -> caps.add(List.of(k, Long.toString(v))));
            table(out, "dpacaps-" + id, List.of("dpa_capabilities", "value"), caps);
        }
    }

    /** "cq 0x41 armed pi 8 ci 8", as dpa:threads prints each bound CQ. */
    static String cqs(List<DpaView.Cq> cqs) {
        List<String> l = new ArrayList<>();
        for (DpaView.Cq c : cqs) {
            l.add(String.format("cq 0x%x %s", c.cqn(), c.known() ? (c.armed() ? "armed" : "not armed") + " pi " + c.producerIndex() + " ci "
                    + c.consumerIndex() : "?"));
        }
        return String.join(", ", l);
    }
}

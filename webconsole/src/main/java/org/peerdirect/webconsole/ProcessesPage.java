package org.peerdirect.webconsole;

import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;

import org.apache.felix.webconsole.servlet.ServletConstants;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.peerdirect.ib.core.objects.UverbsObjects;
import org.peerdirect.kernel.mm.AddressSpace;

import jakarta.servlet.Servlet;

/**
 * The simulated processes as {@code kernel:ps} lists them; {@code /pdprocesses/<pid>} shows one
 * with its mappings ({@code kernel:maps}); 404 when the process has exited.
 */
@Component(service = Servlet.class, property = {ServletConstants.PLUGIN_LABEL + "=" + ProcessesPage.LABEL,
        ServletConstants.PLUGIN_TITLE + "=Processes", ServletConstants.PLUGIN_CATEGORY + "=" + Page.CATEGORY})
public final class ProcessesPage extends Page {

    private static final long serialVersionUID = 1L;
    static final String LABEL = "pdprocesses";

    private final transient ConsoleData data;

    @Activate
    public ProcessesPage(@Reference ConsoleData data) {
        this.data = data;
    }

    record Model(List<List<String>> rows, List<String> maps, List<UverbsObjects.Context> contexts) {
    }

    @Override
    Object load(String sub) {
        List<AddressSpace> list;
        List<String> maps = List.of();
        List<UverbsObjects.Context> contexts = data.contexts();
        if (sub.isEmpty()) {
            list = data.processes();
        } else {
            int pid;
            try {
                pid = Integer.parseInt(sub);
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("a process id is a number, got '" + sub + "'");
            }
            AddressSpace as = data.process(pid);
            list = List.of(as);
            try {
                maps = as.maps();
            } catch (RuntimeException e) {
                throw new ConsoleData.Gone("process " + pid + " exited: " + e.getMessage());
            }
            contexts = contexts.stream().filter(c -> c.pid() == pid).toList();
        }
        List<List<String>> rows = new ArrayList<>();
        for (AddressSpace as : list) {
            rows.add(List.of(link(sub.isEmpty() ? LABEL + "/" + as.pid() : Integer.toString(as.pid()), Integer.toString(as.pid())), as.name(),
                    Long.toString(as.rssPages() * 4), Long.toString(as.swappedPages() * 4), Long.toString(as.pinnedPages() * 4),
                    Long.toString(as.faultCount()), Long.toString(contexts.stream().filter(c -> c.pid() == as.pid()).count())));
        }
        return new Model(rows, maps, sub.isEmpty() ? List.of() : contexts);
    }

    @Override
    void render(Object model, String sub, PrintWriter out) {
        Model m = (Model) model;
        heading(out, m.rows().size() + " process(es), as kernel:ps shows them");
        table(out, "processes", List.of("PID", "NAME", "RSS(kB)", "SWAP(kB)", "PINNED(kB)", "FAULTS", "contexts"), m.rows());
        int i = 0;
        for (UverbsObjects.Context c : m.contexts()) {
            out.println("<h3>context " + i + " on " + esc(c.device()) + ": " + c.pds() + " PD(s), " + c.mrs().size() + " MR(s), " + c.qps().size()
                    + " QP(s), " + c.cqs().size() + " CQ(s)</h3>");
            List<List<String>> mrs = new ArrayList<>();
            for (UverbsObjects.Mr mr : c.mrs()) {
                mrs.add(List.of(String.format("0x%x", mr.lkey()), String.format("0x%x", mr.rkey()), String.format("0x%x", mr.addr()),
                        mr.length() == -1L ? "SIZE_MAX" : Long.toString(mr.length()), mr.kind().name(), mr.state().name()));
            }
            table(out, "mrs-" + i, List.of("lkey", "rkey", "addr", "length", "kind", "state"), mrs);
            List<List<String>> qps = new ArrayList<>();
            for (UverbsObjects.Qp qp : c.qps()) {
                qps.add(List.of(String.format("0x%x", qp.qpn()), qp.type(), qp.state()));
            }
            table(out, "qps-" + i, List.of("qpn", "type", "state"), qps);
            List<List<String>> cqs = new ArrayList<>();
            for (UverbsObjects.Cq cq : c.cqs()) {
                cqs.add(List.of(Integer.toString(cq.cqe())));
            }
            table(out, "cqs-" + i, List.of("cqe"), cqs);
            i++;
        }
        if (!m.maps().isEmpty()) {
            out.println("<h3>maps</h3><pre id='maps'>" + esc(String.join("\n", m.maps())) + "</pre>");
        }
    }
}

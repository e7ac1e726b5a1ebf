package org.peerdirect.webconsole;

import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;

import org.apache.felix.webconsole.servlet.ServletConstants;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
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

    record Model(List<List<String>> rows, List<String> maps) {
    }

    @Override
    Object load(String sub) {
        List<AddressSpace> list;
        List<String> maps = List.of();
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
            maps = as.maps();
        }
        List<List<String>> rows = new ArrayList<>();
        for (AddressSpace as : list) {
            rows.add(List.of(link(sub.isEmpty() ? LABEL + "/" + as.pid() : Integer.toString(as.pid()), Integer.toString(as.pid())), as.name(),
                    Long.toString(as.rssPages() * 4), Long.toString(as.swappedPages() * 4), Long.toString(as.pinnedPages() * 4),
                    Long.toString(as.faultCount())));
        }
        return new Model(rows, maps);
    }

    @Override
    void render(Object model, String sub, PrintWriter out) {
        Model m = (Model) model;
        heading(out, m.rows().size() + " process(es), as kernel:ps shows them");
        table(out, "processes", List.of("PID", "NAME", "RSS(kB)", "SWAP(kB)", "PINNED(kB)", "FAULTS"), m.rows());
        if (!m.maps().isEmpty()) {
            out.println("<h3>maps</h3><pre id='maps'>" + esc(String.join("\n", m.maps())) + "</pre>");
        }
    }
}

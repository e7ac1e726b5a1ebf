package org.peerdirect.webconsole;

import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;

import org.apache.felix.webconsole.servlet.ServletConstants;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.peerdirect.kernel.iommu.IommuDomain;

import jakarta.servlet.Servlet;

/** IOMMU domains and the audit line, as {@code kernel:iommu} prints them. */
@Component(service = Servlet.class, property = {ServletConstants.PLUGIN_LABEL + "=" + IommuPage.LABEL,
        ServletConstants.PLUGIN_TITLE + "=IOMMU", ServletConstants.PLUGIN_CATEGORY + "=" + Page.CATEGORY})
public final class IommuPage extends Page {

    private static final long serialVersionUID = 1L;
    static final String LABEL = "pdiommu";

    private final transient ConsoleData data;

    @Activate
    public IommuPage(@Reference ConsoleData data) {
        this.data = data;
    }

    record Model(List<List<String>> rows, String audit) {
    }

    @Override
    Object load(String sub) {
        if (!sub.isEmpty()) {
            throw new ConsoleData.Gone("no page " + sub + " below " + LABEL);
        }
        List<List<String>> rows = new ArrayList<>();
        for (IommuDomain d : data.domains()) {
            rows.add(List.of(d.name(), Long.toString(d.mappedPages()), Long.toString(d.mappedSuperpages()), Long.toString(d.faultCount()),
                    Long.toString(d.bytesRead()), Long.toString(d.bytesWritten()), Long.toString(d.useAfterFreeCount())));
        }
        return new Model(rows, data.auditLine());
    }

    @Override
    void render(Object model, String sub, PrintWriter out) {
        Model m = (Model) model;
        heading(out, m.rows().size() + " IOMMU domain(s), as kernel:iommu shows them");
        table(out, "domains", List.of("domain", "mapped", "2M", "faults", "dma_read", "dma_written", "uaf"), m.rows());
        out.println("<p id='audit'><code>" + esc(m.audit()) + "</code></p>");
    }
}

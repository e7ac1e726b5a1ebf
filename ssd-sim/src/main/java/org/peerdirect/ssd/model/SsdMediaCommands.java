package org.peerdirect.ssd.model;

import org.apache.felix.service.command.Descriptor;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;

/**
 * {@code ssd:media}: the lab's view of the SSD models, what no driver can read through the
 * registers: each media file and how many pages written to the PMR are still only posted (in the
 * controller's volatile buffer, lost if the process dies now). The driver's view is
 * {@code ssd:info} ({@code nvme}'s bundle).
 */
@Component(service = SsdMediaCommands.class, property = {"osgi.command.scope=ssd", "osgi.command.function=media"})
public final class SsdMediaCommands {

    private final SsdModel models;

    @Activate
    public SsdMediaCommands(@Reference SsdModel models) {
        this.models = models;
    }

    @Descriptor("the SSD models' media: file, pages posted and not yet persistent (a power loss loses them), barriers run, the controller's counters. Example: ssd:media")
    public String media() {
        var all = models.media();
        if (all.isEmpty()) {
            return "no SSD model (Configuration Admin: org.peerdirect.ssd ssds)\n";
        }
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < all.size(); i++) {
            SsdModel.Media m = all.get(i);
            sb.append(String.format("SSD %d  %s  PMR %d MiB  media %s%n", i, m.bdf(), m.pmrBytes() >> 20, m.file()));
            sb.append(String.format("  posted         %d page(s) written and not yet persistent (ssd:flush, rdma:put --flush)%n", m.postedPages()));
            sb.append(String.format("  barriers       %d since power-on%n", m.barriers()));
            NvmeSsd.ControllerCounters c = m.controller();
            sb.append(String.format("  controller     %d admin command(s), %d register write(s) without effect, %d invalid doorbell(s), %d fatal error(s)%s%n",
                    c.commands(), c.ignoredWrites(), c.invalidDoorbells(), c.fatalErrors(), c.fatalErrors() == 0 ? "" : " (last: " + c.lastFatal() + ")"));
        }
        return sb.toString();
    }
}

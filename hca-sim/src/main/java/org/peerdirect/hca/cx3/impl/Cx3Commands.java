package org.peerdirect.hca.cx3.impl;

import java.util.ArrayList;
import java.util.List;

import org.apache.felix.service.command.Descriptor;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;

/**
 * The bench-side view of the ConnectX-3 models ({@code hca:cx3}), what a lab engineer has that a
 * driver does not: each model's firmware state, lent memory, EQs, and what its queues saw of the
 * driver's descriptors (CQEs written, send WQEs fetched by DMA and of those carried by BlueFlame,
 * malformed WQEs, receive WQEs fetched). The driver's own view is {@code mlx4:cmdlog} and
 * {@code mlx4:pages}; this command is not part of the driver.
 */
@Component(service = Cx3Commands.class, property = { "osgi.command.scope=hca", "osgi.command.function=cx3" })
public final class Cx3Commands {

    private final ConnectX3Model model;

    @Activate
    public Cx3Commands(@Reference ConnectX3Model model) {
        this.model = model;
    }

    @Descriptor("the ConnectX-3 models on the PCI bus, as their firmware sees itself (commands, EQs, CQEs written, WQEs fetched "
            + "by DMA and by BlueFlame). Example: hca:cx3")
    public String cx3() {
        List<String> lines = new ArrayList<>();
        model.boards().forEach((bdf, b) -> lines.add(bdf + "  " + b.describe()));
        return lines.isEmpty() ? "no ConnectX-3 model" : String.join("\n", lines);
    }
}

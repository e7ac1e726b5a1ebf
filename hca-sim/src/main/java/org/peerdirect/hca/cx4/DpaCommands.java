package org.peerdirect.hca.cx4;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.felix.service.command.Descriptor;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;

/**
 * The bench-side view of the BlueField-3 DPAs: {@code dpa:caps} (the DPA capability block each
 * BlueField-3 reports, {@code dpa_capabilities}), {@code dpa:ps} (the EUs in use, the processes
 * and their threads) and {@code dpa:threads} (each thread's bound CQs armed or not), as the model
 * sees them.
 */
@Component(service = DpaCommands.class, property = { "osgi.command.scope=dpa", "osgi.command.function=caps",
        "osgi.command.function=ps", "osgi.command.function=threads" })
public final class DpaCommands {

    private final ConnectX4Model model;

    @Activate
    public DpaCommands(@Reference ConnectX4Model model) {
        this.model = model;
    }

    @Descriptor("the DPA capability block of every BlueField-3 model (dpa_capabilities). Example: dpa:caps")
    public String caps() {
        return each(ConnectX4Device::dpaCaps);
    }

    @Descriptor("the EUs in use, the DPA processes and their threads of every BlueField-3 model. Example: dpa:ps")
    public String ps() {
        return each(ConnectX4Device::dpaDescribe);
    }

    @Descriptor("every DPA thread of every BlueField-3 model, with each CQ bound to it armed or not (its producer and consumer "
            + "index): a thread waiting on a CQ that is not armed will not run again. Example: dpa:threads")
    public String threads() {
        return each(ConnectX4Device::dpaThreads);
    }

    private String each(java.util.function.Function<ConnectX4Device, List<String>> what) {
        List<String> lines = new ArrayList<>();
        for (Map.Entry<String, ConnectX4Device> e : model.devices().entrySet()) {
            if (e.getValue().hasDpa()) {
                lines.add(e.getKey() + "  BlueField-3 DPA");
                what.apply(e.getValue()).forEach(l -> lines.add("  " + l));
            }
        }
        return lines.isEmpty() ? "no BlueField-3 model (ConnectX4Model's bluefield3 count is 0)" : String.join("\n", lines);
    }
}

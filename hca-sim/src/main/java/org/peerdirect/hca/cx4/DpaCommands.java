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
 * and their threads), {@code dpa:threads} (each thread's state, EU, activations, triggers latched
 * and bound CQs armed or not), {@code dpa:eus} (as {@code dpaeumgmt} lists EUs), {@code dpa:mm}
 * (the memory model's findings per process) and {@code dpa:crash} (each ended process's status,
 * failing thread and line), as the model sees them.
 */
@Component(service = DpaCommands.class, property = { "osgi.command.scope=dpa", "osgi.command.function=caps",
        "osgi.command.function=ps", "osgi.command.function=threads", "osgi.command.function=eus", "osgi.command.function=mm",
        "osgi.command.function=crash" })
public final class DpaCommands {

    private final java.util.function.Supplier<Map<String, ConnectX4Device>> devices;

    @Activate
    public DpaCommands(@Reference ConnectX4Model model) {
        this(model::devices);
    }

    /** Over the devices {@code devices} gives by name (tests). */
    DpaCommands(java.util.function.Supplier<Map<String, ConnectX4Device>> devices) {
        this.devices = devices;
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
            + "index): a thread waiting on a CQ that is not armed will not run again; the objects a device-library call of it is "
            + "inside (C8) and its memory-model findings per check. Example: dpa:threads")
    public String threads() {
        return each(ConnectX4Device::dpaThreads);
    }

    @Descriptor("every EU of every BlueField-3 model's DPA as dpaeumgmt lists them: id, partition, groups, state (reserved for the "
            + "DPA OS, busy, free), activations and the thread it runs. Example: dpa:eus")
    public String eus() {
        return each(ConnectX4Device::dpaEus);
    }

    @Descriptor("the DPA memory model's findings (C1..C8) per process, each with the handler line it names. Example: dpa:mm")
    public String mm() {
        return each(ConnectX4Device::dpaFindings);
    }

    @Descriptor("every DPA process that ended with an error: dpa_process_status, the thread whose error ended it, its last handler "
            + "line and the crash text (flexio_err_status_get, flexio_crash_data). Example: dpa:crash")
    public String crash() {
        return each(ConnectX4Device::dpaCrashes);
    }

    private String each(java.util.function.Function<ConnectX4Device, List<String>> what) {
        List<String> lines = new ArrayList<>();
        for (Map.Entry<String, ConnectX4Device> e : devices.get().entrySet()) {
            if (e.getValue().hasDpa()) {
                lines.add(e.getKey() + "  BlueField-3 DPA");
                what.apply(e.getValue()).forEach(l -> lines.add("  " + l));
            }
        }
        return lines.isEmpty() ? "no BlueField-3 model (ConnectX4Model's bluefield3 count is 0)" : String.join("\n", lines);
    }
}

package org.peerdirect.hca.cx4;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.felix.service.command.Descriptor;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.peerdirect.kernel.shell.Args;
import org.peerdirect.kernel.shell.UsageException;

/**
 * The bench-side view of the ConnectX-4+ models, what a lab engineer has that a driver does not:
 * {@code hca:cx4} (each model's firmware state as the model sees it), {@code hca:fw_fault}
 * (make a firmware hang or report a fatal error, to watch the driver's health poll find it); the
 * link switch of every HCA model is {@code hca:link} ({@code HcaLinkCommands}). The driver's own
 * view is {@code mlx5:health}; this command is not part of the driver.
 */
@Component(service = Cx4Commands.class, property = { "osgi.command.scope=hca", "osgi.command.function=cx4",
        "osgi.command.function=fw_fault" })
public final class Cx4Commands {

    private final ConnectX4Model model;

    @Activate
    public Cx4Commands(@Reference ConnectX4Model model) {
        this.model = model;
    }

    @Descriptor("the ConnectX-4+ models on the PCI bus, as their firmware sees itself. Example: hca:cx4")
    public String cx4() {
        List<String> lines = new ArrayList<>();
        model.devices().forEach((bdf, d) -> lines.add(bdf + "  " + d.describe()));
        return lines.isEmpty() ? "no ConnectX-4+ model" : String.join("\n", lines);
    }

    @Descriptor("make a model's firmware hang (commands stop, the health counter stands still) or report a fatal error "
            + "(a health syndrome, 1..255). Only a hot-plug recovers the device (restart org.peerdirect.hca-sim). "
            + "Example: hca:fw_fault 0000:07:00.0 fatal 1")
    public String fw_fault(@Descriptor("the function (hca:cx4 lists them)") String bdf, @Descriptor("hang | fatal") String kind,
            @Descriptor("[syndrome for fatal, default 1]") String... syndrome) {
        ConnectX4Device d = device("hca:fw_fault", bdf);
        String k = Args.oneOf("hca:fw_fault", "the fault", kind, "hang", "fatal");
        if (k.equals("hang")) {
            if (syndrome.length > 0) {
                throw new UsageException("hca:fw_fault: a hang takes no syndrome");
            }
            d.hang();
            return bdf + ": firmware hung; the driver's health poll will find the counter stuck";
        }
        if (syndrome.length > 1) {
            throw new UsageException("hca:fw_fault: one syndrome at most");
        }
        int synd = syndrome.length == 0 ? 1 : (int) Args.integer("hca:fw_fault", "syndrome", syndrome[0], 1, 255);
        d.fatal(synd);
        return String.format("%s: firmware reports fatal error, health syndrome 0x%x", bdf, synd);
    }

    /** The model at {@code bdf}, or a usage error of {@code command} listing the ones there are. */
    private ConnectX4Device device(String command, String bdf) {
        Map<String, ConnectX4Device> devs = model.devices();
        ConnectX4Device d = devs.get(bdf);
        if (d == null) {
            throw new UsageException(command + ": no ConnectX-4+ model at '" + bdf + "' (there are: " + devs.keySet() + ")");
        }
        return d;
    }
}

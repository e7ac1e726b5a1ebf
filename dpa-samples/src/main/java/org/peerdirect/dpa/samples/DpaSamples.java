package org.peerdirect.dpa.samples;

import org.apache.felix.service.command.CommandSession;
import org.apache.felix.service.command.Descriptor;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.peerdirect.ib.core.verbs.IbvDeviceList;
import org.peerdirect.kernel.mm.Mm;

/**
 * The {@code dpa:sample} Gogo command: FlexIO's samples and DOCA DPA's kernel launch and initiator/target samples, each a program in a simulated process of
 * its own ({@link Samples}). The fence sample's finding is the model's checker's, which user space
 * cannot read (a real DPA has no such checker): the sample asks the bench for it the way a user
 * would, by running {@code dpa:mm} in the caller's shell session, and prints the lines of its process.
 */
@Component(service = DpaSamples.class, property = {"osgi.command.scope=dpa", "osgi.command.function=sample"})
public final class DpaSamples {

    private final IbvDeviceList devices;
    private final Mm mm;
    /** DOCA's device list's PCI addresses: the drivers' {@code pci.bdf} service properties. */
    private final java.util.function.Function<org.peerdirect.ib.core.verbs.IbvDevice, String> pciAddrOf;

    @Activate
    public DpaSamples(@Reference IbvDeviceList devices, @Reference Mm mm, org.osgi.framework.BundleContext ctx) {
        this.devices = devices;
        this.mm = mm;
        this.pciAddrOf = org.peerdirect.doca.dev.DocaDevinfo.pciAddrOfServices(ctx);
    }

    @Descriptor("FlexIO's and DOCA DPA's samples on a BlueField-3's DPA: rpc, echo, fence, kernel_launch, initiator_target, ping_pong, nvqual, nvqual_fence; alone it lists them. Example: dpa:sample echo -d mlx5_2 -n 8")
    public String sample(CommandSession session, @Descriptor("NAME [-d DEVICE] [-n MESSAGES] [-w MS] [-e EU,...]") Object... args) {
        return Samples.run(devices, pciAddrOf, mm, id -> findingsOf(session, id), args);
    }

    /** {@code dpa:mm}'s lines for process {@code id}: its header and the findings indented under it. */
    private static String findingsOf(CommandSession session, int id) {
        Object all;
        try {
            all = session.execute("dpa:mm");
        } catch (Exception e) {
            return "dpa:mm failed: " + e.getMessage();
        }
        return processLines(String.valueOf(all), id);
    }

    static String processLines(String mm, int id) {
        StringBuilder b = new StringBuilder();
        int indent = -1;
        for (String l : mm.split("\n")) {
            int in = l.length() - l.stripLeading().length();
            if (indent < 0 && l.strip().startsWith("process " + id + ":")) {
                indent = in;
                b.append(l.strip()).append('\n');
            } else if (indent >= 0) {
                if (in <= indent) {
                    break;
                }
                b.append(l.strip()).append('\n');
            }
        }
        return b.isEmpty() ? "no finding of process " + id + " in dpa:mm:\n" + mm : b.toString().strip();
    }
}

package org.peerdirect.hca.lab;

import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

import org.apache.felix.service.command.Descriptor;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.peerdirect.hca.cx3.impl.ConnectX3Model;
import org.peerdirect.hca.cx4.ConnectX4Model;
import org.peerdirect.hca.boards.SiliconView;
import org.peerdirect.kernel.shell.Args;
import org.peerdirect.kernel.shell.UsageException;

/**
 * {@code hca:link}: the lab's cable, for every HCA model on the bus, ConnectX-3 and ConnectX-4+
 * alike: a port's link goes down or comes up, as a pulled cable or a switch port does. Traffic
 * over a down port ends in {@code RETRY_EXC_ERR}; each model's firmware reports the change its
 * own way (the ConnectX-4+ a {@code PORT_CHANGE} EQE on its async EQ, the ConnectX-3 its port
 * event), and both drivers dispatch {@code IBV_EVENT_PORT_ERR} / {@code PORT_ACTIVE}. Not part of
 * any driver: a driver cannot pull its own cable.
 */
@Component(service = HcaLinkCommands.class, property = {"osgi.command.scope=hca", "osgi.command.function=link"})
public final class HcaLinkCommands {

    private final ConnectX4Model cx4;
    private final ConnectX3Model cx3;

    @Activate
    public HcaLinkCommands(@Reference ConnectX4Model cx4, @Reference ConnectX3Model cx3) {
        this.cx4 = cx4;
        this.cx3 = cx3;
    }

    /** Each model's port-1 link switch by bus address: the ConnectX-4+ through its firmware, a ConnectX-3 once its driver brought the engine up. */
    private Map<String, Consumer<Boolean>> switches() {
        Map<String, Consumer<Boolean>> m = new TreeMap<>();
        cx4.devices().forEach((bdf, d) -> m.put(bdf, up -> d.setLink(1, up)));
        cx3.boards().forEach((bdf, b) -> m.put(bdf, up -> {
            SiliconView e = b.siliconIfUp();
            if (e == null) {
                throw new UsageException("hca:link: the ConnectX-3 at " + bdf + " has no engine yet (no driver ran INIT_HCA on it: is mlx4-provider started?)");
            }
            e.setPortActive(1, up);
        }));
        return m;
    }

    @Descriptor("take an HCA model's port link down or bring it up (a pulled cable, a switch port): traffic over it ends in "
            + "RETRY_EXC_ERR and users see IBV_EVENT_PORT_ERR / PORT_ACTIVE. ConnectX-3 and ConnectX-4+ alike (kernel:lspci lists them). "
            + "Example: hca:link 0000:05:00.0 down")
    public String link(@Descriptor("the function's bus address") String bdf, @Descriptor("down | up") String state,
            @Descriptor("[--after MS: change it that many milliseconds from now, while the next command runs]") String... after) {
        Map<String, Consumer<Boolean>> all = switches();
        Consumer<Boolean> sw = all.get(bdf);
        if (sw == null) {
            throw new UsageException("hca:link: no HCA model at '" + bdf + "' (there are: " + all.keySet() + ")");
        }
        boolean up = Args.oneOf("hca:link", "the link state", state, "down", "up").equals("up");
        if (after.length == 0) {
            sw.accept(up);
            return bdf + ": port 1 link " + (up ? "up" : "down");
        }
        if (after.length != 2 || !after[0].equals("--after")) {
            throw new UsageException("hca:link: after the state only --after MS");
        }
        long ms = Args.integer("hca:link", "--after", after[1], 1, 60_000);
        CompletableFuture.delayedExecutor(ms, TimeUnit.MILLISECONDS).execute(() -> {
            try {
                sw.accept(up);
            } catch (RuntimeException e) {
                System.getLogger("org.peerdirect.hca").log(System.Logger.Level.WARNING, "hca:link " + bdf + ": " + e.getMessage());
            }
        });
        return bdf + ": port 1 link " + (up ? "up" : "down") + " in " + ms + " ms";
    }
}

package org.peerdirect.hca.lab;

import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.ConfigurationPolicy;
import org.osgi.service.component.annotations.Deactivate;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.metatype.annotations.AttributeDefinition;
import org.osgi.service.metatype.annotations.Designate;
import org.osgi.service.metatype.annotations.ObjectClassDefinition;
import org.peerdirect.hca.cx4.ConnectX4Device;
import org.peerdirect.hca.cx4.ConnectX4Model;
import org.peerdirect.hca.engine.WirePort;
import org.peerdirect.hca.wire.FaultyLink;
import org.peerdirect.hca.wire.Link;
import org.peerdirect.hca.wire.RxeCounters;
import org.peerdirect.hca.wire.RxeNet;
import org.peerdirect.hca.wire.UdpTunnelLink;
import org.peerdirect.kernel.sysfs.Sysfs;

/**
 * A port's cable as configured (factory PID {@value #PID}, one configuration per port): the
 * in-JVM fabric (the default, nothing to do) or a UDP tunnel of Ethernet frames in QEMU's
 * {@code -netdev socket,udp=} format, with the port's IPv4 address, MAC, Ethernet MTU and the
 * link's faults. The port's counters, GID and link appear in sysfs under
 * {@code bus/pci/devices/<bdf>/roce/ports/<port>/} ({@code hw_counters/<name>}, {@code gids/0},
 * {@code link}). A deleted configuration puts the port back on the fabric.
 */
@Component(service = WireLinks.class, immediate = true, configurationPid = WireLinks.PID, configurationPolicy = ConfigurationPolicy.REQUIRE)
@Designate(ocd = WireLinks.Config.class, factory = true)
public final class WireLinks {

    public static final String PID = "org.peerdirect.hca.wire.link";

    @ObjectClassDefinition(name = "RoCEv2 wire of a port",
            description = "Puts an Ethernet HCA port (ConnectX-6 Dx) on a real link: a UDP tunnel carrying one Ethernet frame per datagram "
                    + "(QEMU's -netdev socket,udp= format), with its own IPv4 address and MAC; or leaves it on the in-JVM fabric.")
    @interface Config {
        @AttributeDefinition(description = "the HCA function's bus address, as kernel:lspci shows it")
        String device();

        @AttributeDefinition(min = "1", max = "2", description = "the port number")
        int port() default 1;

        @AttributeDefinition(options = {@org.osgi.service.metatype.annotations.Option(value = "fabric"),
                @org.osgi.service.metatype.annotations.Option(value = "udp")}, description = "fabric (in-JVM) or udp (a tunnel of Ethernet frames)")
        String link() default "fabric";

        @AttributeDefinition(description = "host:port the tunnel's socket binds")
        String local() default "127.0.0.1:7000";

        @AttributeDefinition(description = "host:port frames are sent to (QEMU's localaddr=, or the other container's local)")
        String remote() default "127.0.0.1:7001";

        @AttributeDefinition(description = "the port's IPv4 address; its GID is ::ffff:<ip>")
        String ip() default "10.99.0.1";

        @AttributeDefinition(min = "1", max = "32", description = "netmask length")
        int prefix() default 24;

        @AttributeDefinition(required = false, description = "the port's MAC aa:bb:cc:dd:ee:ff (default 02:00: and the 4 bytes of ip)")
        String mac() default "";

        @AttributeDefinition(min = "576", max = "9000", description = "the Ethernet MTU (1500 gives active_mtu 1024, as rxe)")
        int mtu() default 1500;

        @AttributeDefinition(min = "0", max = "1", description = "probability a sent frame is dropped")
        double drop() default 0;

        @AttributeDefinition(min = "0", max = "1", description = "probability a sent frame is sent twice")
        double duplicate() default 0;

        @AttributeDefinition(min = "0", max = "1", description = "probability a sent frame is overtaken by the next")
        double reorder() default 0;

        @AttributeDefinition(min = "0", max = "1", description = "probability a sent frame has a bit flipped (the receiver's ICRC check drops it)")
        double corrupt() default 0;

        @AttributeDefinition(name = "delay.ms", min = "0", max = "60000", description = "each sent frame leaves that many milliseconds late")
        long delay_ms() default 0;

        @AttributeDefinition(description = "the fault RNG's seed")
        long seed() default 1;
    }

    private final ConnectX4Device dev;
    private final int port;
    private final Sysfs sysfs;
    private final String dir;
    private final WirePort wire;

    @Activate
    public WireLinks(@Reference ConnectX4Model cx4, @Reference Sysfs sysfs, Config c) {
        this.sysfs = sysfs;
        this.dev = cx4.devices().get(c.device());
        if (dev == null) {
            throw new IllegalArgumentException(PID + ": no ConnectX-4+ model at '" + c.device() + "' (there are: " + cx4.devices().keySet() + ")");
        }
        this.port = c.port();
        this.dir = "bus/pci/devices/" + c.device() + "/roce/ports/" + port;
        String kind = c.link() == null ? "fabric" : c.link().trim();
        if (kind.equals("fabric")) {
            wire = null;
            sysfs.attribute(dir + "/link", () -> "fabric");
            return;
        }
        if (!kind.equals("udp")) {
            throw new IllegalArgumentException(PID + ": link '" + kind + "' is not fabric or udp");
        }
        int ip = RxeNet.parseIp(c.ip());
        long mac = c.mac() == null || c.mac().isBlank() ? 0x0200_0000_0000L | ip & 0xFFFF_FFFFL : RxeNet.parseMac(c.mac());
        FaultyLink.Faults f = new FaultyLink.Faults(c.drop(), c.duplicate(), c.reorder(), c.corrupt(), c.delay_ms(), c.seed());
        Link link = new UdpTunnelLink(c.device() + "/" + port, UdpTunnelLink.address("local", c.local()),
                UdpTunnelLink.address("remote", c.remote()));
        if (f.any()) {
            link = new FaultyLink(link, f);
        }
        try {
            wire = dev.attachWire(port, link, ip, mac, c.mtu());
        } catch (RuntimeException e) {
            link.close();
            throw e;
        }
        WirePort w = wire;
        sysfs.attribute(dir + "/link", w::describe);
        sysfs.attribute(dir + "/gids/0", () -> org.peerdirect.hca.lab.WireCommands.gid(w.gid(1)));
        for (String name : RxeCounters.NAMES) {
            int i = RxeCounters.index(name);
            sysfs.attribute(dir + "/hw_counters/" + name, () -> Long.toString(w.counters().get(i)));
        }
    }

    @Deactivate
    void deactivate() {
        sysfs.remove(dir);
        if (wire != null) {
            dev.detachWire(port);
        }
    }
}

package org.peerdirect.ib.core.impl;

import java.util.concurrent.atomic.AtomicReferenceArray;

import org.peerdirect.ib.core.provider.IbDeviceOps;
import org.peerdirect.ib.core.verbs.IbvDeviceAttr;
import org.peerdirect.ib.core.verbs.IbvEventType;
import org.peerdirect.ib.core.verbs.IbvPortAttr;
import org.peerdirect.kernel.sysfs.Sysfs;

/**
 * A registered device's attributes under {@code /sys/class/infiniband/<dev>/}, as
 * {@code drivers/infiniband/core/sysfs.c} makes them ({@code ib_setup_device_attrs},
 * {@code ib_setup_port_attrs}): {@code fw_ver}, {@code hca_type}, {@code board_id},
 * {@code node_guid}, and per port {@code state}, {@code phys_state}, {@code rate},
 * {@code link_layer}, {@code lid}, with the {@code counters} and {@code hw_counters} folders
 * (empty: the models keep no port counters, and a counter that is always 0 would be a wrong
 * answer). What node_exporter's infiniband collector reads, so it reports these ports.
 *
 * <p>The real {@code state_show} queries the port on each read; here the mirror reads every
 * attribute a few times a second, so a port's attributes are queried once at registration and
 * its state then follows the driver's port events ({@code ib_cache_update} does the same for
 * the cached port state): PORT_ACTIVE and PORT_ERR. Each show is a plain read.
 */
final class IbSysfs {

    static final String CLASS = "class/infiniband";

    private final Sysfs sysfs;
    private final String dir;
    /** Each port's attributes, index port - 1; replaced whole by a port event. */
    private final AtomicReferenceArray<IbvPortAttr> ports;

    IbSysfs(Sysfs sysfs, IbDeviceOps ops, IbvDeviceAttr attr) {
        this.sysfs = sysfs;
        this.dir = CLASS + "/" + ops.name();
        this.ports = new AtomicReferenceArray<>(attr.physPortCnt());
        sysfs.attribute(dir + "/fw_ver", attr::fwVer);
        sysfs.attribute(dir + "/hca_type", () -> "MT" + attr.vendorPartId());
        sysfs.attribute(dir + "/board_id", () -> String.format("MT_%08X", attr.vendorPartId()));
        sysfs.attribute(dir + "/node_guid", () -> guid(attr.nodeGuid()));
        for (int p = 1; p <= attr.physPortCnt(); p++) {
            int i = p - 1;
            ports.set(i, ops.queryPort(p));
            String pd = dir + "/ports/" + p;
            sysfs.attribute(pd + "/state", () -> stateShow(ports.get(i).state()));
            sysfs.attribute(pd + "/phys_state", () -> physStateShow(ports.get(i).physState()));
            sysfs.attribute(pd + "/rate", () -> rateShow(ports.get(i)));
            sysfs.attribute(pd + "/link_layer", () -> ports.get(i).linkLayer() == IbvPortAttr.LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand");
            sysfs.attribute(pd + "/lid", () -> String.format("0x%x", ports.get(i).lid()));
            sysfs.mkdir(pd + "/counters");
            sysfs.mkdir(pd + "/hw_counters");
        }
    }

    /** PORT_ACTIVE / PORT_ERR: the port's state as the event says (the event thread must not query the device). */
    void portEvent(int port, IbvEventType type) {
        if (port < 1 || port > ports.length()) {
            return;
        }
        IbvPortAttr a = ports.get(port - 1);
        int state = type == IbvEventType.PORT_ACTIVE ? IbvPortAttr.PORT_ACTIVE : type == IbvEventType.PORT_ERR ? IbvPortAttr.PORT_DOWN : a.state();
        int phys = state == IbvPortAttr.PORT_ACTIVE ? 5 : 3;
        ports.set(port - 1, new IbvPortAttr(state, a.maxMtu(), a.activeMtu(), a.gidTblLen(), a.portCapFlags(), a.maxMsgSz(),
                a.pkeyTblLen(), a.lid(), a.smLid(), a.lmc(), a.maxVlNum(), a.smSl(), a.activeWidth(), a.activeSpeed(), phys,
                a.linkLayer()));
    }

    /** The attributes this made; the device folder goes with its last entry (a driver's own, like odp/, stay its). */
    void remove() {
        for (String n : new String[] {"fw_ver", "hca_type", "board_id", "node_guid", "ports"}) {
            if (sysfs.exists(dir + "/" + n)) {
                sysfs.remove(dir + "/" + n);
            }
        }
        if (sysfs.isDirectory(dir) && sysfs.list(dir).isEmpty()) {
            sysfs.remove(dir);
        }
    }

    /** {@code state_show}: "4: ACTIVE". */
    static String stateShow(int s) {
        String[] names = {"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"};
        return s + ": " + (s >= 0 && s < names.length ? names[s] : "UNKNOWN");
    }

    /** {@code phys_state_show} ({@code phys_state_to_str}): "5: LinkUp". */
    static String physStateShow(int s) {
        String[] names = {"<unknown>", "Sleep", "Polling", "Disabled", "PortConfigurationTraining", "LinkUp", "LinkErrorRecovery", "Phy Test"};
        return s + ": " + (s >= 0 && s < names.length ? names[s] : "<unknown>");
    }

    /** {@code rate_show}: "56 Gb/sec (4X FDR)" from the active width and speed codes. */
    static String rateShow(IbvPortAttr a) {
        int lanes = switch (a.activeWidth()) {
            case 1 -> 1;
            case 2 -> 4;
            case 4 -> 8;
            case 8 -> 12;
            case 16 -> 2;
            default -> 0;
        };
        // tenths of Gb/s per lane, and the speed's name, as ib_speed_enum_to_int / rate_show
        int tenths;
        String speed;
        switch (a.activeSpeed()) {
            case 2 -> { tenths = 50; speed = " DDR"; }
            case 4 -> { tenths = 100; speed = " QDR"; }
            case 8 -> { tenths = 100; speed = " FDR10"; }
            case 16 -> { tenths = 140; speed = " FDR"; }
            case 32 -> { tenths = 250; speed = " EDR"; }
            case 64 -> { tenths = 500; speed = " HDR"; }
            case 128 -> { tenths = 1000; speed = " NDR"; }
            default -> { tenths = 25; speed = ""; }
        }
        int rate = tenths * lanes;
        return String.format("%d%s Gb/sec (%dX%s)", rate / 10, rate % 10 != 0 ? ".5" : "", lanes, speed);
    }

    private static String guid(long g) {
        return String.format("%04x:%04x:%04x:%04x", (g >>> 48) & 0xffff, (g >>> 32) & 0xffff, (g >>> 16) & 0xffff, g & 0xffff);
    }
}

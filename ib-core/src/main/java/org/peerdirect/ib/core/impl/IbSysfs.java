package org.peerdirect.ib.core.impl;

import java.util.Map;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.function.IntFunction;

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
 * {@code link_layer}, {@code lid}, with the {@code counters} folder (the PMA counters, by the
 * driver's {@link IbDeviceOps#queryPmaCounters}) and the {@code hw_counters} folder (the driver's
 * own, {@link IbDeviceOps#getHwStats}); a driver without counters leaves them empty. What
 * node_exporter's infiniband collector reads, so it reports these ports and their traffic.
 *
 * <p>The real {@code state_show} queries the port on each read; here the mirror reads every
 * attribute a few times a second, so a port's attributes are queried once at registration and
 * its state then follows the driver's port events ({@code ib_cache_update} does the same for
 * the cached port state): PORT_ACTIVE and PORT_ERR. Each of these shows is a plain read. A
 * counter's show asks the driver (a firmware command) when its last answer is older than the
 * lifespan, and only when someone reads it: the counter files are
 * {@link Sysfs#attributeOnDemand on-demand attributes}, which the mirror's periodic refresh does
 * not show, so an idle tree sends the device no counter command.
 */
public final class IbSysfs {

    static final String CLASS = "class/infiniband";

    private final Sysfs sysfs;
    private final IbDeviceOps ops;
    /**
     * How long a driver's counter answer serves reads: the kernel's default hw_stats lifespan
     * ({@code RDMA_HW_STATS_DEFAULT_LIFESPAN}, 10 ms), so a reader of every file of a folder (a
     * {@code grep . *}, node_exporter) costs one command per folder, and a later read a fresh one.
     */
    public static final long LIFESPAN_NANOS = 10_000_000L;
    private final long lifespanNanos;
    private final String dir;
    /** Each port's attributes, index port - 1; replaced whole by a port event. */
    private final AtomicReferenceArray<IbvPortAttr> ports;

    /** As the OSGi core has it: counters fresh for {@link #LIFESPAN_NANOS}. */
    public IbSysfs(Sysfs sysfs, IbDeviceOps ops, IbvDeviceAttr attr) {
        this(sysfs, ops, attr, LIFESPAN_NANOS);
    }

    /**
     * The device's attributes under {@code class/infiniband/<dev>/}; its counters are asked of the
     * driver again once the last answer is {@code lifespanNanos} old (0: on every read).
     */
    public IbSysfs(Sysfs sysfs, IbDeviceOps ops, IbvDeviceAttr attr, long lifespanNanos) {
        this.sysfs = sysfs;
        this.ops = ops;
        this.lifespanNanos = lifespanNanos;
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
            counters(pd + "/counters", p, ops::queryPmaCounters);
            counters(pd + "/hw_counters", p, ops::getHwStats);
        }
    }

    /**
     * One file per counter the driver has for port {@code p} (the names it answers at
     * registration), read from the driver's answer of at most {@link #lifespanNanos} ago:
     * {@code hw_stat_port_show} asks {@code get_hw_stats} only when its {@code rdma_hw_stats} are
     * older than their {@code lifespan}, so that a reader of every file costs the device one
     * command per folder, not one per file; nobody reading costs nothing. A driver
     * that keeps no counters leaves the folder empty rather than showing zeros it never counted.
     */
    private void counters(String folder, int p, IntFunction<Map<String, Long>> query) {
        sysfs.mkdir(folder);
        Fresh fresh = new Fresh(() -> query.apply(p), lifespanNanos);
        for (String name : fresh.get().keySet()) {
            sysfs.attributeOnDemand(folder + "/" + name, () -> {
                Long v = fresh.get().get(name);
                if (v == null) {
                    throw new IllegalStateException(ops.name() + ": counter " + name + " of port " + p + " is no longer reported by the driver");
                }
                return Long.toUnsignedString(v);
            });
        }
    }

    /**
     * A driver's counter answer and when it was taken ({@code rdma_hw_stats.timestamp}): a new
     * one once it is older than the lifespan. Readers may race to refresh; each gets a whole answer.
     */
    private static final class Fresh {
        private record Taken(Map<String, Long> values, long at) {
        }

        private final java.util.function.Supplier<Map<String, Long>> query;
        private final long lifespanNanos;
        private volatile Taken last;

        Fresh(java.util.function.Supplier<Map<String, Long>> query, long lifespanNanos) {
            this.query = query;
            this.lifespanNanos = lifespanNanos;
        }

        Map<String, Long> get() {
            Taken t = last;
            long now = System.nanoTime();
            if (t == null || now - t.at() >= lifespanNanos) {
                t = new Taken(query.get(), now);
                last = t;
            }
            return t.values();
        }
    }

    /** PORT_ACTIVE / PORT_ERR: the port's state as the event says (the event thread must not query the device). */
    public void portEvent(int port, IbvEventType type) {
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
    public void remove() {
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

package org.peerdirect.rdma.tools;

import java.util.concurrent.TimeUnit;
import org.peerdirect.ib.core.verbs.IbvAsyncEvent;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.felix.service.command.Descriptor;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.component.annotations.ReferenceCardinality;
import org.osgi.service.component.annotations.ReferencePolicy;
import org.osgi.service.component.annotations.ReferencePolicyOption;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvCq;
import org.peerdirect.ib.core.verbs.IbvMr;
import org.peerdirect.ib.core.verbs.IbvQp;
import org.peerdirect.ib.core.verbs.IbvQpInitAttr;
import org.peerdirect.ib.core.verbs.IbvQpType;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvDeviceAttr;
import org.peerdirect.ib.core.verbs.IbvDeviceList;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.ib.core.verbs.IbvPortAttr;
import org.peerdirect.ib.core.verbs.IbvRecvWr;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvSge;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWcStatus;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.shell.UsageException;
import org.peerdirect.peermem.alloc.PeerMemoryAllocator;
import org.peerdirect.rdma.RcConnect;

/**
 * The RDMA tools as Gogo commands, mirroring libibverbs' examples and perftest:
 * {@code rdma:devices} (ibv_devices), {@code rdma:devinfo [-v] [-d dev]} (ibv_devinfo),
 * {@code rdma:pingpong} (ibv_rc_pingpong: {@code -s} size, {@code -n} iterations, {@code -e} events, {@code -c}
 * validate, {@code -d} device, {@code --mem host|<peer client>}), and {@code rdma:write_bw},
 * {@code rdma:read_bw}, {@code rdma:send_bw}, {@code rdma:write_lat} ({@code -s}, {@code -a},
 * {@code -n}, {@code -q}, {@code -d}, {@code --mem}). Each side of a test is its own simulated
 * process; the client uses {@code -d} (default the first device), the server the next device (or
 * the same one when there is only one: loopback).
 */
@Component(service = RdmaTools.class, property = {"osgi.command.scope=rdma", "osgi.command.function=devices",
        "osgi.command.function=devinfo", "osgi.command.function=pingpong", "osgi.command.function=write_bw",
        "osgi.command.function=read_bw", "osgi.command.function=send_bw", "osgi.command.function=write_lat", "osgi.command.function=atomic_bw",
        "osgi.command.function=invalidate_test", "osgi.command.function=put", "osgi.command.function=ud_pingpong", "osgi.command.function=xsrq_pingpong",
        "osgi.command.function=asyncwatch"})
public final class RdmaTools {

    /** A bounded wait for any completion: a tool never hangs. */
    static final long TIMEOUT_NS = 60_000_000_000L;

    private final IbvDeviceList devices;
    private final Mm mm;
    private final List<PeerMemoryAllocator> allocators = new CopyOnWriteArrayList<>();

    @Activate
    public RdmaTools(@Reference IbvDeviceList devices, @Reference Mm mm) {
        this.devices = devices;
        this.mm = mm;
    }

    @Reference(cardinality = ReferenceCardinality.MULTIPLE, policy = ReferencePolicy.DYNAMIC,
            policyOption = ReferencePolicyOption.GREEDY, unbind = "removeAllocator")
    void addAllocator(PeerMemoryAllocator a) {
        allocators.add(a);
    }

    /** Outside OSGi (tests): offer a peer device's memory to --mem. */
    public void addAllocatorForTests(PeerMemoryAllocator a) {
        allocators.add(a);
    }

    void removeAllocator(PeerMemoryAllocator a) {
        allocators.remove(a);
    }

    /** The machine's IOMMU, when there is one: the tools report the bytes that crossed PCI BARs peer to peer. */
    private volatile org.peerdirect.kernel.iommu.Iommu iommu;

    @Reference(cardinality = ReferenceCardinality.OPTIONAL, policy = ReferencePolicy.DYNAMIC, policyOption = ReferencePolicyOption.GREEDY,
            unbind = "unsetIommu")
    void setIommu(org.peerdirect.kernel.iommu.Iommu i) {
        iommu = i;
    }

    void unsetIommu(org.peerdirect.kernel.iommu.Iommu i) {
        if (iommu == i) {
            iommu = null;
        }
    }

    /** Outside OSGi (tests): the IOMMU whose peer-to-peer counters the tools report. */
    public void setIommuForTests(org.peerdirect.kernel.iommu.Iommu i) {
        iommu = i;
    }

    /** 2 MiB entries in every IOMMU domain now, or -1 without an IOMMU. */
    long superpages() {
        org.peerdirect.kernel.iommu.Iommu i = iommu;
        return i == null ? -1 : i.domains().stream().mapToLong(org.peerdirect.kernel.iommu.IommuDomain::mappedSuperpages).sum();
    }

    /** The IOMMU's peer-to-peer byte count now, or -1 without an IOMMU. */
    private long barBytes() {
        org.peerdirect.kernel.iommu.Iommu i = iommu;
        return i == null ? -1 : i.barBytes();
    }

    // ------------------------------------------------------------------ ibv_devices / ibv_devinfo

    @Descriptor("the RDMA devices with their node GUIDs, as ibv_devices")
    public String devices() {
        StringBuilder sb = new StringBuilder("    device          \t   node GUID\n    ------          \t----------------\n");
        for (IbvDevice d : devices.devices()) {
            sb.append(String.format("    %-16s\t%016x%n", d.name(), d.nodeGuid()));
        }
        return sb.toString().stripTrailing();
    }

    @Descriptor("the RDMA devices' attributes and ports, as ibv_devinfo. Example: rdma:devinfo -v -d mlx4_0")
    public String devinfo(@Descriptor("options; --help lists them") Object... args) {
        Options o = new Options("rdma:devinfo", "the devices' attributes and ports, as ibv_devinfo", args, List.of(
                Options.value("-d", "DEVICE", "only this device (rdma:devices)", null),
                Options.value("-i", "PORT", "only this port (the models have one port)", 1),
                Options.flag("-v", "every attribute")));
        if (o.help()) {
            return o.printUsage();
        }
        o.number("-i", 1, 1);
        String only = o.string("-d");
        boolean verbose = o.flag("-v");
        StringBuilder sb = new StringBuilder();
        List<IbvDevice> list = only == null ? devices.devices() : List.of(devices.device(only));
        if (list.isEmpty()) {
            return "No IB devices found";
        }
        for (IbvDevice d : list) {
            AddressSpace p = mm.createProcess("ibv_devinfo");
            try (IbvContext c = d.open(p)) {
                IbvDeviceAttr a = c.queryDeviceEx();
                sb.append("hca_id:\t").append(d.name()).append('\n');
                sb.append("\ttransport:\t\t\tInfiniBand (0)\n");
                sb.append("\tfw_ver:\t\t\t\t").append(a.fwVer()).append('\n');
                sb.append("\tnode_guid:\t\t\t").append(guid(a.nodeGuid())).append('\n');
                sb.append("\tsys_image_guid:\t\t\t").append(guid(a.sysImageGuid())).append('\n');
                sb.append(String.format("\tvendor_id:\t\t\t0x%04x%n", a.vendorId()));
                sb.append("\tvendor_part_id:\t\t\t").append(a.vendorPartId()).append('\n');
                sb.append(String.format("\thw_ver:\t\t\t\t0x%x%n", a.hwVer()));
                sb.append("\tphys_port_cnt:\t\t\t").append(a.physPortCnt()).append('\n');
                if (verbose) {
                    sb.append(String.format("\tmax_mr_size:\t\t\t0x%x%n", a.maxMrSize()));
                    sb.append(String.format("\tpage_size_cap:\t\t\t0x%x%n", a.pageSizeCap()));
                    sb.append("\tmax_qp:\t\t\t\t").append(a.maxQp()).append('\n');
                    sb.append("\tmax_qp_wr:\t\t\t").append(a.maxQpWr()).append('\n');
                    sb.append(String.format("\tdevice_cap_flags:\t\t0x%08x%n", a.deviceCapFlags()));
                    sb.append(String.format("\tdevice_cap_flags_ex:\t\t0x%x%n", a.deviceCapFlagsEx()));
                    if ((a.deviceCapFlagsEx() & IbvDeviceAttr.DEVICE_FLUSH_GLOBAL) != 0) {
                        sb.append("\t\t\t\t\tFLUSH_GLOBAL\n");
                    }
                    if ((a.deviceCapFlagsEx() & IbvDeviceAttr.DEVICE_FLUSH_PERSISTENT) != 0) {
                        sb.append("\t\t\t\t\tFLUSH_PERSISTENT\n");
                    }
                    if ((a.deviceCapFlagsEx() & IbvDeviceAttr.DEVICE_ATOMIC_WRITE) != 0) {
                        sb.append("\t\t\t\t\tATOMIC_WRITE\n");
                    }
                    sb.append("\tmax_sge:\t\t\t").append(a.maxSge()).append('\n');
                    sb.append("\tmax_cq:\t\t\t\t").append(a.maxCq()).append('\n');
                    sb.append("\tmax_cqe:\t\t\t").append(a.maxCqe()).append('\n');
                    sb.append("\tmax_mr:\t\t\t\t").append(a.maxMr()).append('\n');
                    sb.append("\tmax_pd:\t\t\t\t").append(a.maxPd()).append('\n');
                    sb.append("\tmax_qp_rd_atom:\t\t\t").append(a.maxQpRdAtom()).append('\n');
                    sb.append("\tmax_qp_init_rd_atom:\t\t").append(a.maxQpInitRdAtom()).append('\n');
                    sb.append("\tatomic_cap:\t\t\t").append(a.atomicCap() == IbvDeviceAttr.ATOMIC_HCA ? "ATOMIC_HCA (1)" : "ATOMIC_NONE (0)")
                            .append('\n');
                    sb.append("\tmax_srq:\t\t\t").append(a.maxSrq()).append('\n');
                    sb.append("\tmax_srq_wr:\t\t\t").append(a.maxSrqWr()).append('\n');
                    sb.append("\tmax_srq_sge:\t\t\t").append(a.maxSrqSge()).append('\n');
                    IbvDeviceAttr.OdpCaps odp = a.odpCaps();
                    sb.append("\tgeneral_odp_caps:\n");
                    if (odp.generalCaps() == 0) {
                        sb.append("\t\t\t\t\tNO SUPPORT\n");
                    }
                    if ((odp.generalCaps() & IbvDeviceAttr.ODP_SUPPORT) != 0) {
                        sb.append("\t\t\t\t\tODP_SUPPORT\n");
                    }
                    if ((odp.generalCaps() & IbvDeviceAttr.ODP_SUPPORT_IMPLICIT) != 0) {
                        sb.append("\t\t\t\t\tODP_SUPPORT_IMPLICIT\n");
                    }
                    sb.append("\trc_odp_caps:\n").append(odpBits(odp.rcOdpCaps()));
                    sb.append("\tuc_odp_caps:\n").append(odpBits(odp.ucOdpCaps()));
                    sb.append("\tud_odp_caps:\n").append(odpBits(odp.udOdpCaps()));
                    sb.append("\txrc_odp_caps:\n").append(odpBits(odp.xrcOdpCaps()));
                }
                for (int port = 1; port <= a.physPortCnt(); port++) {
                    IbvPortAttr pa = c.queryPort(port);
                    sb.append("\t\tport:\t").append(port).append('\n');
                    sb.append("\t\t\tstate:\t\t\t").append(IbvPortAttr.stateName(pa.state())).append(" (").append(pa.state()).append(")\n");
                    sb.append("\t\t\tmax_mtu:\t\t").append(128 << pa.maxMtu()).append(" (").append(pa.maxMtu()).append(")\n");
                    sb.append("\t\t\tactive_mtu:\t\t").append(128 << pa.activeMtu()).append(" (").append(pa.activeMtu()).append(")\n");
                    sb.append("\t\t\tsm_lid:\t\t\t").append(pa.smLid()).append('\n');
                    sb.append("\t\t\tport_lid:\t\t").append(pa.lid()).append('\n');
                    sb.append(String.format("\t\t\tport_lmc:\t\t0x%02x%n", pa.lmc()));
                    sb.append("\t\t\tlink_layer:\t\t").append(pa.linkLayer() == IbvPortAttr.LINK_LAYER_INFINIBAND ? "InfiniBand" : "Ethernet")
                            .append('\n');
                    if (verbose) {
                        sb.append("\t\t\tmax_msg_sz:\t\t0x").append(Long.toHexString(pa.maxMsgSz())).append('\n');
                        sb.append("\t\t\tactive_width:\t\t4X (").append(pa.activeWidth()).append(")\n");
                        sb.append("\t\t\tactive_speed:\t\t14.0 Gbps (").append(pa.activeSpeed()).append(")\n");
                        sb.append("\t\t\tphys_state:\t\t").append(pa.physState() == 5 ? "LINK_UP" : "POLLING").append(" (")
                                .append(pa.physState()).append(")\n");
                        sb.append("\t\t\tGID[  0]:\t\t").append(c.queryGid(port, 0)).append('\n');
                    }
                }
                sb.append('\n');
            } finally {
                p.exit();
            }
        }
        return sb.toString().stripTrailing();
    }

    private static String odpBits(int bits) {
        String[] names = {"SUPPORT_SEND", "SUPPORT_RECV", "SUPPORT_WRITE", "SUPPORT_READ", "SUPPORT_ATOMIC", "SUPPORT_SRQ_RECV", "SUPPORT_FLUSH",
            "SUPPORT_ATOMIC_WRITE"};
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < names.length; i++) {
            if ((bits & (1 << i)) != 0) {
                sb.append("\t\t\t\t\t").append(names[i]).append('\n');
            }
        }
        return sb.length() == 0 ? "\t\t\t\t\tNO SUPPORT\n" : sb.toString();
    }

    private static String guid(long g) {
        return String.format("%04x:%04x:%04x:%04x", (g >>> 48) & 0xffff, (g >>> 32) & 0xffff, (g >>> 16) & 0xffff, g & 0xffff);
    }

    // ------------------------------------------------------------------ shared set-up

    private record Pair(IbvDevice client, IbvDevice server) {
    }

    /**
     * The client device and the server's: the next device in the list whose port 1 has the same
     * link layer (an InfiniBand port and an Ethernet port are on two networks, as two real hosts
     * would be cabled), or the client device itself (loopback) when there is no other.
     */
    private Pair pair(Options o) {
        return pair(o, 0);
    }

    /**
     * The client device and a server: the next device with the same link layer that reports every
     * {@code device_cap_flags_ex} bit of {@code needCaps}, or the client itself (loopback).
     */
    private Pair pair(Options o, long needCaps) {
        return pair(o, needCaps, 0);
    }

    /** {@link #pair(Options, long)}, the server also reporting every {@code device_cap_flags} bit of {@code needFlags}. */
    private Pair pair(Options o, long needCaps, long needFlags) {
        IbvDevice client = devices.device(o.string("-d"));
        List<IbvDevice> all = devices.devices();
        long[] cc = probe(client);
        if ((cc[1] & needCaps) != needCaps || (cc[2] & needFlags) != needFlags) {
            throw new KernelException(KernelException.Errno.EOPNOTSUPP, String.format(
                    "%s does not report device_cap_flags 0x%x / device_cap_flags_ex 0x%x (rdma:devinfo -v shows what each device reports)",
                    client.name(), needFlags, needCaps));
        }
        int at = all.indexOf(client);
        for (int i = 1; i < all.size(); i++) {
            IbvDevice d = all.get((at + i) % all.size());
            long[] dc = probe(d);
            if (dc[0] == cc[0] && (dc[1] & needCaps) == needCaps && (dc[2] & needFlags) == needFlags) {
                return new Pair(client, d);
            }
        }
        return new Pair(client, client);
    }

    /** Port 1's link layer, the device's {@code device_cap_flags_ex} and {@code device_cap_flags}, through a short-lived process's context (zeros when the device went). */
    private long[] probe(IbvDevice d) {
        AddressSpace p = mm.createProcess("rdma-probe");
        try (IbvContext c = d.open(p)) {
            IbvDeviceAttr a = c.queryDeviceEx();
            return new long[] {c.queryPort(1).linkLayer(), a.deviceCapFlagsEx(), a.deviceCapFlags() & 0xffff_ffffL};
        } catch (RuntimeException gone) {
            return new long[3];
        } finally {
            p.exit();
        }
    }

    /** The {@code --mem} option of every tool that moves data: host memory by default (read by {@link #memory}). */
    static Options.Opt memOption() {
        return Options.value("--mem", "MEM", "memory: host, a peer client (peermem:clients), or client:device (nv_mem:1: GPU 1)", "host");
    }

    /**
     * {@code --mem host | <client> | <client>:<device>}: the peer client's memory, on device 0 or
     * on the device named (a GPU index, as {@code perftest --use_cuda=<index>}).
     */
    private PeerMemoryAllocator memory(Options o) {
        String mem = o.string("--mem");
        if (mem.equals("host")) {
            return null;
        }
        int colon = mem.lastIndexOf(':');
        String name = colon > 0 ? mem.substring(0, colon) : mem;
        int device = colon > 0 ? (int) org.peerdirect.kernel.shell.Args.integer(o.tool(), "the device index of --mem " + mem,
                mem.substring(colon + 1), 0, 1023) : 0;
        for (PeerMemoryAllocator a : allocators) {
            if (a.name().equals(name)) {
                if (device >= a.devices()) {
                    throw new UsageException(o.tool() + ": --mem " + mem + ": " + name + " has " + a.devices() + " device(s), 0.." + (a.devices() - 1));
                }
                return device == 0 ? a : new OnDevice(a, device);
            }
        }
        throw new IllegalArgumentException("--mem " + mem + ": no peer memory client of that name offers memory (have: host"
                + allocators.stream().map(a -> ", " + a.name() + (a.devices() > 1 ? "[:0.." + (a.devices() - 1) + "]" : "")).reduce("", String::concat) + ")");
    }

    /** A client's memory allocated on one of its devices; everything but the allocation goes by address. */
    private record OnDevice(PeerMemoryAllocator a, int device) implements PeerMemoryAllocator {
        @Override
        public String name() {
            return a.name();
        }

        @Override
        public int devices() {
            return a.devices();
        }

        @Override
        public long alloc(int pid, long size) {
            return a.alloc(pid, size, device);
        }

        @Override
        public long alloc(int pid, long size, int dev) {
            return a.alloc(pid, size, dev);
        }

        @Override
        public long map(int pid, long deviceOffset, long size) {
            return a.map(pid, deviceOffset, size);
        }

        @Override
        public int exportDmabuf(int pid, long addr, long size) {
            return a.exportDmabuf(pid, addr, size);
        }

        @Override
        public void free(int pid, long addr) {
            a.free(pid, addr);
        }

        @Override
        public void copyToDevice(AddressSpace proc, long addr, byte[] src, int off, int len) {
            a.copyToDevice(proc, addr, src, off, len);
        }

        @Override
        public void copyFromDevice(AddressSpace proc, long addr, byte[] dst, int off, int len) {
            a.copyFromDevice(proc, addr, dst, off, len);
        }
    }

    /**
     * One poll: true with a successful completion in {@code wc[0]}, false when none is there;
     * a failed completion or a CQ in error is an exception with ibv_rc_pingpong's wording.
     */
    private static boolean pollOk(org.peerdirect.ib.core.verbs.IbvCq cq, IbvWc[] wc, String what) {
        int n = cq.poll(1, wc);
        if (n < 0) {
            throw new IllegalStateException(what + ": the CQ is in error (overrun or device removed)");
        }
        if (n == 1 && wc[0].status != IbvWcStatus.SUCCESS) {
            throw new IllegalStateException(String.format("%s: Failed status %s (%d) for wr_id %d", what, wc[0].status.str(),
                    wc[0].status.ordinal(), wc[0].wrId));
        }
        return n == 1;
    }

    /** Polls until one completion, which must succeed, and returns it; bounded in time. */
    static IbvWc waitOk(org.peerdirect.ib.core.verbs.IbvCq cq, IbvWc[] wc, String what) {
        long deadline = System.nanoTime() + TIMEOUT_NS;
        for (int spins = 0;; spins++) {
            if (pollOk(cq, wc, what)) {
                return wc[0];
            }
            if (System.nanoTime() - deadline > 0) {
                throw new IllegalStateException(what + ": no completion within 60 s");
            }
            relax(spins);
        }
    }

    /**
     * Ctrl-C: the shell interrupts the command's thread; every polling loop of the tools calls
     * this, so the command ends within one poll and the container does not keep both cores busy.
     * The interrupt status is kept for the caller.
     */
    static void checkInterrupted(String what) {
        if (Thread.currentThread().isInterrupted()) {
            throw new IllegalStateException(what + ": interrupted");
        }
    }

    /** Busy-poll politely: spin, then let the peer's thread have the core (2-core machines). */
    static void relax(int spins) {
        checkInterrupted("rdma");
        if ((spins & 63) == 63) {
            Thread.yield();
        } else {
            Thread.onSpinWait();
        }
    }

    // ------------------------------------------------------------------ ibv_ud_pingpong

    /** The Q_Key both sides of rdma:ud_pingpong use (ibv_ud_pingpong's 0x11111111). */
    static final int UD_QKEY = 0x11111111;

    @Descriptor("the asynchronous events of a device, as ibv_asyncwatch: opens a context and prints each event until -n events "
            + "or -t milliseconds. Only events of the device (ports, removal) reach a context that owns no QP or SRQ. "
            + "Example: rdma:asyncwatch -d mlx5_0 -t 2000 -n 1")
    public String asyncwatch(@Descriptor("options; --help lists them") Object... args) throws InterruptedException {
        Options o = new Options("rdma:asyncwatch", "the asynchronous events of a device, as ibv_asyncwatch", args, List.of(
                Options.value("-d", "DEVICE", "the device (rdma:devices; default the first)", null),
                Options.value("-t", "MS", "watch this long at most", 10_000),
                Options.value("-n", "COUNT", "stop after this many events", Integer.MAX_VALUE)));
        if (o.help()) {
            return o.printUsage();
        }
        long ms = o.number("-t", 0, 3_600_000);
        long max = o.number("-n", 1, Integer.MAX_VALUE);
        String name = o.string("-d");
        IbvDevice d = name != null ? devices.device(name) : devices.devices().stream().findFirst()
                .orElseThrow(() -> new UsageException("rdma:asyncwatch: no IB devices found"));
        StringBuilder sb = new StringBuilder();
        AddressSpace p = mm.createProcess("ibv_asyncwatch");
        try (IbvContext c = d.open(p)) {
            sb.append(d.name()).append(": watching the async events of a context in pid ").append(p.pid()).append('\n');
            long deadline = System.nanoTime() + ms * 1_000_000L;
            int n = 0;
            while (n < max) {
                long left = deadline - System.nanoTime();
                IbvAsyncEvent e;
                try {
                    e = left <= 0 ? null : c.getAsyncEvent(left, TimeUnit.NANOSECONDS);
                } catch (KernelException k) {
                    sb.append("the device went away: ").append(k.errno()).append('\n'); // EIO after DEVICE_FATAL
                    break;
                }
                if (e == null) {
                    break;
                }
                n++;
                sb.append(String.format("event_type %s (%d), ", "IBV_EVENT_" + e.type(), e.type().ordinal()));
                sb.append(switch (e.type().element()) {
                    case PORT -> "port_num " + e.portNum();
                    case QP -> String.format("qp_num 0x%x", e.qp().qpNum());
                    case DEVICE -> "device " + d.name();
                    default -> e.type().str();
                }).append('\n');
            }
            if (n == 0) {
                sb.append("no event within ").append(ms).append(" ms\n");
            }
        } finally {
            p.exit();
        }
        return sb.toString().stripTrailing();
    }

    @Descriptor("SEND/RECV ping-pong on UD QPs through address handles, as ibv_ud_pingpong (-g: a GRH to the peer's GID, required on RoCE). Example: rdma:ud_pingpong -d mlx5_1 -g 0 -c")
    public String ud_pingpong(@Descriptor("options; --help lists them") Object... args) {
        Options o = new Options("rdma:ud_pingpong", "SEND/RECV ping-pong on UD QPs, as ibv_ud_pingpong", args, List.of(
                Options.value("-s", "SIZE", "message size in bytes, at most the path MTU (4096)", 1024),
                Options.value("-n", "ITERS", "round trips", 1000),
                Options.value("-d", "DEVICE", "client device, the server takes the next of its link layer (rdma:devices)", null),
                Options.value("-g", "GIDIDX", "local port GID index: address the peer by GID (a GRH on every datagram; needed on RoCE); -1: by LID", -1),
                Options.flag("-c", "validate every received buffer")));
        if (o.help()) {
            return o.printUsage();
        }
        int size = (int) o.number("-s", 1, 4096);
        int iters = (int) o.number("-n", 1, 100_000_000);
        int gidx = (int) o.number("-g", -1, 255);
        boolean validate = o.flag("-c");
        Pair p = pair(o);
        long len = (size + 40 + 4095L) & -4096L; // the payload after the 40 bytes a GRH takes
        try (Endpoint server = Endpoint.ud(mm, "ud_pingpong-server", p.server(), len, 16, UD_QKEY);
                Endpoint client = Endpoint.ud(mm, "ud_pingpong-client", p.client(), len, 16, UD_QKEY)) {
            org.peerdirect.ib.core.verbs.IbvAh[] ahs = new org.peerdirect.ib.core.verbs.IbvAh[2];
            try {
                return udPingpong(client, server, ahs, size, iters, gidx, validate);
            } finally {
                for (org.peerdirect.ib.core.verbs.IbvAh ah : ahs) {
                    if (ah != null) {
                        ah.destroy(); // before the PDs go
                    }
                }
            }
        }
    }

    /** The ping-pong of {@link #ud_pingpong}: {@code ahs[0]} client to server, {@code ahs[1]} back, made here. */
    private static String udPingpong(Endpoint client, Endpoint server, org.peerdirect.ib.core.verbs.IbvAh[] ahs, int size, int iters,
            int gidx, boolean validate) {
        Endpoint[][] legs = {{client, server}, {server, client}};
        for (int k = 0; k < 2; k++) {
            Endpoint to = legs[k][1];
            org.peerdirect.ib.core.verbs.IbvAhAttr a = org.peerdirect.ib.core.verbs.IbvAhAttr.lid(to.lid, 1);
            if (gidx >= 0) {
                a = org.peerdirect.ib.core.verbs.IbvAhAttr.gid(org.peerdirect.ib.core.verbs.IbvGid.parse(to.ctx.queryGid(1, gidx)), gidx, 1);
                a.dlid = to.lid;
                a.hopLimit = 1;
            }
            ahs[k] = legs[k][0].pd.createAh(a);
        }
        StringBuilder out = new StringBuilder();
        for (Endpoint sd : List.of(client, server)) {
            out.append(sd == client ? "  local address:  " : "  remote address: ").append(String.format("LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s%n",
                    sd.lid, sd.qps[0].qpNum(), 0, gidx >= 0 ? sd.ctx.queryGid(1, gidx) : "::"));
        }
        IbvWc[] wc = {new IbvWc()};
        byte[] msg = new byte[size];
        byte[] got = new byte[size];
        long t0 = System.nanoTime();
        int grh = 0;
        for (int i = 0; i < iters; i++) {
            for (Endpoint e : List.of(server, client)) {
                e.qps[0].postRecv(new IbvRecvWr().sge(e.buf, size + 40, e.mr.lkey()));
            }
            for (int k = 0; k < size; k++) {
                msg[k] = (byte) (i * 31 + k);
            }
            client.proc.write(client.buf + 40, msg, 0, size);
            for (int k = 0; k < 2; k++) {
                Endpoint from = legs[k][0];
                Endpoint to = legs[k][1];
                IbvSendWr w = new IbvSendWr().sge(from.buf + 40, size, from.mr.lkey());
                w.opcode = IbvWrOpcode.SEND;
                w.sendFlags = IbvSendWr.SEND_SIGNALED;
                w.ah = ahs[k];
                w.remoteQpn = to.qps[0].qpNum();
                w.remoteQkey = UD_QKEY;
                from.qps[0].postSend(w);
                waitOk(from.cq, wc, from == client ? "client send" : "server send");
                IbvWc r = waitOk(to.cq, wc, to == client ? "client receive" : "server receive");
                if (r.byteLen != size + 40) {
                    throw new IllegalStateException(String.format("iteration %d: received %d bytes, expected %d (GRH + payload)", i, r.byteLen, size + 40));
                }
                grh += (r.wcFlags & IbvWc.WC_GRH) != 0 ? 1 : 0;
                if (validate) {
                    to.proc.read(to.buf + 40, got, 0, size);
                    if (!Arrays.equals(got, msg)) {
                        throw new IllegalStateException("iteration " + i + ": the received buffer differs from what was sent");
                    }
                }
            }
        }
        long usec = Math.max(1, (System.nanoTime() - t0) / 1000);
        long bytes = 2L * size * iters;
        out.append(String.format("%d bytes in %.2f seconds = %.2f Mbit/sec%n", bytes, usec / 1e6, bytes * 8.0 / usec));
        out.append(String.format("%d iters in %.2f seconds = %.2f usec/iter%n", iters, usec / 1e6, (double) usec / iters));
        out.append(String.format("%s%d datagrams arrived with a GRH (IBV_WC_GRH)%n", validate ? "validated " + 2L * iters + " received buffers; " : "",
                grh));
        return out.toString();
    }

    // ------------------------------------------------------------------ ibv_xsrq_pingpong

    /** One side of {@link #xsrq_pingpong}: a process with its XRC domain, one XRC SRQ, and per peer a receive QP and a send QP. */
    private static final class XrcSide implements AutoCloseable {
        final AddressSpace proc;
        final IbvContext ctx;
        final IbvPd pd;
        final org.peerdirect.ib.core.verbs.IbvXrcd xrcd;
        final IbvCq recvCq;
        final IbvCq sendCq;
        final org.peerdirect.ib.core.verbs.IbvSrq srq;
        final IbvQp[] recvQps;
        final IbvQp[] sendQps;
        final long buf;
        final long len;
        final IbvMr mr;
        final int lid;
        /** Port 1's GID 0 on RoCE (what a peer's path names there); null on InfiniBand, where the LID routes. */
        final byte[] gid;

        XrcSide(Mm mm, String name, IbvDevice dev, int peers, int slot, int access) {
            proc = mm.createProcess(name);
            try {
                ctx = dev.open(proc);
                pd = ctx.allocPd();
                xrcd = ctx.openXrcd(-1, 0);
                recvCq = ctx.createCq(4 * peers + 16, null);
                sendCq = ctx.createCq(4 * peers + 16, null);
                org.peerdirect.ib.core.verbs.IbvSrqInitAttrEx s = new org.peerdirect.ib.core.verbs.IbvSrqInitAttrEx();
                s.srqType = org.peerdirect.ib.core.verbs.IbvSrqInitAttrEx.SrqType.XRC;
                s.pd = pd;
                s.xrcd = xrcd;
                s.cq = recvCq;
                s.maxWr = 2 * peers + 2;
                srq = ctx.createSrqEx(s);
                recvQps = new IbvQp[peers];
                sendQps = new IbvQp[peers];
                for (int i = 0; i < peers; i++) {
                    IbvQpInitAttr r = new IbvQpInitAttr();
                    r.qpType = IbvQpType.XRC_RECV;
                    r.xrcd = xrcd;
                    recvQps[i] = ctx.createQpEx(r);
                    IbvQpInitAttr q = new IbvQpInitAttr();
                    q.qpType = IbvQpType.XRC_SEND;
                    q.sendCq = sendCq;
                    q.maxSendWr = 4;
                    sendQps[i] = pd.createQp(q);
                }
                // one slot per peer to receive into, one to send from
                len = (long) (peers + 1) * slot;
                buf = proc.mmap(len);
                if ((access & IbAccess.ON_DEMAND) == 0) {
                    proc.populate(buf, len, true);
                }
                mr = pd.regMr(buf, len, access);
                lid = ctx.queryPort(1).lid();
                gid = ctx.queryPort(1).linkLayer() == IbvPortAttr.LINK_LAYER_ETHERNET
                        ? org.peerdirect.ib.core.verbs.IbvGid.parse(ctx.queryGid(1, 0)) : null;
            } catch (RuntimeException e) {
                proc.exit();
                throw e;
            }
        }

        @Override
        public void close() {
            proc.exit(); // closes the context: QPs, SRQ, MR, domain, CQs, PD in uverbs' order
        }
    }

    @Descriptor("SEND/RECV ping-pong over XRC, as ibv_xsrq_pingpong: one XRC SRQ at the server receives every client's messages through one XRC receive QP per client. Example: rdma:xsrq_pingpong -d mlx5_1 -c 3 -n 100")
    public String xsrq_pingpong(@Descriptor("options; --help lists them") Object... args) {
        Options o = new Options("rdma:xsrq_pingpong", "SEND/RECV ping-pong over XRC, as ibv_xsrq_pingpong", args, List.of(
                Options.value("-s", "SIZE", "message size in bytes", 4096),
                Options.value("-n", "ITERS", "round trips per client", 5),
                Options.value("-c", "CLIENTS", "client processes, each with its own XRC domain and SRQ", 2),
                Options.value("-d", "DEVICE", "client device, the server takes the next of its link layer (rdma:devices)", null),
                Options.flag("-o", "use on-demand paging (ODP) for both sides' buffers (needs XRC SEND and SRQ_RECV ODP)")));
        if (o.help()) {
            return o.printUsage();
        }
        int size = (int) o.number("-s", 1, 1 << 20);
        int iters = (int) o.number("-n", 1, 10_000_000);
        int clients = (int) o.number("-c", 1, 64);
        boolean odp = o.flag("-o");
        Pair p = pair(o, 0, IbvDeviceAttr.DEVICE_XRC);
        int access = IbAccess.LOCAL_WRITE | (odp ? IbAccess.ON_DEMAND : 0);
        if (odp) {
            for (IbvDevice d : List.of(p.client(), p.server())) {
                checkXrcOdp(d);
            }
        }
        int slot = (size + 4095) & -4096;
        List<XrcSide> opened = new ArrayList<>();
        try {
            XrcSide server = new XrcSide(mm, "xsrq_pingpong-server", p.server(), clients, slot, access);
            opened.add(server);
            XrcSide[] cs = new XrcSide[clients];
            for (int c = 0; c < clients; c++) {
                cs[c] = new XrcSide(mm, "xsrq_pingpong-client" + c, p.client(), 1, slot, access);
                opened.add(cs[c]);
                // client c's send QP to the server's c-th receive QP, and back
                RcConnect toServer = new RcConnect().minRnrTimer(1).gid(server.gid);
                RcConnect toClient = new RcConnect().minRnrTimer(1).gid(cs[c].gid);
                toServer.connect(cs[c].sendQps[0], server.lid, server.recvQps[c].qpNum());
                toClient.connect(server.recvQps[c], cs[c].lid, cs[c].sendQps[0].qpNum());
                toClient.connect(server.sendQps[c], cs[c].lid, cs[c].recvQps[0].qpNum());
                toServer.connect(cs[c].recvQps[0], server.lid, server.sendQps[c].qpNum());
            }
            return xsrqPingpong(server, cs, size, iters, odp);
        } finally {
            for (int i = opened.size() - 1; i >= 0; i--) {
                opened.get(i).close();
            }
        }
    }

    /** The XRC transport's SEND and SRQ_RECV ODP bits (xsrq_pingpong -o's check); EOPNOTSUPP naming the device. */
    private void checkXrcOdp(IbvDevice d) {
        AddressSpace pr = mm.createProcess("rdma-probe");
        try (IbvContext c = d.open(pr)) {
            IbvDeviceAttr a = c.queryDeviceEx();
            int need = IbvDeviceAttr.OdpCaps.SUPPORT_SEND | IbvDeviceAttr.OdpCaps.SUPPORT_SRQ_RECV;
            if ((a.odpCaps().xrcOdpCaps() & need) != need) {
                throw new KernelException(KernelException.Errno.EOPNOTSUPP, d.name() + ": xrc_odp_caps lack SEND and SRQ_RECV (rdma:devinfo -v)");
            }
        } finally {
            pr.exit();
        }
    }

    /**
     * The exchange: each round, every client sends to the server's SRQ (its number from
     * {@code ibv_get_srq_num}) and the server answers each into that client's SRQ; the server
     * tells the clients apart by the receive completion's QP number (its receive QP per client).
     */
    private static String xsrqPingpong(XrcSide server, XrcSide[] cs, int size, int iters, boolean odp) {
        int clients = cs.length;
        int slot = (size + 4095) & -4096;
        IbvWc[] wc = {new IbvWc()};
        byte[] msg = new byte[size];
        byte[] got = new byte[size];
        StringBuilder out = new StringBuilder();
        out.append(String.format("  server: LID 0x%04x, XRC SRQ 0x%06x, %d receive QPs, %d send QPs%s%n", server.lid, server.srq.srqNum(),
                clients, clients, odp ? ", ODP" : ""));
        for (int c = 0; c < clients; c++) {
            out.append(String.format("  client %d: LID 0x%04x, XRC SRQ 0x%06x, receive QP 0x%06x, send QP 0x%06x%n", c, cs[c].lid,
                    cs[c].srq.srqNum(), cs[c].recvQps[0].qpNum(), cs[c].sendQps[0].qpNum()));
        }
        long t0 = System.nanoTime();
        int[] perQp = new int[clients];
        for (int i = 0; i < iters; i++) {
            for (int c = 0; c < clients; c++) {
                server.srq.postRecv(new IbvRecvWr().sge(server.buf + (long) c * slot, size, server.mr.lkey()));
                IbvRecvWr r = new IbvRecvWr().sge(cs[c].buf, size, cs[c].mr.lkey());
                cs[c].srq.postRecv(r);
            }
            for (int c = 0; c < clients; c++) {
                fillPattern(msg, i, c);
                cs[c].proc.write(cs[c].buf + slot, msg, 0, size);
                IbvSendWr w = new IbvSendWr().sge(cs[c].buf + slot, size, cs[c].mr.lkey());
                w.opcode = IbvWrOpcode.SEND;
                w.sendFlags = IbvSendWr.SEND_SIGNALED;
                w.remoteSrqn = server.srq.srqNum();
                cs[c].sendQps[0].postSend(w);
                waitOk(cs[c].sendCq, wc, "client " + c + " send");
            }
            for (int k = 0; k < clients; k++) {
                IbvWc r = waitOk(server.recvCq, wc, "server receive");
                int c = indexOf(server.recvQps, r.qpNum);
                if (c < 0 || r.byteLen != size) {
                    throw new IllegalStateException(String.format("iteration %d: a receive on QP 0x%x of %d bytes: no client's", i, r.qpNum, r.byteLen));
                }
                perQp[c]++;
            }
            for (int c = 0; c < clients; c++) {
                // each client's message is in the server buffer of the receive its SRQ took: find it by content
                fillPattern(msg, i, c);
                boolean found = false;
                for (int s = 0; s < clients && !found; s++) {
                    server.proc.read(server.buf + (long) s * slot, got, 0, size);
                    found = Arrays.equals(got, msg);
                }
                if (!found) {
                    throw new IllegalStateException("iteration " + i + ": client " + c + "'s message is in no server receive buffer");
                }
                // echo it into client c's SRQ through the server's send QP to that client
                server.proc.write(server.buf + (long) clients * slot, msg, 0, size);
                IbvSendWr w = new IbvSendWr().sge(server.buf + (long) clients * slot, size, server.mr.lkey());
                w.opcode = IbvWrOpcode.SEND;
                w.sendFlags = IbvSendWr.SEND_SIGNALED;
                w.remoteSrqn = cs[c].srq.srqNum();
                server.sendQps[c].postSend(w);
                waitOk(server.sendCq, wc, "server send to client " + c);
                IbvWc r = waitOk(cs[c].recvCq, wc, "client " + c + " receive");
                cs[c].proc.read(cs[c].buf, got, 0, size);
                if (r.qpNum != cs[c].recvQps[0].qpNum() || !Arrays.equals(got, msg)) {
                    throw new IllegalStateException("iteration " + i + ": client " + c + " received something else than its echo");
                }
            }
            if (odp) { // every page re-faults next round, on both devices
                server.proc.madvise(server.buf, server.len, AddressSpace.Advice.MADV_DONTNEED);
                for (XrcSide c : cs) {
                    c.proc.madvise(c.buf, c.len, AddressSpace.Advice.MADV_DONTNEED);
                }
            }
        }
        long usec = Math.max(1, (System.nanoTime() - t0) / 1000);
        out.append(String.format("%d iters of %d clients in %.2f seconds = %.2f usec/iter%n", iters, clients, usec / 1e6, (double) usec / iters));
        out.append(String.format("validated %d received buffers; the server's one XRC SRQ took %s messages (per receive QP)%n",
                2L * iters * clients, Arrays.toString(perQp)));
        return out.toString();
    }

    private static void fillPattern(byte[] msg, int i, int c) {
        for (int k = 0; k < msg.length; k++) {
            msg[k] = (byte) (i * 31 + c * 7 + k);
        }
    }

    private static int indexOf(IbvQp[] qps, int qpn) {
        for (int i = 0; i < qps.length; i++) {
            if (qps[i].qpNum() == qpn) {
                return i;
            }
        }
        return -1;
    }

    // ------------------------------------------------------------------ ibv_rc_pingpong

    @Descriptor("SEND/RECV ping-pong between two simulated processes, as ibv_rc_pingpong. Example: rdma:pingpong -s 4096 -n 1000 -c")
    public String pingpong(@Descriptor("options; --help lists them") Object... args) throws Exception {
        Options o = new Options("rdma:pingpong", "SEND/RECV ping-pong on an RC QP pair, as ibv_rc_pingpong", args, List.of(
                Options.value("-s", "SIZE", "message size in bytes (K/M suffixes)", 4096),
                Options.value("-n", "ITERS", "round trips", 1000),
                Options.value("-d", "DEVICE", "client device, the server takes the next (rdma:devices)", null),
                memOption(),
                Options.flag("-e", "sleep on the completion channel instead of polling"),
                Options.flag("-o", "register the buffers on demand (ODP): nothing pinned, the devices fault the pages in"),
                Options.flag("-O", "implicit ODP: one on-demand MR over the whole address space (address 0, length SIZE_MAX); implies -o"),
                Options.flag("-P", "with -o or --dmabuf: prefetch the buffers into the devices (ibv_advise_mr PREFETCH_WRITE, FLUSH), after each drop too"),
                Options.value("--drop-every", "N", "with -o: the client drops its buffer (madvise DONTNEED) before every N-th message, so both "
                        + "devices fault it in again (0: never; a peerdirect addition)", 0),
                Options.flag("--dmabuf", "with --mem: register the peer buffers as dma-buf MRs (ibv_reg_dmabuf_mr), not through the peer client"),
                Options.flag("-c", "validate every received buffer")));
        if (o.help()) {
            return o.printUsage();
        }
        boolean events = o.flag("-e");
        int size = (int) o.number("-s", 1, 1 << 24);
        int iters = (int) o.number("-n", 1, 100_000_000);
        boolean validate = o.flag("-c");
        boolean implicit = o.flag("-O");
        boolean odp = o.flag("-o") || implicit;
        int dropEvery = (int) o.number("--drop-every", 0, 100_000_000);
        if (dropEvery > 0 && !odp) {
            throw new UsageException("rdma:pingpong: --drop-every drops pages under an ODP registration: give -o too");
        }
        boolean prefetch = o.flag("-P");
        boolean dmabuf = o.flag("--dmabuf");
        if (prefetch && !odp && !dmabuf) {
            throw new UsageException("rdma:pingpong: prefetch (-P) is valid only with an on-demand memory region (-o) or a dma-buf MR (--dmabuf)");
        }
        Pair p = pair(o);
        PeerMemoryAllocator mem = memory(o);
        if (dmabuf && (mem == null || odp)) {
            throw new UsageException("rdma:pingpong: --dmabuf registers peer memory exported as a dma-buf: give --mem <peer client>, without -o");
        }
        Endpoint.Odp mode = implicit ? Endpoint.Odp.IMPLICIT : odp ? Endpoint.Odp.EXPLICIT : Endpoint.Odp.NONE;
        try (Endpoint server = new Endpoint(mm, "rc_pingpong-server", p.server(), size, 1, 16, mem, events, mode, -1, dmabuf);
                Endpoint client = new Endpoint(mm, "rc_pingpong-client", p.client(), size, 1, 16, mem, events, mode, -1, dmabuf)) {
            Endpoint.connect(client, server, 0);
            Endpoint.connect(server, client, 0);
            StringBuilder out = new StringBuilder();
            if (prefetch) {
                for (Endpoint e : List.of(client, server)) {
                    String err = prefetch(e);
                    if (err != null) { // as ibv_rc_pingpong: a failed prefetch is not fatal
                        out.append("Couldn't prefetch MR (").append(err).append("). Continue anyway\n");
                    }
                }
            }
            out.append("  local address:  ").append(client.address()).append('\n');
            out.append("  remote address: ").append(server.address()).append('\n');
            AtomicReference<Throwable> failure = new AtomicReference<>();
            long bar0 = barBytes();
            Thread srv = Thread.ofPlatform().name("rc_pingpong-server").start(() -> {
                try {
                    side(server, size, iters, validate, false, 0, false);
                } catch (Throwable t) {
                    failure.compareAndSet(null, t);
                }
            });
            long t0 = System.nanoTime();
            try {
                side(client, size, iters, validate, true, dropEvery, prefetch);
            } catch (Throwable t) {
                failure.compareAndSet(null, t);
                srv.interrupt(); // the server would wait for messages that never come
            }
            try {
                srv.join(TIMEOUT_NS / 1_000_000);
            } finally {
                if (srv.isAlive()) { // interrupted (Ctrl-C) or timed out: stop it before the endpoints close
                    srv.interrupt();
                    srv.join(5_000);
                }
            }
            long usec = Math.max(1, (System.nanoTime() - t0) / 1000);
            if (srv.isAlive()) {
                failure.compareAndSet(null, new IllegalStateException("server side did not finish within 60 s"));
            }
            if (failure.get() != null) {
                throw new IllegalStateException("rdma:pingpong: " + failure.get().getMessage(), failure.get());
            }
            long bytes = (long) size * iters * 2;
            out.append(String.format("%d bytes in %.2f seconds = %.2f Mbit/sec%n", bytes, usec / 1e6, bytes * 8.0 / usec));
            out.append(String.format("%d iters in %.2f seconds = %.2f usec/iter", iters, usec / 1e6, (double) usec / iters));
            if (events) {
                out.append(String.format("%ncompletions waited for on completion channels (-e)"));
            }
            if (validate) {
                out.append(String.format("%nvalidated %d received buffers of %d bytes on both sides: no mismatch", iters, size));
            }
            if (mem != null && bar0 >= 0) {
                out.append(String.format("%nbuffers in %s memory%s; IOMMU: %d bytes crossed PCI BARs peer to peer (the HCAs reaching the device's BAR)",
                        mem.name(), dmabuf ? ", registered as dma-buf MRs (ibv_reg_dmabuf_mr)" : "", barBytes() - bar0));
                if (dmabuf && prefetch) {
                    out.append(String.format("%ndma-buf MRs prefetched (ibv_advise_mr PREFETCH_WRITE with FLUSH: mlx5 maps the whole buffer)"));
                }
            }
            if (odp) {
                out.append(String.format("%nbuffers registered on demand (%s)%s", implicit ? "implicit ODP: one MR over the whole address space" : "ODP",
                        dropEvery > 0
                        ? String.format("; the client dropped its buffer %d times (madvise DONTNEED)", (iters + dropEvery - 1) / dropEvery) : ""));
                if (prefetch) {
                    out.append(String.format("%nbuffers prefetched (ibv_advise_mr PREFETCH_WRITE with FLUSH)%s", dropEvery > 0 ? ", the client's after every drop" : ""));
                }
            }
            return out.toString();
        }
    }

    /**
     * One side of the ping-pong: the client sends first, the server answers each message. Send
     * and receive completions share the CQ and may arrive in either order.
     */
    private static void side(Endpoint e, int size, int iters, boolean validate, boolean client, int dropEvery, boolean prefetch) {
        IbvWc[] wc = {new IbvWc()};
        IbvRecvWr rwr = new IbvRecvWr().sge(e.buf, size, e.mr.lkey());
        IbvSendWr swr = new IbvSendWr().sge(e.buf, size, e.mr.lkey());
        swr.opcode = IbvWrOpcode.SEND;
        swr.sendFlags = IbvSendWr.SEND_SIGNALED;
        byte[] pattern = validate ? new byte[size] : null;
        byte[] got = validate ? new byte[size] : null;
        int sends = 0;
        int recvs = 0;
        e.qps[0].postRecv(rwr);
        if (client) {
            drop(e, dropEvery, 0, prefetch);
            fill(e, validate, pattern, size, 0);
            e.qps[0].postSend(swr);
        }
        while (sends < iters || recvs < iters) {
            IbvWc c = e.channel != null ? waitEvent(e, wc, client ? "client" : "server") : waitOk(e.cq, wc, client ? "client" : "server");
            if (c.opcode == org.peerdirect.ib.core.verbs.IbvWcOpcode.RECV) {
                if (validate) {
                    Arrays.fill(pattern, (byte) recvs);
                }
                check(e, validate, pattern, got, size, recvs, client ? "client" : "server");
                recvs++;
                if (recvs < iters) {
                    e.qps[0].postRecv(rwr);
                }
                if (!client) {
                    e.qps[0].postSend(swr); // echo what arrived
                }
            } else {
                sends++;
            }
            if (client && sends == recvs && sends < iters) { // both halves of the round trip are done: next message
                drop(e, dropEvery, sends, prefetch);
                fill(e, validate, pattern, size, sends);
                e.qps[0].postSend(swr);
            }
        }
    }

    /**
     * {@code --drop-every}: before message {@code i}, the buffer's pages go ({@code MADV_DONTNEED});
     * the posted receive still points at them, so the echo faults them in on the device again,
     * unless {@code -P} prefetches them back first.
     */
    private static void drop(Endpoint e, int dropEvery, int i, boolean prefetch) {
        if (dropEvery > 0 && i % dropEvery == 0) {
            e.proc.madvise(e.buf, e.size, AddressSpace.Advice.MADV_DONTNEED);
            if (prefetch) {
                String err = prefetch(e);
                if (err != null) {
                    throw new IllegalStateException("prefetch after a drop failed: " + err);
                }
            }
        }
    }

    /** {@code ibv_rc_pingpong -P}: the whole buffer, writable, synchronously; the error, or null. */
    private static String prefetch(Endpoint e) {
        try {
            e.pd.adviseMr(IbvPd.ADVISE_MR_ADVICE_PREFETCH_WRITE, IbvPd.ADVISE_MR_FLAG_FLUSH, new IbvSge(e.buf, (int) e.size, e.mr.lkey()));
            return null;
        } catch (KernelException ex) {
            return ex.getMessage();
        }
    }

    /**
     * ibv_rc_pingpong -e: sleep on the completion channel instead of spinning. Arm, poll once
     * (a completion may have come before arming), else wait for the event, acknowledge it, re-arm.
     */
    private static IbvWc waitEvent(Endpoint e, IbvWc[] wc, String what) {
        long deadline = System.nanoTime() + TIMEOUT_NS;
        for (;;) {
            e.cq.reqNotify(false);
            if (pollOk(e.cq, wc, what)) {
                return wc[0];
            }
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                throw new IllegalStateException(what + ": no completion event within 60 s");
            }
            try {
                org.peerdirect.ib.core.verbs.IbvCq ev = e.channel.getCqEvent(java.time.Duration.ofNanos(left));
                if (ev != null) {
                    e.channel.ackCqEvents(ev, 1);
                }
            } catch (InterruptedException ie) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException(what + ": interrupted while waiting for a completion event");
            }
        }
    }

    private static void fill(Endpoint e, boolean validate, byte[] pattern, int size, int iter) {
        if (validate) {
            Arrays.fill(pattern, (byte) iter);
            e.write(e.buf, pattern, 0, size);
        }
    }

    private static void check(Endpoint e, boolean validate, byte[] pattern, byte[] got, int size, int iter, String who) {
        if (!validate) {
            return;
        }
        e.read(e.buf, got, 0, size);
        if (!Arrays.equals(pattern, got)) {
            throw new IllegalStateException(who + ": received buffer of iteration " + iter + " does not hold the sent bytes");
        }
    }

    // ------------------------------------------------------------------ invalidation mid-traffic

    /**
     * {@code rdma:invalidate_test [-n N] [-s size] [--mem client]}: RDMA WRITEs into peer memory;
     * half-way the application frees that memory (the peer client invalidates the MR, as a GPU
     * driver does on cudaFree), and the writes that follow complete with errors. Prints the
     * completions by status and checks that the freed memory saw no write after the free.
     */
    @Descriptor("RDMA WRITEs into peer memory that is freed half-way: later writes complete with errors, none lands. Example: rdma:invalidate_test --mem example_peer")
    public String invalidate_test(@Descriptor("options; --help lists them") Object... args) {
        Options o = new Options("rdma:invalidate_test", "RDMA WRITEs into peer memory freed half-way (the peer client invalidates)",
                args, List.of(
                        Options.value("-n", "ITERS", "writes", 2000),
                        Options.value("-s", "SIZE", "bytes per write", 4096),
                        Options.value("-d", "DEVICE", "client device (rdma:devices)", null),
                        Options.value("--mem", "MEM", "a peer client's name (default: the first offering memory)", null)));
        if (o.help()) {
            return o.printUsage();
        }
        int iters = (int) o.number("-n", 2, 10_000_000);
        int size = (int) o.number("-s", 8, 1 << 20);
        if (o.string("--mem") == null) {
            if (allocators.isEmpty()) {
                throw new IllegalArgumentException("rdma:invalidate_test needs a peer memory client offering memory (--mem <name>)");
            }
        }
        PeerMemoryAllocator mem = o.string("--mem") == null ? allocators.get(0) : memory(o);
        if (mem == null) {
            throw new IllegalArgumentException("rdma:invalidate_test: --mem must name a peer memory client, not host");
        }
        Pair p = pair(o);
        StringBuilder out = new StringBuilder();
        try (Endpoint server = new Endpoint(mm, "invalidate-server", p.server(), size, 1, 16, mem);
                Endpoint client = new Endpoint(mm, "invalidate-client", p.client(), size, 1, 16, null)) {
            Endpoint.connect(client, server, 0);
            Endpoint.connect(server, client, 0);
            IbvSendWr w = new IbvSendWr().sge(client.buf, size, client.mr.lkey());
            w.opcode = IbvWrOpcode.RDMA_WRITE;
            w.sendFlags = IbvSendWr.SEND_SIGNALED;
            w.remoteAddr = server.buf;
            w.rkey = server.mr.rkey();
            IbvWc[] wc = {new IbvWc()};
            java.util.Map<IbvWcStatus, Integer> byStatus = new java.util.EnumMap<>(IbvWcStatus.class);
            int firstError = -1;
            for (int i = 0; i < iters; i++) {
                if (i == iters / 2) {
                    out.append(String.format("after %d writes: %s frees the memory under the MR (the client invalidates it)%n", i,
                            server.proc.name()));
                    server.freePeerBuffer();
                    out.append(String.format("  MR rkey 0x%x invalidated: %s%n", server.mr.rkey(), server.mr.invalidated()));
                }
                client.qps[0].postSend(w);
                long deadline = System.nanoTime() + TIMEOUT_NS;
                int n;
                for (int spins = 0; (n = client.cq.poll(1, wc)) == 0; spins++) {
                    if (System.nanoTime() - deadline > 0) {
                        throw new IllegalStateException("no completion within 60 s");
                    }
                    relax(spins);
                }
                byStatus.merge(wc[0].status, 1, Integer::sum);
                if (wc[0].status != IbvWcStatus.SUCCESS && firstError < 0) {
                    firstError = i;
                    out.append(String.format("  write %d: %s (%s), QP now %s%n", i, wc[0].status, wc[0].status.str(), client.qps[0].state()));
                }
            }
            out.append("completions by status:\n");
            byStatus.forEach((st, c) -> out.append(String.format("  %-14s %d%n", st, c)));
            out.append(firstError == iters / 2 ? "the first write after the free failed; no write reached the freed memory (see kernel:iommu)"
                    : "UNEXPECTED: first error at write " + firstError);
        }
        return out.toString();
    }

    /**
     * {@code rdma:put --mem CLIENT [--offset OFF] --text TEXT [--flush]}: one RDMA WRITE of the text
     * from a host buffer into peer memory at a fixed device offset (an SSD's persistent region: the
     * same offset names the same bytes after a restart), then, with {@code --flush}, an IBA 1.5
     * RDMA FLUSH with the persistent placement type over the written range (the target MR carries
     * IB_ACCESS_FLUSH_PERSISTENT, granted over persistent memory only), then an RDMA READ back to
     * check placement.
     */
    @Descriptor("RDMA WRITE of a text into peer memory at a fixed device offset (--flush: then an RDMA FLUSH to persistence), read back to check. Example: rdma:put --mem ssd_mem --offset 0 --text hello --flush")
    public String put(@Descriptor("options; --help lists them") Object... args) {
        Options o = new Options("rdma:put", "one RDMA WRITE of a text into peer memory at a device offset (then an RDMA READ back)", args, List.of(
                Options.value("--mem", "MEM", "a peer client offering memory at fixed offsets (ssd_mem)", null),
                Options.value("--offset", "OFF", "device offset, page-aligned", 0),
                Options.value("--text", "TEXT", "the bytes to write (UTF-8)", null),
                Options.flag("--flush", "after the write, an RDMA FLUSH (persistent placement) of the written range"),
                Options.value("-d", "DEVICE", "client device (rdma:devices)", null)));
        if (o.help()) {
            return o.printUsage();
        }
        if (o.string("--mem") == null || o.string("--text") == null) {
            throw new UsageException("rdma:put needs --mem <peer client> and --text <text> (rdma:put --help)");
        }
        PeerMemoryAllocator mem = memory(o);
        if (mem == null) {
            throw new UsageException("rdma:put: --mem must name a peer memory client, not host");
        }
        long offset = o.number("--offset", 0, Long.MAX_VALUE / 2);
        byte[] text = o.string("--text").getBytes(java.nio.charset.StandardCharsets.UTF_8);
        if (text.length == 0 || text.length > (1 << 20)) {
            throw new UsageException("rdma:put: --text must have 1 to 1048576 bytes, not " + text.length);
        }
        long size = (text.length + 4095L) & -4096L;
        boolean flush = o.flag("--flush");
        Pair p = pair(o, flush ? IbvDeviceAttr.DEVICE_FLUSH_PERSISTENT : 0);
        long bar0 = barBytes();
        int flushRights = flush ? IbAccess.FLUSH_GLOBAL | IbAccess.FLUSH_PERSISTENT : 0;
        try (Endpoint target = new Endpoint(mm, "put-target", p.server(), size, 1, 4, mem, false, Endpoint.Odp.NONE, offset, false, flushRights);
                Endpoint source = new Endpoint(mm, "put-source", p.client(), size, 1, 4, null)) {
            Endpoint.connect(source, target, 0);
            Endpoint.connect(target, source, 0);
            source.write(source.buf, text, 0, text.length);
            IbvSendWr w = new IbvSendWr().sge(source.buf, text.length, source.mr.lkey());
            w.opcode = IbvWrOpcode.RDMA_WRITE;
            w.sendFlags = IbvSendWr.SEND_SIGNALED;
            w.remoteAddr = target.buf;
            w.rkey = target.mr.rkey();
            complete(source, w, "RDMA WRITE");
            String flushed = "";
            if (flush) {
                IbvSendWr f = new IbvSendWr();
                f.opcode = IbvWrOpcode.FLUSH;
                f.sendFlags = IbvSendWr.SEND_SIGNALED;
                f.remoteAddr = target.buf;
                f.rkey = target.mr.rkey();
                f.flushLength = text.length;
                f.flushType = IbvSendWr.FLUSH_PERSISTENT;
                f.flushLevel = IbvSendWr.FLUSH_RANGE;
                complete(source, f, "RDMA FLUSH");
                flushed = String.format("RDMA FLUSH (placement PERSISTENT, level RANGE) of the %d bytes: SUCCESS: durable in %s%n", text.length,
                        mem.name());
            }
            source.write(source.buf, new byte[text.length], 0, text.length);
            w.opcode = IbvWrOpcode.RDMA_READ;
            complete(source, w, "RDMA READ");
            byte[] back = new byte[text.length];
            source.read(source.buf, back, 0, text.length);
            boolean same = java.util.Arrays.equals(back, text);
            long bar = barBytes();
            String out = String.format("%s %s: RDMA WRITE of %d bytes to %s offset 0x%x (pid %d 0x%x, rkey 0x%x): SUCCESS%n"
                    + "%sRDMA READ back: %s%s%n", p.client().name(), p.server().name(), text.length, mem.name(), offset, target.proc.pid(),
                    target.buf, target.mr.rkey(), flushed, same ? "the same bytes" : "MISMATCH",
                    bar < 0 ? "" : String.format(" (%d bytes crossed the peer's BAR)", bar - bar0));
            if (!same) {
                throw new IllegalStateException(out);
            }
            return out;
        }
    }

    /** Posts one signalled work request on {@code e}'s QP 0 and waits (bounded) for its successful completion. */
    private static void complete(Endpoint e, IbvSendWr w, String what) {
        e.qps[0].postSend(w);
        waitOk(e.cq, new IbvWc[] {new IbvWc()}, what);
    }

    // ------------------------------------------------------------------ perftest

    @Descriptor("RDMA WRITE bandwidth, as perftest ib_write_bw. Example: rdma:write_bw -s 64K -q 4")
    public String write_bw(@Descriptor("options; --help lists them") Object... args) {
        return new Perftest(this, "RDMA_Write BW Test", IbvWrOpcode.RDMA_WRITE, false, args).run();
    }

    @Descriptor("RDMA READ bandwidth, as perftest ib_read_bw")
    public String read_bw(@Descriptor("options; --help lists them") Object... args) {
        return new Perftest(this, "RDMA_Read BW Test", IbvWrOpcode.RDMA_READ, false, args).run();
    }

    @Descriptor("SEND bandwidth, as perftest ib_send_bw. Example: rdma:send_bw -a")
    public String send_bw(@Descriptor("options; --help lists them") Object... args) {
        return new Perftest(this, "Send BW Test", IbvWrOpcode.SEND, false, args).run();
    }

    @Descriptor("8-byte atomics on one remote word, as perftest ib_atomic_bw (-A FETCH_AND_ADD|CMP_AND_SWAP, or IBA 1.5 ATOMIC_WRITE). Example: rdma:atomic_bw -d mlx5_1 -A ATOMIC_WRITE --odp")
    public String atomic_bw(@Descriptor("options; --help lists them") Object... args) {
        return new Perftest(this, "Atomic BW Test", null, false, args).run();
    }

    @Descriptor("RDMA WRITE latency, as perftest ib_write_lat")
    public String write_lat(@Descriptor("options; --help lists them") Object... args) {
        return new Perftest(this, "RDMA_Write Latency Test", IbvWrOpcode.RDMA_WRITE, true, args).run();
    }

    Mm mm() {
        return mm;
    }

    IbvDevice[] devicesFor(Options o) {
        Pair p = pair(o);
        return new IbvDevice[] {p.client(), p.server()};
    }

    PeerMemoryAllocator memoryFor(Options o) {
        return memory(o);
    }

    static List<Integer> sweep(int max) {
        List<Integer> s = new ArrayList<>();
        for (int v = 2; v <= max; v <<= 1) {
            s.add(v);
        }
        return s;
    }
}

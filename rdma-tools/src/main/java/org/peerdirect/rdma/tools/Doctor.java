package org.peerdirect.rdma.tools;

import java.util.ArrayList;
import java.util.List;

import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.umem.PeerClaim;
import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvDeviceAttr;
import org.peerdirect.ib.core.verbs.IbvDeviceAttr.OdpCaps;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.Vma;
import org.peerdirect.kernel.shell.UsageException;

/**
 * {@code rdma:doctor [-d DEV] PID ADDR LEN [--access FLAGS]}: what memory a range of a process
 * is, and for each way to register it (pinned, ODP explicit, ODP implicit, each peer client by
 * name, dma-buf) whether it would succeed on the device and, if not, the exact condition that
 * fails, in the order the kernel checks it. Nothing is registered, pinned, mapped or charged:
 * the answers come from the process's VMAs and memlock accounting, the device's attributes
 * ({@code ibv_query_device_ex}, and whether the driver implements {@code reg_user_mr_dmabuf}),
 * and the peer clients' {@code acquire} asked by the IB core and released at once
 * ({@link org.peerdirect.ib.core.umem.UmemService#peerClaims}). The conditions are the ones of
 * {@code ib_check_mr_access}, {@code ib_umem_get} (memlock, then {@code pin_user_pages}'s VMA
 * checks, then the peer path), {@code ib_umem_odp_get} / {@code hmm_range_fault} and
 * {@code ib_umem_dmabuf_get}; {@link DoctorPaths} evaluates them. For GPU memory the GPU's BAR1 use
 * ({@link GpuBar1}, nvidia-smi's view) says whether nvidia-peermem's pin, or a dma-buf mapping, finds
 * BAR1 space: a range that does not fit is named as BAR1 exhausted (nvidia-peermem's probe pin fails
 * and it answers "not mine", which alone would hide why).
 */
final class Doctor {

    static final String DESCRIPTION = "which registration path (pinned, ODP, implicit ODP, each peer client, dma-buf) a range of a process "
            + "would take on a device, and why the others fail; registers nothing. Example: rdma:doctor -d mlx5_1 7 0x10000000 1M";

    /** What the tools register with when --access is not given (their MRs' flags). */
    static final int DEFAULT_ACCESS = IbAccess.LOCAL_WRITE | IbAccess.REMOTE_WRITE | IbAccess.REMOTE_READ;

    private static final String TOOL = "rdma:doctor";

    private final ToolEnv env;

    Doctor(ToolEnv env) {
        this.env = env;
    }

    /** The range asked about; {@code bar1} the GPU it is memory of, with its BAR1 now, or null. */
    record Query(AddressSpace process, long addr, long length, int access, IbvDevice device, GpuBar1.Bar1 bar1) {
        long npages() {
            return ((addr + length + 4095 & -4096L) - (addr & -4096L)) >>> 12;
        }
    }

    String run(Object[] args) {
        List<Object> positional = new ArrayList<>();
        List<Object> named = new ArrayList<>();
        split(args, positional, named);
        Options o = new Options(TOOL, "which path a registration of PID's [ADDR, ADDR+LEN) would take on a device, and why the others fail "
                + "(registers nothing). Usage: rdma:doctor [-d DEV] PID ADDR LEN [--access FLAGS]. Example: rdma:doctor -d mlx5_1 7 0x10000000 1M",
                named.toArray(), List.of(
                        Options.value("-d", "DEVICE", "the device to register on (default: the first)", null),
                        Options.value("--access", "FLAGS", "access flags, comma or | separated: LOCAL_WRITE, REMOTE_WRITE, REMOTE_READ, "
                                + "REMOTE_ATOMIC, MW_BIND, ZERO_BASED, HUGETLB, FLUSH_GLOBAL, FLUSH_PERSISTENT, RELAXED_ORDERING",
                                "LOCAL_WRITE,REMOTE_WRITE,REMOTE_READ")));
        if (o.help()) {
            return o.printUsage();
        }
        if (positional.size() != 3) {
            throw new UsageException(TOOL + ": give PID ADDR LEN (got " + positional.size() + " of them: " + positional
                    + "); for example rdma:doctor 7 0x10000000 1M");
        }
        int pid = (int) org.peerdirect.kernel.shell.Args.size(TOOL, "PID", String.valueOf(positional.get(0)), 1, Integer.MAX_VALUE);
        long addr = org.peerdirect.kernel.shell.Args.size(TOOL, "ADDR", String.valueOf(positional.get(1)), 0, (1L << 47) - 1);
        long len = org.peerdirect.kernel.shell.Args.size(TOOL, "LEN", String.valueOf(positional.get(2)), 1, 1L << 46);
        int access = parseAccess(o.string("--access"));
        AddressSpace p = env.findProcess(pid);
        if (p == null || p.exited()) {
            throw new UsageException(TOOL + ": no process " + pid + (p == null ? "" : " (it is exiting)") + " (kernel:ps lists them)");
        }
        List<Vma> vmas = covering(p, addr, len);
        IbvDevice dev = DeviceLookup.one(env, o.string("-d"), TOOL);
        DeviceLookup.Caps caps = DeviceLookup.probe(env, dev, true);
        if (caps.linkLayer() < 0) {
            throw new UsageException(TOOL + ": " + dev.name() + " went away while it was asked");
        }
        refuseFlagsTheDeviceLacks(dev, caps.attr(), access);
        Query q = new Query(p, addr, len, access, dev, env.gpuBar1(pid, addr, len));
        List<PeerClaim> claims = env.peerClaims(p, addr, len);
        return DoctorReport.render(q, vmas, caps, claims, DoctorPaths.evaluate(q, vmas, caps, claims));
    }

    /** PID ADDR LEN apart from the options (and their values). */
    private static void split(Object[] args, List<Object> positional, List<Object> named) {
        for (int i = 0; i < args.length; i++) {
            String a = String.valueOf(args[i]);
            if (a.equals("-d") || a.equals("--access")) {
                named.add(a);
                if (i + 1 < args.length) {
                    named.add(args[++i]);
                }
            } else if (a.startsWith("-") && !a.matches("-\\d.*")) {
                named.add(a);
            } else {
                positional.add(args[i]);
            }
        }
    }

    /** {@code LOCAL_WRITE,REMOTE_READ} (or {@code |}-separated, {@code IBV_ACCESS_} prefixes allowed) to the flags. */
    static int parseAccess(String s) {
        int access = 0;
        for (String part : s.split("[,|]")) {
            String n = part.trim().toUpperCase(java.util.Locale.ROOT).replaceFirst("^IBV_ACCESS_", "").replaceFirst("^IB_ACCESS_", "");
            if (n.isEmpty()) {
                continue;
            }
            access |= switch (n) {
                case "LOCAL_WRITE" -> IbAccess.LOCAL_WRITE;
                case "REMOTE_WRITE" -> IbAccess.REMOTE_WRITE;
                case "REMOTE_READ" -> IbAccess.REMOTE_READ;
                case "REMOTE_ATOMIC" -> IbAccess.REMOTE_ATOMIC;
                case "MW_BIND" -> IbAccess.MW_BIND;
                case "ZERO_BASED" -> IbAccess.ZERO_BASED;
                case "HUGETLB" -> IbAccess.HUGETLB;
                case "FLUSH_GLOBAL" -> IbAccess.FLUSH_GLOBAL;
                case "FLUSH_PERSISTENT" -> IbAccess.FLUSH_PERSISTENT;
                case "RELAXED_ORDERING" -> IbAccess.RELAXED_ORDERING;
                case "ON_DEMAND" -> throw new UsageException(TOOL + ": --access ON_DEMAND: leave it out, the doctor tries on-demand paging "
                        + "itself (the ODP explicit and implicit paths)");
                default -> throw new UsageException(TOOL + ": --access: unknown access flag '" + part.trim() + "' (LOCAL_WRITE, REMOTE_WRITE, "
                        + "REMOTE_READ, REMOTE_ATOMIC, MW_BIND, ZERO_BASED, HUGETLB, FLUSH_GLOBAL, FLUSH_PERSISTENT, RELAXED_ORDERING)");
            };
        }
        return access;
    }

    /** A flag no path can carry on this device: refused in words (ib_check_mr_access's EOPNOTSUPP on every path). */
    private static void refuseFlagsTheDeviceLacks(IbvDevice dev, IbvDeviceAttr a, int access) {
        long ex = a.deviceCapFlagsEx();
        if ((access & IbAccess.FLUSH_GLOBAL) != 0 && (ex & IbvDeviceAttr.DEVICE_FLUSH_GLOBAL) == 0) {
            throw new UsageException(TOOL + ": --access FLUSH_GLOBAL: " + dev.name() + " has no RDMA FLUSH to global visibility "
                    + "(device_cap_flags_ex lacks IB_DEVICE_FLUSH_GLOBAL): every registration with it fails with EOPNOTSUPP");
        }
        if ((access & IbAccess.FLUSH_PERSISTENT) != 0 && (ex & IbvDeviceAttr.DEVICE_FLUSH_PERSISTENT) == 0) {
            throw new UsageException(TOOL + ": --access FLUSH_PERSISTENT: " + dev.name() + " has no RDMA FLUSH to persistence "
                    + "(device_cap_flags_ex lacks IB_DEVICE_FLUSH_PERSISTENT): every registration with it fails with EOPNOTSUPP");
        }
        if ((access & IbAccess.HUGETLB) != 0 && (a.odpCaps().generalCaps() & IbvDeviceAttr.ODP_SUPPORT) == 0) {
            throw new UsageException(TOOL + ": --access HUGETLB: " + dev.name() + " has no on-demand paging (odp_caps.general_caps lacks "
                    + "IBV_ODP_SUPPORT), and IB_ACCESS_HUGETLB applies to ODP MRs only");
        }
    }

    /** The VMAs covering [addr, addr+len), in order; a usage error naming the first hole. */
    static List<Vma> covering(AddressSpace p, long addr, long len) {
        long start = addr & -4096L;
        long end = addr + len + 4095 & -4096L;
        List<Vma> out = new ArrayList<>();
        long at = start;
        for (Vma v : p.vmas()) {
            if (v.end() <= at || v.start() >= end) {
                continue;
            }
            if (v.start() > at) {
                break;
            }
            out.add(v);
            at = v.end();
            if (at >= end) {
                return out;
            }
        }
        throw new UsageException(String.format("%s: the range 0x%x + %d is not mapped in process %d (%s): 0x%x-0x%x is in no mapping "
                + "(kernel:maps %d lists them)", TOOL, addr, len, p.pid(), p.name(), at, Math.min(end, nextStart(p, at, end)), p.pid()));
    }

    private static long nextStart(AddressSpace p, long at, long end) {
        return p.vmas().stream().mapToLong(Vma::start).filter(s -> s > at).min().orElse(end);
    }

    /** The ODP capability bits of one transport, by name. */
    static String odpBits(int bits) {
        String[] names = {"SEND", "RECV", "WRITE", "READ", "ATOMIC", "SRQ_RECV", "FLUSH", "ATOMIC_WRITE"};
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < names.length; i++) {
            if ((bits & 1 << i) != 0) {
                sb.append(sb.isEmpty() ? "" : " ").append(names[i]);
            }
        }
        return sb.isEmpty() ? "none" : sb.toString();
    }

    static boolean odp(IbvDeviceAttr a) {
        return (a.odpCaps().generalCaps() & IbvDeviceAttr.ODP_SUPPORT) != 0;
    }

    static boolean implicitOdp(IbvDeviceAttr a) {
        return (a.odpCaps().generalCaps() & IbvDeviceAttr.ODP_SUPPORT_IMPLICIT) != 0;
    }

    static OdpCaps odpCaps(IbvDeviceAttr a) {
        return a.odpCaps();
    }
}

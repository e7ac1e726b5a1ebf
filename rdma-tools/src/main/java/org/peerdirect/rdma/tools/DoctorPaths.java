package org.peerdirect.rdma.tools;

import java.util.ArrayList;
import java.util.List;

import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.umem.PeerClaim;
import org.peerdirect.ib.core.verbs.IbvDeviceAttr;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.Vma;

/**
 * {@link Doctor}'s verdicts: for each registration path, the first condition that would fail, in
 * the order the kernel checks it, or what the path would do. Read-only: it looks at the VMAs, the
 * memlock accounting, the device's attributes and the peer clients' answers it is given.
 */
final class DoctorPaths {

    /** The answer for one path. */
    enum Status {
        /** the registration would succeed this way. */
        YES,
        /** it would fail: {@link Verdict#why} names the condition. */
        NO,
        /** ibv_reg_mr would not get here (an earlier path succeeds first). */
        NOT_REACHED,
        /** it works given a dma-buf fd of this memory, which only its owner can export. */
        IF_EXPORTED
    }

    /** One path's answer; {@code taken}: the path {@code ibv_reg_mr} with these flags takes. */
    record Verdict(String path, Status status, String why, boolean taken) {
    }

    /** {@code ibv_reg_dmabuf_mr}'s access flags (the man page). */
    static final int DMABUF_ACCESS = IbAccess.LOCAL_WRITE | IbAccess.REMOTE_WRITE | IbAccess.REMOTE_READ | IbAccess.REMOTE_ATOMIC
            | IbAccess.RELAXED_ORDERING;

    private DoctorPaths() {
    }

    static List<Verdict> evaluate(Doctor.Query q, List<Vma> vmas, DeviceLookup.Caps caps, List<PeerClaim> claims) {
        List<Verdict> out = new ArrayList<>();
        String common = commonCheck(q, caps.attr());
        // ib_umem_get: memlock first (ENOMEM fails the call: no peer fallback), then pin_user_pages' VMA checks
        String memlock = memlock(q.process(), q.npages());
        String pinRefusal = pinRefusal(q, vmas);
        String pinned = common != null ? common : memlock != null ? memlock : pinRefusal;
        out.add(new Verdict("pinned (ibv_reg_mr)", pinned == null ? Status.YES : Status.NO, pinned == null
                ? String.format("pin_user_pages(FOLL_LONGTERM) of %d pages; memlock then %d of %d pages", q.npages(),
                        q.process().pinnedPages() + q.npages(), q.process().memlockLimit() >>> 12)
                : pinned, pinned == null));
        // the peer path: only when pinning refused the range (EFAULT), with the same memlock charge
        boolean peerReached = common == null && memlock == null && pinRefusal != null;
        boolean taken = pinned == null;
        if (claims == null) {
            out.add(new Verdict("peer clients", Status.NO, "not known: the IB core's umem service is not available to the tools", false));
        } else if (claims.isEmpty()) {
            out.add(new Verdict("peer clients", peerReached ? Status.NO : Status.NOT_REACHED, "no peer-memory client is registered", false));
        }
        for (PeerClaim c : claims == null ? List.<PeerClaim>of() : claims) {
            String name = "peer client " + c.client();
            String why = switch (c.answer()) {
                case CLAIMED -> "acquire claims the whole range" + (taken ? ", but an earlier path takes the registration" : "");
                case NOT_MINE -> "acquire: not mine (the client does not own [0x" + Long.toHexString(q.addr()) + ", +" + q.length() + "))";
                case SKIPPED -> c.detail();
                case FAILED -> "acquire failed: " + c.detail();
            };
            Status s;
            if (common != null) {
                s = Status.NO;
                why = common;
            } else if (!peerReached) {
                s = Status.NOT_REACHED;
                why = (memlock != null ? "memlock fails the call first" : "pinning succeeds first; peer clients are asked only when "
                        + "pin_user_pages refuses the range") + " (acquire would say: " + c.answer().name().toLowerCase().replace('_', ' ') + ")";
            } else if (bar1Exhausted(q, c.client()) != null) {
                s = Status.NO;
                why = bar1Exhausted(q, c.client());
            } else {
                s = c.answer() == PeerClaim.Answer.CLAIMED ? Status.YES : Status.NO;
            }
            boolean mine = s == Status.YES && !taken;
            if (mine) {
                why += "; " + q.npages() + " pages would be charged to memlock, the client pins and maps them" + bar1Use(q, c.client());
            }
            taken |= mine;
            out.add(new Verdict(name, s, why, mine));
        }
        out.add(odpExplicit(q, vmas, caps.attr(), common));
        out.add(odpImplicit(q, vmas, caps.attr(), common));
        out.add(dmabuf(q, vmas, caps, common));
        return out;
    }

    /** Whether {@code client} is nvidia-peermem (its two flavours), whose pins take BAR1 slots of the GPU. */
    private static boolean nvidia(String client) {
        return client.startsWith("nv_mem");
    }

    /**
     * The BAR1 condition of nvidia-peermem: its {@code acquire} pins the range as a probe
     * ({@code nvidia_p2p_get_pages}), which fails with ENOMEM when the range's 64 KiB pages do not
     * fit in the free BAR1 slots, and a failed probe is "not mine" (the registration then ends in
     * pinning's EFAULT). Null when the range is no GPU's, the client is not nvidia's, or it fits.
     */
    static String bar1Exhausted(Doctor.Query q, String client) {
        GpuBar1.Bar1 b = q.bar1();
        if (b == null || !nvidia(client) || b.fits()) {
            return null;
        }
        return String.format("ENOMEM: BAR1 space exhausted on %s (%s): pinning the range (nvidia_p2p_get_pages) needs %d BAR1 slots of "
                + "64 KiB, %d of %d are free; acquire's probe pin fails, so the client answers not mine (gpu:smi shows BAR1 use: "
                + "deregister GPU MRs or put pinned ranges, or register a smaller range)", b.gpu(), b.bdf(), b.neededSlots(), b.freeSlots(),
                b.totalSlots());
    }

    /** What a pin that fits leaves of BAR1, for nvidia's clients; "" otherwise. */
    private static String bar1Use(Doctor.Query q, String client) {
        GpuBar1.Bar1 b = q.bar1();
        if (b == null || !nvidia(client)) {
            return "";
        }
        long left = b.freeSlots() - b.neededSlots();
        return String.format(" into %d of the %d free BAR1 slots of %s%s", b.neededSlots(), b.freeSlots(), b.gpu(),
                left == 0 ? ": BAR1 is then full, the next pin of GPU memory fails with ENOMEM" : " (" + left + " left)");
    }

    /** ib_check_mr_access and the length limit: what fails every path alike. */
    private static String commonCheck(Doctor.Query q, IbvDeviceAttr a) {
        int access = q.access();
        if ((access & (IbAccess.REMOTE_WRITE | IbAccess.REMOTE_ATOMIC)) != 0 && (access & IbAccess.LOCAL_WRITE) == 0) {
            return "EINVAL: REMOTE_WRITE or REMOTE_ATOMIC needs LOCAL_WRITE (ib_check_mr_access)";
        }
        if (Long.compareUnsigned(q.length(), a.maxMrSize()) > 0) {
            return "EINVAL: length " + q.length() + " is more than the device's max_mr_size " + Long.toUnsignedString(a.maxMrSize());
        }
        return null;
    }

    /** The RLIMIT_MEMLOCK charge of ib_umem_get (pinned and peer paths), or null when it fits. */
    static String memlock(AddressSpace p, long npages) {
        long limit = p.memlockLimit() >>> 12;
        long now = p.pinnedPages();
        if (npages > limit - now) {
            return String.format("ENOMEM: %d pages would exceed RLIMIT_MEMLOCK (%d pages, %d already pinned): raise it "
                    + "(kernel:ulimit / setMemlockLimit), or use ODP, which charges nothing", npages, limit, now);
        }
        return null;
    }

    /** pin_user_pages' refusal of the first VMA it cannot pin, or null. */
    private static String pinRefusal(Doctor.Query q, List<Vma> vmas) {
        boolean write = IbAccess.writable(q.access());
        for (Vma v : vmas) {
            long at = Math.max(v.start(), q.addr() & -4096L);
            if (v.kind() == Vma.Kind.DEVICE) {
                return String.format("EFAULT: 0x%x is in device mapping %s (VM_IO|VM_PFNMAP): it has no struct pages to pin", at, v.name());
            }
            if (!v.readable() || write && !v.writable()) {
                return String.format("EFAULT: 0x%x: mapping %s is %s, and %s needs %s", at, name(v), prot(v), IbAccess.toString(q.access()),
                        write ? "writing" : "reading");
            }
            if (write && v.kind() == Vma.Kind.FILE) {
                return String.format("EFAULT: 0x%x is in file mapping %s: writable long-term pins of file-backed memory are refused "
                        + "(as Linux 6.5+ does)", at, name(v));
            }
        }
        return null;
    }

    /** What a device fault (hmm_range_fault) of the range would meet, or null when every page can be faulted in. */
    private static String faultRefusal(Doctor.Query q, List<Vma> vmas) {
        boolean write = IbAccess.writable(q.access());
        for (Vma v : vmas) {
            long at = Math.max(v.start(), q.addr() & -4096L);
            if (v.kind() == Vma.Kind.DEVICE) {
                return String.format("registers, but hmm_range_fault refuses device mapping %s at 0x%x (EFAULT): every device access "
                        + "would complete in error", v.name(), at);
            }
            if (!v.readable() || write && !v.writable()) {
                return String.format("registers, but hmm_range_fault refuses 0x%x: mapping %s is %s (EPERM): the device's %s would "
                        + "complete in error", at, name(v), prot(v), write ? "writes" : "reads");
            }
        }
        return null;
    }

    private static Verdict odpExplicit(Doctor.Query q, List<Vma> vmas, IbvDeviceAttr a, String common) {
        String path = "ODP explicit (IBV_ACCESS_ON_DEMAND)";
        if (common != null) {
            return new Verdict(path, Status.NO, common, false);
        }
        if (!Doctor.odp(a)) {
            return new Verdict(path, Status.NO, "EOPNOTSUPP: " + q.device().name() + " has no on-demand paging (odp_caps.general_caps lacks "
                    + "IBV_ODP_SUPPORT)", false);
        }
        if ((q.access() & IbAccess.HUGETLB) != 0) {
            for (Vma v : vmas) {
                if (v.kind() != Vma.Kind.HUGETLB) {
                    return new Verdict(path, Status.NO, String.format("EINVAL at the first fault: 0x%x is not in a huge page, and "
                            + "IB_ACCESS_HUGETLB maps 2 MiB granules (mapping %s is %s)", Math.max(v.start(), q.addr()), name(v), kind(v)), false);
                }
            }
        }
        String fault = faultRefusal(q, vmas);
        if (fault != null) {
            return new Verdict(path, Status.NO, fault, false);
        }
        return new Verdict(path, Status.YES, String.format("nothing pinned or charged; %d pages fault in on first access (RC ODP: %s)",
                q.npages(), Doctor.odpBits(a.odpCaps().rcOdpCaps())), false);
    }

    private static Verdict odpImplicit(Doctor.Query q, List<Vma> vmas, IbvDeviceAttr a, String common) {
        String path = "ODP implicit (ibv_reg_mr(0, SIZE_MAX))";
        if (common != null) {
            return new Verdict(path, Status.NO, common, false);
        }
        if (!Doctor.implicitOdp(a)) {
            return new Verdict(path, Status.NO, "EOPNOTSUPP: " + q.device().name() + " has no implicit ODP (odp_caps.general_caps lacks "
                    + "IBV_ODP_SUPPORT_IMPLICIT)", false);
        }
        if ((q.access() & IbAccess.HUGETLB) != 0) {
            return new Verdict(path, Status.NO, "EINVAL: IB_ACCESS_HUGETLB applies to explicit ODP only (ib_umem_odp_alloc_implicit)", false);
        }
        String fault = faultRefusal(q, vmas);
        if (fault != null) {
            return new Verdict(path, Status.NO, fault, false);
        }
        return new Verdict(path, Status.YES, "one MR over the whole address space; the range's 1 GiB child MRs appear on its first fault", false);
    }

    private static Verdict dmabuf(Doctor.Query q, List<Vma> vmas, DeviceLookup.Caps caps, String common) {
        String path = "dma-buf (ibv_reg_dmabuf_mr)";
        if (!caps.dmabuf()) {
            return new Verdict(path, Status.NO, "EOPNOTSUPP: " + q.device().name() + "'s driver has no reg_user_mr_dmabuf", false);
        }
        int bad = q.access() & ~DMABUF_ACCESS;
        if (bad != 0) {
            return new Verdict(path, Status.NO, "EINVAL: access flags " + IbAccess.toString(bad) + " are not allowed for ibv_reg_dmabuf_mr", false);
        }
        if (common != null) {
            return new Verdict(path, Status.NO, common, false);
        }
        if (vmas.stream().anyMatch(v -> v.kind() != Vma.Kind.DEVICE)) {
            return new Verdict(path, Status.NO, "host memory has no dma-buf exporter here (no udmabuf): a dma-buf MR takes an fd "
                    + "from the memory's exporter (for GPU memory cuMemGetHandleForAddressRange); use ibv_reg_mr", false);
        }
        GpuBar1.Bar1 b = q.bar1();
        if (b != null && !b.fits()) {
            return new Verdict(path, Status.NO, String.format("ENOMEM: BAR1 space exhausted on %s (%s): mapping the exported range needs %d "
                    + "BAR1 slots of 64 KiB, %d of %d are free (gpu:smi shows BAR1 use)", b.gpu(), b.bdf(), b.neededSlots(), b.freeSlots(),
                    b.totalSlots()), false);
        }
        return new Verdict(path, Status.IF_EXPORTED, "the driver imports dma-bufs: given an fd for this memory from its owner "
                + "(for GPU memory cuMemGetHandleForAddressRange), the MR maps it on demand and follows its moves"
                + (b == null ? "" : String.format(" (%d BAR1 slots of %s, %d free)", b.neededSlots(), b.gpu(), b.freeSlots())), false);
    }

    static String name(Vma v) {
        return v.name() == null || v.name().isEmpty() ? "[anon]" : v.name();
    }

    static String prot(Vma v) {
        return (v.readable() ? "r" : "-") + (v.writable() ? "w" : "-");
    }

    static String kind(Vma v) {
        return switch (v.kind()) {
            case ANON -> "anonymous memory (4 KiB pages)";
            case HUGETLB -> "anonymous huge pages (2 MiB, MAP_HUGETLB)";
            case FILE -> "a shared file mapping" + (v.file() == null ? "" : " of " + v.file());
            case DEVICE -> "device memory (VM_IO|VM_PFNMAP)";
        };
    }
}

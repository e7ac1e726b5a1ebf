package org.peerdirect.rdma.tools;

import java.util.List;

import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.umem.PeerClaim;
import org.peerdirect.ib.core.verbs.IbvDeviceAttr;
import org.peerdirect.kernel.mm.Vma;

/** {@link Doctor}'s output: the memory, the device, one line per path, the verdict. */
final class DoctorReport {

    private DoctorReport() {
    }

    static String render(Doctor.Query q, List<Vma> vmas, DeviceLookup.Caps caps, List<PeerClaim> claims, List<DoctorPaths.Verdict> paths) {
        StringBuilder out = new StringBuilder();
        out.append(String.format("range [0x%x, +%d) of process %d (%s): %d pages, access %s, on %s%n", q.addr(), q.length(),
                q.process().pid(), q.process().name(), q.npages(), IbAccess.toString(q.access()), q.device().name()));
        out.append("memory:\n");
        for (Vma v : vmas) {
            out.append(String.format("  %012x-%012x %s  %s %s%n", v.start(), v.end(), DoctorPaths.prot(v), DoctorPaths.kind(v),
                    DoctorPaths.name(v)));
        }
        String owner = claims == null ? null
                : claims.stream().filter(c -> c.answer() == PeerClaim.Answer.CLAIMED).map(PeerClaim::client).findFirst().orElse(null);
        if (owner != null) {
            out.append("  ").append(ownerWords(owner)).append('\n');
        } else if (claims != null && !claims.isEmpty()) {
            out.append("  no peer client claims it\n");
        }
        GpuBar1.Bar1 b = q.bar1();
        if (b != null) {
            out.append(String.format("  GPU memory of %s (%s): BAR1 %d of %d slots of 64 KiB in use; the range needs %d: %s%n", b.gpu(), b.bdf(),
                    b.totalSlots() - b.freeSlots(), b.totalSlots(), b.neededSlots(), b.fits()
                            ? (b.freeSlots() == b.neededSlots() ? "it fits and fills BAR1" : "it fits, " + (b.freeSlots() - b.neededSlots()) + " left")
                            : "BAR1 space would be exhausted (" + b.freeSlots() + " free)"));
        }
        out.append(String.format("  memlock: %d of %d pages pinned by the process%n", q.process().pinnedPages(),
                q.process().memlockLimit() >>> 12));
        IbvDeviceAttr a = caps.attr();
        out.append(String.format("device %s: ODP %s (implicit %s; RC: %s), dma-buf MRs %s, max_mr_size %s%n", q.device().name(),
                Doctor.odp(a) ? "yes" : "no", Doctor.implicitOdp(a) ? "yes" : "no", Doctor.odpBits(a.odpCaps().rcOdpCaps()),
                caps.dmabuf() ? "yes" : "no", Long.toUnsignedString(a.maxMrSize())));
        out.append("paths:\n");
        for (DoctorPaths.Verdict v : paths) {
            out.append(String.format("  %-40s %-11s %s%s%n", v.path(), v.status().name().replace('_', ' '),
                    v.why(), v.taken() ? "   <- ibv_reg_mr takes this path" : ""));
        }
        out.append(verdict(q, paths));
        return out.toString();
    }

    /** Words for the memory a peer client claims (the clients this project ships; others by name). */
    static String ownerWords(String client) {
        return switch (client) {
            case "nv_mem", "nv_mem_nc" -> "GPU memory: peer client " + client + " claims it (video memory behind BAR1)";
            case "ssd_mem" -> "SSD PMR: peer client ssd_mem claims it (the NVMe controller's persistent memory region)";
            default -> "peer memory: client " + client + " claims it";
        };
    }

    private static String verdict(Doctor.Query q, List<DoctorPaths.Verdict> paths) {
        DoctorPaths.Verdict taken = paths.stream().filter(DoctorPaths.Verdict::taken).findFirst().orElse(null);
        String flags = IbAccess.toString(q.access());
        if (taken != null) {
            return String.format("verdict: ibv_reg_mr(%s) registers it %s%n", flags,
                    taken.path().startsWith("pinned") ? "pinned" : "through " + taken.path());
        }
        DoctorPaths.Verdict pinned = paths.getFirst();
        List<String> others = paths.stream().filter(v -> v.status() == DoctorPaths.Status.YES).map(DoctorPaths.Verdict::path).toList();
        GpuBar1.Bar1 b = q.bar1();
        String bar1 = b == null || b.fits() ? "" : String.format("; the GPU's peer client would take it, but BAR1 space is exhausted on %s "
                + "(needs %d slots of 64 KiB, %d free)", b.gpu(), b.neededSlots(), b.freeSlots());
        return String.format("verdict: ibv_reg_mr(%s) fails: %s%s%s%n", flags, pinned.why(), bar1,
                others.isEmpty() ? "; no other path works either" : "; it works as: " + String.join(", ", others));
    }
}

package org.peerdirect.mlx5.ib;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.example.peermem.ExamplePeerMemory;
import org.peerdirect.hca.cx4.ConnectX4Device;
import org.peerdirect.kernel.mm.Vma;
import org.peerdirect.kernel.shell.UsageException;
import org.peerdirect.peermem.PeerMemoryRegistration;
import org.peerdirect.rdma.tools.RdmaTools;

/**
 * {@code rdma:doctor} on a ConnectX-6 Dx with the example peer client registered: anonymous memory takes the
 * pinned path, the client's device memory the peer path (pinning refused by name), memlock and
 * read-only mappings fail the pinned path with their condition, and bad input is answered in
 * words. It registers nothing: pins, the peer client's counters and the IOMMU's mappings are the
 * same before and after.
 */
class DoctorTest extends Mlx5Machine {

    @TempDir
    Path tmp;
    ExamplePeerMemory peer;
    PeerMemoryRegistration reg;

    @AfterEach
    void down() {
        if (reg != null) {
            reg.unregister();
        }
        List<String> left = stopMachine();
        assertEquals(List.of(), left, "IOMMU clean, every DMA page and frame free");
    }

    private RdmaTools up() {
        startMachine(tmp, "doctor-app", ConnectX4Device.DEVICE_CONNECTX4, ConnectX4Device.DEVICE_CONNECTX6DX);
        peer = new ExamplePeerMemory(mm, "example_peer", 4096, false);
        reg = core.peerMemory().register(peer, true);
        RdmaTools t = tools();
        t.setUmemForTests(core.umems());
        return t;
    }

    /** What a registration would change: pins, the client's MRs and pages, IOMMU mappings. */
    private String counters() {
        var s = reg.statistics();
        return "pinned=" + proc.pinnedPages() + " peer_mrs=" + s.numAllocMrs() + "/" + s.numDeallocMrs() + " peer_pages=" + s.numRegPages()
                + " iommu=" + iommu.domains().stream().map(d -> d.name() + ":" + d.mappedPages()).toList() + " contexts="
                + core.openContexts(devs.get(0)) + "/" + core.openContexts(devs.get(1))
                + " processes=" + mm.processes().size();
    }

    private static String line(String out, String path) {
        return out.lines().filter(l -> l.trim().startsWith(path)).findFirst().orElseThrow(() -> new AssertionError(path + " in\n" + out));
    }

    @Test
    void eachPathSaysWhetherItWorksAndWhyNotWithoutRegistering() {
        RdmaTools t = up();
        long anon = proc.mmap(1 << 20);
        long dev = peer.alloc(proc.pid(), 1 << 20);
        // the first context a device opens makes its firmware ask for pages (MANAGE_PAGES): the
        // device's own memory, given once; the counters are taken after that
        t.doctor("-d", "mlx5_0", String.valueOf(proc.pid()), String.valueOf(anon), "4096");
        t.doctor("-d", "mlx5_1", String.valueOf(proc.pid()), String.valueOf(anon), "4096");
        String before = counters();

        String a = t.doctor("-d", "mlx5_1", String.valueOf(proc.pid()), "0x" + Long.toHexString(anon), "64K");
        System.out.println(a);
        assertTrue(a.contains("anonymous memory (4 KiB pages)"), a);
        assertTrue(line(a, "pinned (ibv_reg_mr)").contains("YES") && line(a, "pinned").contains("<- ibv_reg_mr takes this path"), a);
        assertTrue(line(a, "peer client example_peer").contains("NOT REACHED") && line(a, "peer client example_peer").contains("not mine"), a);
        assertTrue(line(a, "ODP explicit").contains("YES"), a);
        assertTrue(line(a, "dma-buf").contains("NO") && line(a, "dma-buf").contains("no dma-buf exporter"), a);
        assertTrue(a.contains("verdict: ibv_reg_mr(LOCAL_WRITE|REMOTE_WRITE|REMOTE_READ) registers it pinned"), a);

        String d = t.doctor("-d", "mlx5_1", String.valueOf(proc.pid()), String.valueOf(dev), "1M");
        System.out.println(d);
        assertTrue(d.contains("device memory (VM_IO|VM_PFNMAP) [example_peer]") && d.contains("peer memory: client example_peer claims it"), d);
        assertTrue(line(d, "pinned (ibv_reg_mr)").contains("NO") && line(d, "pinned").contains("EFAULT")
                && line(d, "pinned").contains("device mapping [example_peer] (VM_IO|VM_PFNMAP)"), d);
        assertTrue(line(d, "peer client example_peer").contains("YES") && line(d, "peer client example_peer").contains("<- ibv_reg_mr takes"), d);
        assertTrue(line(d, "ODP explicit").contains("NO") && line(d, "ODP explicit").contains("hmm_range_fault refuses device mapping"), d);
        assertTrue(line(d, "dma-buf").contains("IF EXPORTED"), d);
        assertTrue(d.contains("verdict: ibv_reg_mr(LOCAL_WRITE|REMOTE_WRITE|REMOTE_READ) registers it through peer client example_peer"), d);

        // the memlock limit: the pinned path fails with ENOMEM, and with it the peer path (no fallback on ENOMEM)
        proc.setMemlockLimit(8 * 4096);
        String m = t.doctor("-d", "mlx5_1", String.valueOf(proc.pid()), String.valueOf(anon), "64K");
        assertTrue(line(m, "pinned (ibv_reg_mr)").contains("NO") && line(m, "pinned").contains("ENOMEM: 16 pages would exceed RLIMIT_MEMLOCK (8 pages"), m);
        assertTrue(m.contains("it works as: ODP explicit"), m);
        proc.setMemlockLimit(64L << 20);

        // a read-only mapping: writable access is refused by pin_user_pages and by the device's faults
        long ro = proc.mmap(0, 1 << 16, Vma.PROT_READ, Vma.Kind.ANON, "ro-data");
        String r = t.doctor(String.valueOf(proc.pid()), String.valueOf(ro), "4096", "-d", "mlx5_1");
        assertTrue(line(r, "pinned (ibv_reg_mr)").contains("EFAULT") && line(r, "pinned").contains("ro-data is r-"), r);
        assertTrue(line(r, "ODP explicit").contains("EPERM"), r);
        String rr = t.doctor(String.valueOf(proc.pid()), String.valueOf(ro), "4096", "-d", "mlx5_1", "--access", "REMOTE_READ");
        assertTrue(line(rr, "pinned (ibv_reg_mr)").contains("YES"), "read-only access pins a read-only mapping\n" + rr);

        // access flags: remote write without local write fails every path alike
        String w = t.doctor(String.valueOf(proc.pid()), String.valueOf(anon), "4096", "--access", "REMOTE_WRITE");
        assertTrue(line(w, "pinned").contains("EINVAL: REMOTE_WRITE or REMOTE_ATOMIC needs LOCAL_WRITE") && line(w, "ODP explicit").contains("EINVAL"), w);

        assertEquals(before, counters(), "the doctor registered, pinned and mapped nothing");
        peer.free(proc.pid(), dev);
    }

    @Test
    void badInputIsAnsweredInWords() {
        RdmaTools t = up();
        long anon = proc.mmap(1 << 16);
        String pid = String.valueOf(proc.pid());
        UsageException e = assertThrows(UsageException.class, () -> t.doctor("999", "0x1000", "4096"));
        assertTrue(e.getMessage().contains("no process 999"), e.getMessage());
        e = assertThrows(UsageException.class, () -> t.doctor(pid, String.valueOf(anon + (1 << 16) + 4096 * 16), "4096"));
        assertTrue(e.getMessage().contains("is not mapped in process " + pid) && e.getMessage().contains("kernel:maps"), e.getMessage());
        e = assertThrows(UsageException.class, () -> t.doctor(pid, String.valueOf(anon), String.valueOf(2 << 16)));
        assertTrue(e.getMessage().contains("is not mapped") && e.getMessage().contains(String.format("0x%x", anon + (1 << 16))), e.getMessage());
        e = assertThrows(UsageException.class, () -> t.doctor(pid, String.valueOf(anon), "4096", "--access", "LOCAL_WRITE,BOGUS"));
        assertTrue(e.getMessage().contains("unknown access flag 'BOGUS'"), e.getMessage());
        e = assertThrows(UsageException.class, () -> t.doctor(pid, String.valueOf(anon)));
        assertTrue(e.getMessage().contains("give PID ADDR LEN"), e.getMessage());
    }
}

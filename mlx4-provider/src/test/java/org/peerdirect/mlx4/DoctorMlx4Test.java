package org.peerdirect.mlx4;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.kernel.shell.UsageException;
import org.peerdirect.rdma.tools.RdmaTools;

/**
 * {@code rdma:doctor} on a ConnectX-3 (mlx4: no ODP, no dma-buf MRs, no RDMA FLUSH): the ODP and
 * dma-buf paths fail naming the capability the device lacks, and access flags no path on it can
 * carry are refused in words.
 */
class DoctorMlx4Test {

    @TempDir
    Path tmp;
    Lab lab;
    RdmaTools tools;

    @BeforeEach
    void up() {
        lab = new Lab(tmp, 2);
        tools = lab.tools();
        tools.setUmemForTests(lab.core.umems());
    }

    @AfterEach
    void down() {
        lab.close();
    }

    private static String line(String out, String path) {
        return out.lines().filter(l -> l.trim().startsWith(path)).findFirst().orElseThrow(() -> new AssertionError(path + " in\n" + out));
    }

    @Test
    void theOdpAndDmabufPathsNameWhatMlx4Lacks() {
        long buf = lab.proc.mmap(1 << 16);
        String pid = String.valueOf(lab.proc.pid());
        String out = tools.doctor("-d", "mlx4_0", pid, String.valueOf(buf), "32K");
        System.out.println(out);
        assertTrue(out.contains("device mlx4_0: ODP no (implicit no; RC: none), dma-buf MRs no"), out);
        assertTrue(line(out, "pinned (ibv_reg_mr)").contains("YES"), out);
        assertTrue(line(out, "ODP explicit").contains("EOPNOTSUPP: mlx4_0 has no on-demand paging (odp_caps.general_caps lacks IBV_ODP_SUPPORT)"), out);
        assertTrue(line(out, "ODP implicit").contains("EOPNOTSUPP: mlx4_0 has no implicit ODP"), out);
        assertTrue(line(out, "dma-buf").contains("EOPNOTSUPP: mlx4_0's driver has no reg_user_mr_dmabuf"), out);
        assertTrue(line(out, "peer clients").contains("no peer-memory client is registered"), out);
        assertEquals(0, lab.proc.pinnedPages(), "nothing pinned");

        UsageException e = assertThrows(UsageException.class, () -> tools.doctor("-d", "mlx4_0", pid, String.valueOf(buf), "4096", "--access",
                "LOCAL_WRITE,HUGETLB"));
        assertTrue(e.getMessage().contains("--access HUGETLB: mlx4_0 has no on-demand paging"), e.getMessage());
        e = assertThrows(UsageException.class, () -> tools.doctor("-d", "mlx4_0", pid, String.valueOf(buf), "4096", "--access",
                "LOCAL_WRITE|FLUSH_GLOBAL"));
        assertTrue(e.getMessage().contains("--access FLUSH_GLOBAL: mlx4_0 has no RDMA FLUSH to global visibility"), e.getMessage());
    }
}

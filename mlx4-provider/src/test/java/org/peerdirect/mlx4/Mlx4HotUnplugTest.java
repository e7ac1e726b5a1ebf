package org.peerdirect.mlx4;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.hca.cx3.ifc.Mlx4Cmd;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.mlx4.core.Mlx4Dev;

/**
 * A surprise removal as the driver meets it: the function leaves the bus, the HCR reads all ones,
 * the command in hand fails with EIO naming the hot-unplug and every later one fails at once; the
 * removal path ({@code mlx4_remove_one} with the error state) gives every page back before the bus
 * detaches the domain, so the machine's audit is clean.
 */
class Mlx4HotUnplugTest {

    @TempDir
    Path tmp;

    @Test
    void aVanishedDeviceReadsAllOnesAndTheDriverLetsGo() {
        try (Lab lab = new Lab(tmp, 2)) {
            Mlx4Dev core = lab.devs.get(1).core();
            AtomicReference<KernelException> seen = new AtomicReference<>();
            // what Mlx4Driver's removal listener does, with a command of the driver's in between
            core.fn.addRemovalListener(() -> {
                seen.set(assertThrows(KernelException.class, () -> core.cmd.cmd(0, 0, 0, Mlx4Cmd.NOP)));
                lab.remove(1, true);
            });
            core.fn.remove();
            assertEquals(Errno.EIO, seen.get().errno());
            assertTrue(seen.get().getMessage().contains("all ones") || seen.get().getMessage().contains("gone"), seen.get().getMessage());
            assertTrue(core.cmd.gone(), "the driver knows the device is gone");
            KernelException later = assertThrows(KernelException.class, () -> core.cmd.cmd(0, 0, 0, Mlx4Cmd.NOP));
            assertEquals(Errno.EIO, later.errno());
            assertEquals(0, core.dma.live(), "every DMA page of the driver given back");
            // the other device goes on
            assertEquals(org.peerdirect.ib.core.verbs.IbvPortAttr.PORT_ACTIVE, lab.open(0).queryPort(1).state());
        }
    }
}

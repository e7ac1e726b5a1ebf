package org.peerdirect.kernel.jfr;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.kernel.dma.DmaDirection;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.iommu.IommuDomain;
import org.peerdirect.kernel.iommu.IommuFault;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.MmuIntervalNotifier;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.mm.PinnedPages;

import jdk.jfr.Recording;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordingFile;

/**
 * sim-kernel's JFR events as a recording shows them: an IOMMU fault with its domain, kind and
 * IOVA; an MMU interval notifier's invalidate callback with the process, the reason, the range
 * and its duration. Without a recording nothing is committed and the sites behave as before.
 */
class KernelEventsTest {

    @TempDir
    Path tmp;
    private Mm mm;
    private Iommu iommu;

    @AfterEach
    void down() {
        if (mm != null) {
            assertEquals(1, iommu.audit().faults(), "the one fault this test made, and no other");
            mm.close();
        }
    }

    private static List<RecordedEvent> recorded(Path file, String name) throws Exception {
        return RecordingFile.readAllEvents(file).stream().filter(e -> e.getEventType().getName().equals(name)).toList();
    }

    @Test
    void anIommuFaultAndANotifierInvalidationAreRecordedWithTheirFields() throws Exception {
        mm = new Mm(16 << 20, true, tmp.resolve("swap"), 8 << 20);
        iommu = new Iommu(mm);
        AddressSpace p = mm.createProcess("jfr-app");
        IommuDomain d = iommu.createDomain("0000:05:00.0");
        long a = p.mmap(2 * 4096);
        p.populate(a, 2 * 4096, true);
        int[] calls = new int[1];
        MmuIntervalNotifier n = p.insertNotifier(a, 2 * 4096, (nn, range, seq) -> {
            calls[0]++;
            return true;
        });
        PinnedPages pinned = p.pinUserPages(a, 4096, true);
        long iova = d.dmaMapSg(pinned.pfns(), DmaDirection.BIDIRECTIONAL);
        d.dmaUnmap(iova, 1);
        pinned.unpin(false);

        Path file = tmp.resolve("kernel.jfr");
        try (Recording r = new Recording()) {
            r.enable(KernelEvents.IommuFault.class);
            r.enable(KernelEvents.MmuNotifierInvalidate.class);
            r.start();
            assertThrows(IommuFault.class, () -> d.write(iova, java.lang.foreign.MemorySegment.ofArray(new byte[8]), 0, 8));
            p.munmap(a, 4096);
            r.stop();
            r.dump(file);
        }
        List<RecordedEvent> faults = recorded(file, "org.peerdirect.IommuFault");
        assertEquals(1, faults.size(), faults.toString());
        RecordedEvent f = faults.getFirst();
        assertEquals("0000:05:00.0", f.getString("domain"));
        assertEquals("NOT_MAPPED", f.getString("kind"));
        assertEquals(iova, f.getLong("iova"));
        assertTrue(f.getString("reason").contains("no mapping"), f.getString("reason"));
        assertTrue(f.getStackTrace() != null, "an IOMMU fault carries the stack of the DMA");

        List<RecordedEvent> inv = recorded(file, "org.peerdirect.MmuNotifierInvalidate");
        assertEquals(1, inv.size(), inv.toString());
        RecordedEvent e = inv.getFirst();
        assertEquals("jfr-app", e.getString("process"));
        assertEquals(p.pid(), e.getInt("pid"));
        assertEquals("UNMAP", e.getString("event"));
        assertEquals(a, e.getLong("startAddress"));
        assertEquals(a + 4096, e.getLong("endAddress"));
        assertEquals(n.toString(), e.getString("notifier"));
        assertEquals(1, e.getLong("sequence") & 1, "odd while the invalidation runs");
        assertEquals(1, calls[0], "the callback ran once, recorded around it");

        // not recording: the callback still runs, nothing is committed
        Path none = tmp.resolve("none.jfr");
        try (Recording r = new Recording()) {
            r.enable("jdk.ThreadSleep"); // a recording without this bundle's events
            r.disable(KernelEvents.MmuNotifierInvalidate.class);
            r.start();
            p.munmap(a + 4096, 4096);
            r.stop();
            r.dump(none);
        }
        assertEquals(2, calls[0]);
        assertEquals(List.of(), recorded(none, "org.peerdirect.MmuNotifierInvalidate"));
        n.remove();
        p.exit();
    }
}

package org.peerdirect.kernel.dma.coherent;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.iommu.IommuAudit;
import org.peerdirect.kernel.iommu.IommuDomain;
import org.peerdirect.kernel.mm.Mm;

/**
 * {@code dma_alloc_coherent} of one page and of a block ({@link DmaCoherentPages#alloc(int)}):
 * zeroed, one contiguous bus-address range the device reaches end to end and the CPU sees the
 * same bytes of, freed and unmapped by its owner or by {@link DmaCoherentPages#freeAll}; the
 * audit clean and every frame free after each test.
 */
class DmaCoherentPagesTest {

    @TempDir
    Path tmp;

    private Mm mm;
    private Iommu iommu;
    private IommuDomain domain;
    private DmaCoherentPages pages;

    @BeforeEach
    void machine() {
        mm = new Mm(16 << 20, true, tmp.resolve("swap"), 1 << 20);
        iommu = new Iommu(mm);
        domain = iommu.createDomain("dev0");
        pages = new DmaCoherentPages(mm, domain);
    }

    @AfterEach
    void audit() {
        IommuAudit a = iommu.audit();
        assertTrue(a.violationFree(), "audit: " + a);
        assertEquals(0, a.liveMappings(), "nothing left mapped: " + a);
        assertEquals(0, iommu.destroyDomain(domain), "no mapping leaked");
        assertEquals(mm.totalFrames(), mm.freeFrames(), "every frame free");
        mm.close();
    }

    @Test
    void aBlockIsZeroedContiguousForTheDeviceAndSharedWithTheCpu() {
        long free = mm.freeFrames();
        DmaCoherentPages.Page p = pages.alloc(4);
        assertEquals(16, p.pages());
        assertEquals(64 << 10, p.mem().byteSize());
        assertEquals(free - 16, mm.freeFrames(), "one block of 16 frames");
        assertEquals(16, pages.live(), "live counts 4 KiB pages");
        assertEquals(16, domain.mappedPages(), "the whole block mapped");
        for (long off = 0; off < p.mem().byteSize(); off += 8) {
            assertEquals(0, p.mem().get(ValueLayout.JAVA_LONG, off), "zeroed at " + off);
        }
        // the device writes across the whole range at its bus addresses; the CPU reads it in place
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment src = arena.allocate(p.mem().byteSize());
            for (long i = 0; i < src.byteSize(); i++) {
                src.set(ValueLayout.JAVA_BYTE, i, (byte) (i * 31 + 7));
            }
            domain.write(p.iova(), src, 0, src.byteSize());
            assertArrayEquals(src.toArray(ValueLayout.JAVA_BYTE), p.mem().toArray(ValueLayout.JAVA_BYTE));
            // and the CPU's bytes reach the device: the last page's last word
            p.mem().set(ValueLayout.JAVA_LONG, p.mem().byteSize() - 8, 0x1122_3344_5566_7788L);
            MemorySegment dst = arena.allocate(8);
            domain.read(p.iova() + p.mem().byteSize() - 8, dst, 0, 8);
            assertEquals(0x1122_3344_5566_7788L, dst.get(ValueLayout.JAVA_LONG, 0));
        }
        pages.free(p);
        assertEquals(0, pages.live());
        assertEquals(0, domain.mappedPages(), "unmapped with its owner's free");
        assertEquals(free, mm.freeFrames(), "the block's frames back");
        pages.free(p); // a second free is nothing (the page is no longer live)
        assertEquals(free, mm.freeFrames());
    }

    @Test
    void freeAllTakesBlocksAndPagesAndLeavesHeldFramesToTheirOwner() {
        long free = mm.freeFrames();
        pages.alloc(1);
        pages.alloc();
        DmaCoherentPages.Page held = pages.allocHeld();
        assertEquals(4, pages.live());
        pages.freeAll();
        assertEquals(0, pages.live());
        assertEquals(0, domain.mappedPages(), "nothing mapped once the driver went");
        assertEquals(free - 1, mm.freeFrames(), "only the held page's frame is still its owner's");
        assertEquals(0, held.mem().get(ValueLayout.JAVA_LONG, 0), "and still readable");
        pages.free(held);
        assertEquals(free, mm.freeFrames());
    }

    @Test
    void anOrderOutsideTheBuddyAllocatorsIsRefusedNamingIt() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> pages.alloc(11));
        assertTrue(e.getMessage().contains("order 11"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> pages.alloc(-1));
        assertEquals(0, pages.live());
    }
}

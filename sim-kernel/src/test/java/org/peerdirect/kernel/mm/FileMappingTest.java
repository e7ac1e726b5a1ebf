package org.peerdirect.kernel.mm;

import org.peerdirect.kernel.mm.internal.PhysicalMemory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.peerdirect.kernel.mm.Mm.PAGE_SIZE;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class FileMappingTest {

    @TempDir
    Path tmp;

    private Mm mm;

    @AfterEach
    void close() {
        mm.close();
        assertEquals(PhysicalMemory.of(mm).nrFrames(), PhysicalMemory.of(mm).freeFrames(), "no frame leaked");
    }

    private Path file(int pages) throws Exception {
        ByteBuffer b = ByteBuffer.allocate(pages * (int) PAGE_SIZE).order(ByteOrder.nativeOrder());
        for (int i = 0; i < pages; i++) {
            b.putLong(i * (int) PAGE_SIZE, 1000 + i);
        }
        Path f = tmp.resolve("data.bin");
        Files.write(f, b.array());
        return f;
    }

    private static long fileLong(Path f, long pos) throws Exception {
        return ByteBuffer.wrap(Files.readAllBytes(f)).order(ByteOrder.nativeOrder()).getLong((int) pos);
    }

    @Test
    void faultsReadTheFileAndWritebackReachesIt() throws Exception {
        mm = new Mm(16 << 20, true, tmp.resolve("swap"), 4 << 20);
        AddressSpace p = mm.createProcess("f");
        Path f = file(8);
        long a = p.mmapFile(0, f, 2 * PAGE_SIZE, 4 * PAGE_SIZE, Vma.PROT_READ | Vma.PROT_WRITE, null);
        assertEquals(1002, p.readLong(a), "page 0 of the mapping is page 2 of the file");
        assertEquals(1005, p.readLong(a + 3 * PAGE_SIZE));
        assertTrue(p.maps().get(0).contains("rw-s 00002000") && p.maps().get(0).contains("data.bin"), p.maps().toString());

        p.writeLong(a + 8, 77);
        assertEquals(0, fileLong(f, 2 * PAGE_SIZE + 8), "not written back yet");
        assertEquals(1, p.msync(a, 4 * PAGE_SIZE), "one dirty page");
        assertEquals(77, fileLong(f, 2 * PAGE_SIZE + 8));
        assertEquals(0, p.msync(a, 4 * PAGE_SIZE), "clean after msync");

        p.writeLong(a + PAGE_SIZE + 16, 88);
        assertEquals(3, p.madvise(a, 4 * PAGE_SIZE, AddressSpace.Advice.MADV_PAGEOUT), "the three resident file pages are dropped, not swapped");
        assertEquals(0, p.swappedPages());
        assertEquals(88, fileLong(f, 3 * PAGE_SIZE + 16), "page-out wrote the dirty page back");
        assertEquals(88, p.readLong(a + PAGE_SIZE + 16), "and the next fault reads it again");

        p.writeLong(a + 3 * PAGE_SIZE, 99);
        p.munmap(a, 4 * PAGE_SIZE);
        assertEquals(99, fileLong(f, 5 * PAGE_SIZE), "munmap writes dirty pages back");
    }

    @Test
    void pagesPastTheEndOfTheFileAreSigbusAndWritesNeverGrowIt() throws Exception {
        mm = new Mm(16 << 20, true, tmp.resolve("swap"), 4 << 20);
        AddressSpace p = mm.createProcess("f");
        Path f = tmp.resolve("short.bin");
        Files.write(f, new byte[100]);
        long a = p.mmapFile(0, f, 0, 2 * PAGE_SIZE, Vma.PROT_READ | Vma.PROT_WRITE, "short");
        p.writeLong(a + 200, 5); // inside the last (partial) page: allowed, never reaches the file
        SegmentationFault e = assertThrows(SegmentationFault.class, () -> p.readLong(a + PAGE_SIZE));
        assertTrue(e.getMessage().contains("SIGBUS"), e.getMessage());
        p.munmap(a, 2 * PAGE_SIZE);
        assertEquals(100, Files.size(f));
        assertThrows(KernelException.class, () -> p.mmapFile(0, f, 1, PAGE_SIZE, Vma.PROT_READ, null));
        assertThrows(KernelException.class, () -> p.mmapFile(0, tmp.resolve("missing"), 0, PAGE_SIZE, Vma.PROT_READ, null));
    }

    @Test
    void writablePinsAreRefusedReadPinsWorkAndNotifiersSeeWriteback() throws Exception {
        mm = new Mm(16 << 20, true, tmp.resolve("swap"), 4 << 20);
        AddressSpace p = mm.createProcess("f");
        Path f = file(4);
        long a = p.mmapFile(0, f, 0, 4 * PAGE_SIZE, Vma.PROT_READ | Vma.PROT_WRITE, null);
        KernelException e = assertThrows(KernelException.class, () -> p.pinUserPages(a, PAGE_SIZE, true));
        assertEquals(KernelException.Errno.EFAULT, e.errno());
        assertEquals(0, p.pinnedPages());
        PinnedPages ro = p.pinUserPages(a, PAGE_SIZE, false);
        assertEquals(1000, PhysicalMemory.of(mm).readLong(ro.pfn(0), 0));
        ro.unpin(false);

        List<MmuNotifierEvent> seen = new ArrayList<>();
        MmuIntervalNotifier n = p.insertNotifier(a, 4 * PAGE_SIZE, (nn, r, seq) -> {
            nn.setSeq(seq);
            seen.add(r.event());
            return true;
        });
        p.madvise(a, PAGE_SIZE, AddressSpace.Advice.MADV_PAGEOUT);
        assertEquals(List.of(MmuNotifierEvent.CLEAR), seen);
        n.remove();
    }
}

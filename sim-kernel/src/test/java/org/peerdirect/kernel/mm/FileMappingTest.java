package org.peerdirect.kernel.mm;

import org.peerdirect.kernel.mm.internal.PhysicalMemory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.peerdirect.kernel.mm.Mm.PAGE_SIZE;

import java.nio.ByteBuffer;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
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
    private static void writeFileLong(Path f, long pos, long value) throws Exception {
        try (FileChannel ch = FileChannel.open(f, StandardOpenOption.WRITE)) {
            ch.write(ByteBuffer.allocate(8).order(ByteOrder.nativeOrder()).putLong(0, value), pos);
        }
    }

    /**
     * Review of the split: msync cleared the dirty bit but left the page writable and told no
     * notifier, so a device mirroring the page kept writing to it and nothing made it dirty again:
     * the next msync lost those writes. Writeback write-protects as it cleans, notifiers first.
     */
    @Test
    void msyncWriteProtectsWhatItCleansAndTellsNotifiersFirst() throws Exception {
        mm = new Mm(16 << 20, true, tmp.resolve("swap"), 4 << 20);
        AddressSpace p = mm.createProcess("f");
        Path f = file(4);
        long a = p.mmapFile(0, f, 0, 4 * PAGE_SIZE, Vma.PROT_READ | Vma.PROT_WRITE, null);
        List<MmuNotifierRange> seen = new ArrayList<>();
        MmuIntervalNotifier n = p.insertNotifier(a, 4 * PAGE_SIZE, (nn, r, seq) -> {
            nn.setSeq(seq);
            seen.add(r);
            return true;
        });
        p.writeLong(a + PAGE_SIZE + 8, 77);
        p.readLong(a + 2 * PAGE_SIZE); // present and clean: nothing to write, nothing to tell
        HmmRange mirror = new HmmRange(n, a, a + 4 * PAGE_SIZE, 0);
        mirror.notifierSeq = n.readBegin();
        p.hmmRangeFault(mirror);
        assertTrue((mirror.hmmPfns[1] & HmmRange.HMM_PFN_WRITE) != 0, "the device may write the dirty page");

        long seq = n.readBegin();
        assertEquals(1, p.msync(a, 4 * PAGE_SIZE));
        assertEquals(77, fileLong(f, PAGE_SIZE + 8));
        assertEquals(1, seen.size(), seen::toString);
        assertEquals(MmuNotifierEvent.PROTECTION_PAGE, seen.get(0).event());
        assertTrue(seen.get(0).start() <= a + PAGE_SIZE && seen.get(0).end() >= a + 2 * PAGE_SIZE, seen::toString);
        assertTrue(n.readRetry(seq), "the device must look the page up again");
        HmmRange after = new HmmRange(n, a, a + 4 * PAGE_SIZE, 0);
        after.notifierSeq = n.readBegin();
        p.hmmRangeFault(after);
        assertTrue((after.hmmPfns[1] & HmmRange.HMM_PFN_VALID) != 0, "the page stays mapped");
        assertEquals(0, after.hmmPfns[1] & HmmRange.HMM_PFN_WRITE, "but no longer writable: a write must fault");
        assertEquals(0, p.msync(a, 4 * PAGE_SIZE), "clean after msync");
        assertEquals(1, seen.size(), "nothing dirty: no invalidation");

        // a CPU write faults and dirties the page again: the next msync writes it
        p.writeLong(a + PAGE_SIZE + 8, 78);
        assertEquals(1, p.msync(a, 4 * PAGE_SIZE));
        assertEquals(78, fileLong(f, PAGE_SIZE + 8));

        // so does a device write: it faults the page writable through hmm_range_fault first
        HmmRange w = new HmmRange(n, a + PAGE_SIZE, a + 2 * PAGE_SIZE, HmmRange.HMM_PFN_REQ_FAULT | HmmRange.HMM_PFN_REQ_WRITE);
        w.notifierSeq = n.readBegin();
        p.hmmRangeFault(w);
        assertTrue((w.hmmPfns[0] & HmmRange.HMM_PFN_WRITE) != 0);
        PhysicalMemory.of(mm).frame(HmmRange.pfn(w.hmmPfns[0])).set(ValueLayout.JAVA_LONG_UNALIGNED, 8, 79L); // the DMA write
        assertEquals(1, p.msync(a, 4 * PAGE_SIZE));
        assertEquals(79, fileLong(f, PAGE_SIZE + 8));
        n.remove();
    }

    /**
     * Review of the split: msync skipped dirty pages whose mapping was made PROT_NONE, while
     * munmap and exit wrote them. Writeback goes by the page's dirtiness, not its protection.
     */
    @Test
    void msyncWritesDirtyPagesOfProtNoneMappings() throws Exception {
        mm = new Mm(16 << 20, true, tmp.resolve("swap"), 4 << 20);
        AddressSpace p = mm.createProcess("f");
        Path f = file(4);
        long a = p.mmapFile(0, f, 0, 4 * PAGE_SIZE, Vma.PROT_READ | Vma.PROT_WRITE, null);
        p.writeLong(a + 8, 55);
        p.writeLong(a + PAGE_SIZE + 8, 56);
        p.mprotect(a, 4 * PAGE_SIZE, Vma.PROT_NONE);
        assertEquals(2, p.msync(a, 4 * PAGE_SIZE));
        assertEquals(55, fileLong(f, 8));
        assertEquals(56, fileLong(f, PAGE_SIZE + 8));
        assertEquals(0, p.msync(a, 4 * PAGE_SIZE), "clean after msync");

        // clean now: munmap does not write the page again over a later change of the file
        writeFileLong(f, 8, 66);
        p.mprotect(a, 4 * PAGE_SIZE, Vma.PROT_READ | Vma.PROT_WRITE);
        assertEquals(55, p.readLong(a + 8), "the page still holds what was written back");
        p.writeLong(a + PAGE_SIZE + 8, 57); // this one is dirty again
        p.munmap(a, 4 * PAGE_SIZE);
        assertEquals(66, fileLong(f, 8));
        assertEquals(57, fileLong(f, PAGE_SIZE + 8));
        assertFalse(p.exited());
    }
}

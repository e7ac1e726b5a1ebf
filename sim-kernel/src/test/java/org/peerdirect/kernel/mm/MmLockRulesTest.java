package org.peerdirect.kernel.mm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assumptions.assumeTrue;
import static org.peerdirect.kernel.mm.Mm.PAGE_SIZE;

import java.nio.file.Path;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The lock rules of {@link AddressSpace}'s helpers are asserted: a helper called without the
 * lock its Javadoc requires fails at once (with -ea, as the build runs tests) instead of racing.
 */
class MmLockRulesTest {

    @TempDir
    Path tmp;

    private Mm mm;
    private AddressSpace p;
    private long a;

    @BeforeEach
    void setUp() {
        boolean ea = false;
        assert ea = true;
        assumeTrue(ea, "assertions are disabled");
        mm = new Mm(4 << 20, true, tmp.resolve("swap"), 1 << 20);
        p = mm.createProcess("locks");
        a = p.mmap(4 * PAGE_SIZE);
        p.writeLong(a, 42);
    }

    @AfterEach
    void close() {
        if (mm != null) {
            mm.close();
        }
    }

    @Test
    void lookupsNeedTheMmapLock() {
        assertThrows(AssertionError.class, () -> Mmap.findVma(p, a));
        assertThrows(AssertionError.class, () -> Memory.resolve(p, a, false));
        long stamp = p.mmapLock.readLock();
        try {
            assertEquals(a, Mmap.findVma(p, a).start());
        } finally {
            p.mmapLock.unlockRead(stamp);
        }
    }

    @Test
    void changesNeedTheWriteLock() {
        Vma v = p.vmas().get(0);
        long stamp = p.mmapLock.readLock();
        try {
            assertThrows(AssertionError.class, () -> Memory.zapPageRange(p, v));
            assertThrows(AssertionError.class, () -> p.invalidate(a, a + PAGE_SIZE, MmuNotifierEvent.CLEAR, () -> { }));
        } finally {
            p.mmapLock.unlockRead(stamp);
        }
        assertEquals(42, p.readLong(a), "the refused calls changed nothing");
        assertEquals(1, p.rssPages());
    }
}

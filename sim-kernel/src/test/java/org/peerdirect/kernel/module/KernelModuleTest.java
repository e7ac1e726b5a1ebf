package org.peerdirect.kernel.module;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;
import org.peerdirect.kernel.mm.KernelException;

class KernelModuleTest {

    @Test
    void rmmodIsRefusedWhileAReferenceIsHeldAndNoReferenceIsTakenOnceGoing() {
        KernelModule m = new KernelModule("nvidia_peermem");
        assertEquals(KernelModule.State.LIVE, m.state());
        assertTrue(m.tryModuleGet());
        m.moduleGet();
        assertEquals(2, m.refcount());
        assertFalse(m.tryStop(), "in use: EBUSY");
        assertEquals(KernelModule.State.LIVE, m.state(), "a refused rmmod changes nothing");
        m.modulePut();
        m.modulePut();
        assertThrows(IllegalStateException.class, m::modulePut, "a put without a get is a bug, not a negative count");
        assertEquals(0, m.refcount());
        assertTrue(m.tryStop());
        assertEquals(KernelModule.State.GOING, m.state());
        assertFalse(m.tryModuleGet(), "a going module gives no new reference");
        assertFalse(m.tryStop(), "going already");
        m.stopFailed();
        assertEquals(KernelModule.State.LIVE, m.state());
        assertThrows(IllegalStateException.class, m::stopFailed, "LIVE already: no such transition");
        assertTrue(m.tryModuleGet());
        m.modulePut();
    }

    @Test
    void badNamesAreRefused() {
        for (String bad : new String[] {"", "a/b", "with blank", "x".repeat(56)}) {
            KernelException e = assertThrows(KernelException.class, () -> new KernelModule(bad));
            assertEquals(KernelException.Errno.EINVAL, e.errno());
        }
    }

    /**
     * Users taking and dropping references race an rmmod that stops and, now and then, fails and
     * goes LIVE again: no reference is ever granted while the module is going, and every stop
     * that succeeded found the count at zero.
     */
    @Test
    void referencesRacingRmmodNeverOverlapAStop() throws Exception {
        KernelModule m = new KernelModule("racer");
        AtomicBoolean stopped = new AtomicBoolean();
        AtomicBoolean done = new AtomicBoolean();
        AtomicReference<String> broken = new AtomicReference<>();
        AtomicLong gets = new AtomicLong();
        Thread[] users = new Thread[2];
        for (int t = 0; t < users.length; t++) {
            users[t] = Thread.ofPlatform().start(() -> {
                while (!done.get()) {
                    if (m.tryModuleGet()) {
                        gets.incrementAndGet();
                        if (stopped.get()) {
                            broken.compareAndSet(null, "a reference was granted while the module was going");
                        }
                        m.modulePut();
                    }
                }
            });
        }
        long stops = 0;
        for (int i = 0; i < 200_000 && broken.get() == null; i++) {
            if (m.tryStop()) {
                stops++;
                stopped.set(true);
                if (m.refcount() != 0) {
                    broken.compareAndSet(null, "stopped with " + m.refcount() + " references");
                }
                stopped.set(false);
                m.stopFailed();
            }
        }
        done.set(true);
        for (Thread u : users) {
            u.join(10_000);
            assertFalse(u.isAlive());
        }
        assertEquals(null, broken.get());
        assertTrue(stops > 0 && gets.get() > 0, "both sides won sometimes: stops " + stops + ", gets " + gets.get());
        assertEquals(0, m.refcount());
    }
}

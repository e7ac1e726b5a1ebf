package org.peerdirect.ib.core.impl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.annotation.Annotation;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.example.peermem.ExamplePeerMemory;
import org.peerdirect.ib.core.testing.Rig;
import org.peerdirect.ib.core.testing.TestDmaDevice.Mr;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.peermem.PeerMemoryClient;
import org.peerdirect.peermem.PeerMemoryRegistration;

/**
 * The whiteboard follows a client's {@value PeerMemoryClient#INVALIDATION_PROPERTY} service
 * property (issue 45 item 4): a changed flavour unregisters the client, waiting for its MRs as
 * rmmod does and logging them, then registers it again with the new flavour.
 */
class PeerMemoryRegistryServiceTest {

    static final int RW = IbAccess.LOCAL_WRITE | IbAccess.REMOTE_READ | IbAccess.REMOTE_WRITE;
    static final String INV = PeerMemoryClient.INVALIDATION_PROPERTY;

    @TempDir
    Path tmp;
    Rig rig;
    PeerMemoryRegistryService registry;

    @BeforeEach
    void up() {
        rig = new Rig(tmp);
        registry = new PeerMemoryRegistryService(rig.controller, new PeerMemoryRegistryService.Config() {
            @Override
            public Class<? extends Annotation> annotationType() {
                return PeerMemoryRegistryService.Config.class;
            }

            @Override
            public long unregister_log_interval_ms() {
                return 20;
            }

            @Override
            public long close_grace_ms() {
                return 100;
            }
        });
    }

    @AfterEach
    void down() {
        registry.deactivate(); // ends the registry's thread
        rig.close();
    }

    /** Waits (bounded) until the client named {@code name} is brokered with flavour {@code invalidation}. */
    private void awaitRegistered(String name, boolean invalidation) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (rig.controller.clients().stream().noneMatch(r -> r.name().equals(name) && r.invalidationRequired() == invalidation)) {
            assertTrue(System.nanoTime() < deadline, name + " registered " + (invalidation ? "with" : "without") + " invalidation: "
                    + rig.controller.knownClients() + " " + rig.warnings);
            Thread.onSpinWait();
        }
    }

    private PeerMemoryRegistration registered(String name) {
        List<PeerMemoryRegistration> found = rig.controller.clients().stream().filter(r -> r.name().equals(name)).toList();
        assertEquals(1, found.size(), "brokered once: " + rig.controller.clients());
        return found.get(0);
    }

    @Test
    void aFlavourChangeWaitsForTheMrsThenRegistersAgainWithTheNewFlavour() throws Exception {
        ExamplePeerMemory mem = rig.client("flavour", 4096, false);
        registry.addClient(mem, Map.of(INV, true));
        assertTrue(registered("flavour").invalidationRequired());
        int pid = rig.proc.pid();
        long va = mem.alloc(pid, 1 << 16);
        Mr live = rig.dev.reg(rig.proc, va, 8192, RW);

        // the thread delivering the change (Configuration Admin's) is not held by the live MR
        org.junit.jupiter.api.Assertions.assertTimeoutPreemptively(java.time.Duration.ofSeconds(10),
                () -> registry.updatedClient(mem, Map.of(INV, false)));
        assertTrue(rig.controller.clients().isEmpty(), "the client left brokering at once");
        KernelException gone = assertThrows(KernelException.class, () -> rig.dev.reg(rig.proc, va + 8192, 4096, RW),
                "no new MR gets the old flavour while the change waits");
        assertEquals(Errno.EFAULT, gone.errno(), gone.getMessage());
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (rig.warnings.stream().noneMatch(w -> w.contains("flavour: unregister waits for 1 registration") && w.contains("ticket 0"))) {
            assertTrue(System.nanoTime() < deadline, "the wait names the MR holding the client: " + rig.warnings);
            Thread.onSpinWait();
        }
        assertTrue(rig.controller.clients().isEmpty(), "not registered again while the MR lives");
        rig.dev.dereg(live);
        awaitRegistered("flavour", false);
        // the registry's thread logs the re-registration after registering (CI saw the client before the line)
        deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (rig.warnings.stream().noneMatch(w -> w.contains("flavour registered again without invalidation"))) {
            assertTrue(System.nanoTime() < deadline, "the re-registration is logged: " + rig.warnings);
            Thread.onSpinWait();
        }

        // without invalidation, freeing registered memory is refused instead of invalidating the MR
        Mr kept = rig.dev.reg(rig.proc, va, 8192, RW);
        KernelException busy = assertThrows(KernelException.class, () -> mem.free(pid, va));
        assertEquals(Errno.EBUSY, busy.errno(), busy.getMessage());
        assertEquals(0, kept.invalidations());
        rig.dev.dereg(kept);

        // and back: no MR, so at once; freeing now invalidates
        registry.updatedClient(mem, Map.of(INV, "true"));
        assertTrue(registered("flavour").invalidationRequired(), "no MR to wait for: in force when the change returns");
        Mr inv = rig.dev.reg(rig.proc, va, 8192, RW);
        mem.free(pid, va);
        assertEquals(1, inv.invalidations(), "the free invalidated the MR");
        rig.dev.dereg(inv);
        registry.removeClient(mem);
        assertTrue(rig.controller.knownClients().isEmpty());
    }

    @Test
    void anUnrelatedPropertyChangeKeepsTheRegistration() {
        ExamplePeerMemory mem = rig.client("same", 4096, false);
        registry.addClient(mem, Map.of(INV, true));
        PeerMemoryRegistration before = registered("same");
        long va = mem.alloc(rig.proc.pid(), 1 << 16);
        Mr live = rig.dev.reg(rig.proc, va, 8192, RW);
        registry.updatedClient(mem, Map.of(INV, true, "region.size", 4096L)); // would block if it re-registered
        assertSame(before, registered("same"));
        rig.dev.dereg(live);
        mem.free(rig.proc.pid(), va);
        registry.removeClient(mem);
    }

    /**
     * Flavour flipped twice while the first change waits for an MR: the client comes back once,
     * with the flavour asked for last; a service leaving during the wait is not registered again.
     */
    @Test
    void theLastFlavourAskedWinsAndADepartureDuringTheWaitRegistersNothing() throws Exception {
        ExamplePeerMemory mem = rig.client("flip", 4096, false);
        registry.addClient(mem, Map.of(INV, true));
        long va = mem.alloc(rig.proc.pid(), 1 << 16);
        Mr live = rig.dev.reg(rig.proc, va, 8192, RW);
        registry.updatedClient(mem, Map.of(INV, false));
        registry.updatedClient(mem, Map.of(INV, true)); // back, while the first change waits
        assertTrue(rig.controller.clients().isEmpty());
        rig.dev.dereg(live);
        awaitRegistered("flip", true);
        assertEquals(1, rig.controller.knownClients().size(), "registered once: " + rig.controller.knownClients());

        Mr held = rig.dev.reg(rig.proc, va, 8192, RW);
        registry.updatedClient(mem, Map.of(INV, false));
        Thread leaving = Thread.ofPlatform().start(() -> registry.removeClient(mem)); // the bundle stops: waits for the MR too
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (leaving.getState() != Thread.State.WAITING && leaving.getState() != Thread.State.TIMED_WAITING) {
            assertTrue(System.nanoTime() < deadline && leaving.isAlive(), "removeClient waits for the MR");
            Thread.onSpinWait();
        }
        rig.dev.dereg(held);
        leaving.join(10_000);
        assertFalse(leaving.isAlive());
        registry.deactivate(); // drains the registry's thread: the re-registration found the service gone
        assertTrue(rig.warnings.stream().noneMatch(w -> w.contains("flip registered again without invalidation")),
                "nothing registered after the service left: " + rig.warnings);
        assertTrue(rig.controller.knownClients().isEmpty(), rig.controller.knownClients().toString());
        mem.free(rig.proc.pid(), va);
    }

    @Test
    void aClientRefusedAtArrivalIsTriedAgainWhenItsPropertiesChange() {
        ExamplePeerMemory first = rig.client("twin", 4096, false);
        ExamplePeerMemory second = rig.client("twin", 4096, false);
        registry.addClient(first, Map.of(INV, true));
        registry.addClient(second, Map.of(INV, true));
        assertTrue(rig.warnings.stream().anyMatch(w -> w.contains("refused") && w.contains("already registered")), rig.warnings.toString());
        registry.removeClient(first);
        registry.updatedClient(second, Map.of(INV, false));
        assertFalse(registered("twin").invalidationRequired());
        registry.removeClient(second);
    }
}

package org.peerdirect.mlx5.core;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;

import org.peerdirect.hca.cx4.ifc.InitSeg;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * One function's health ({@code health.c}): the poll of the initialization segment's health
 * counter and syndrome every {@code health_poll_interval} ({@code poll_health}), and the fatal
 * error state ({@code mlx5_enter_error_state}): the verdict recorded, every command waiter woken
 * (each sees the device dead), and the listeners told ({@code MLX5_DEV_EVENT_SYS_ERROR}, on which
 * mlx5_ib unregisters its device). A removal ({@code pci_channel_offline}) is found by the same
 * poll.
 *
 * <p>Threads and locks: the poll runs on its own platform thread ({@code "<dev>-health"}); it
 * alone writes {@link #misses} and {@link #lastCounter}. {@link #dead} is volatile and set once per
 * load (before the listeners run, so {@link #awaitDead} misses no verdict). {@link #lock} guards
 * {@link #nextPoll} and {@link #gen}; the core takes it after its own monitor, never the other way.
 *
 * @see <a href="https://elixir.bootlin.com/linux/latest/source/drivers/net/ethernet/mellanox/mlx5/core/health.c">health.c</a>
 */
final class Mlx5Health {

    /** {@code MAX_MISSES}: health polls with a stuck counter before the device is declared dead. */
    static final int MAX_MISSES = 3;

    private final String name;
    private final PciFunction fn;
    private final CmdIf cmd;
    /** The poll interval now (the core's settings, which Configuration Admin may change). */
    private final LongSupplier pollMillis;
    private final List<Runnable> deadListeners = new CopyOnWriteArrayList<>();
    /** Why the device is dead (health poll, removal), or null. */
    private volatile String dead;
    private ScheduledExecutorService poller;
    private int lastCounter = -1;
    /** Written by the health thread; volatile for {@link #summary}. */
    private volatile int misses;
    /** Guards {@link #nextPoll} and {@link #gen}. */
    private final Object lock = new Object();
    private ScheduledFuture<?> nextPoll;
    /** The poll chain that may go on: a chain of an older generation (a changed interval) ends. */
    private long gen;

    Mlx5Health(String name, PciFunction fn, CmdIf cmd, LongSupplier pollMillis) {
        this.name = name;
        this.fn = fn;
        this.cmd = cmd;
        this.pollMillis = pollMillis;
    }

    /** Why the device is dead, or null. */
    String deadReason() {
        return dead;
    }

    /** {@code mlx5_start_health_poll}: a fresh poll chain (a verdict of an earlier load stays: a dead device stays dead). */
    synchronized void start() {
        lastCounter = -1;
        misses = 0;
        ScheduledExecutorService h = Executors.newSingleThreadScheduledExecutor(r -> Thread.ofPlatform().daemon().name(name + "-health").unstarted(r));
        poller = h;
        long g;
        synchronized (lock) {
            g = ++gen;
        }
        schedule(h, g);
    }

    /** {@code mlx5_stop_health_poll}: the poller shut down and waited for (bounded). */
    void stop() {
        ScheduledExecutorService h;
        synchronized (this) {
            h = poller;
            poller = null;
        }
        if (h != null) {
            h.shutdownNow();
            try {
                h.awaitTermination(10, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /**
     * A new interval, applied in place: the pending poll is cancelled and a new chain scheduled
     * at the interval {@link #pollMillis} gives now. Nothing when the poll is stopped.
     */
    void restart() {
        ScheduledExecutorService h;
        synchronized (this) {
            h = poller;
        }
        if (h != null) {
            long g;
            synchronized (lock) {
                g = ++gen;
                if (nextPoll != null) {
                    nextPoll.cancel(false);
                }
            }
            schedule(h, g);
        }
    }

    /** Schedules the next poll of chain {@code g} after the interval set now, unless a newer chain replaced it. */
    private void schedule(ScheduledExecutorService h, long g) {
        synchronized (lock) {
            if (g != gen) {
                return;
            }
            try {
                nextPoll = h.schedule(() -> {
                    poll();
                    schedule(h, g);
                }, pollMillis.getAsLong(), TimeUnit.MILLISECONDS);
            } catch (RejectedExecutionException stopped) {
                // stop() shut the poller down
            }
        }
    }

    /** {@code poll_health}: a vanished function, a fatal syndrome or a counter stuck for {@link #MAX_MISSES} polls. */
    private void poll() {
        if (dead != null) {
            return;
        }
        if (!fn.present()) {
            enterErrorState("PCI channel offline (the function is gone)");
            return;
        }
        int synd = syndrome();
        if (synd != 0) {
            enterErrorState(String.format("firmware fatal error, health syndrome 0x%x", synd));
            return;
        }
        int counter = fn.read32be(0, InitSeg.HEALTH_COUNTER) & 0xff_ffff;
        if (counter == lastCounter) {
            if (++misses >= MAX_MISSES) {
                enterErrorState("device's health compromised - reached miss count (health counter stuck at " + counter + ")");
            }
        } else {
            misses = 0;
        }
        lastCounter = counter;
    }

    /** {@code health.synd}: the byte at 0x23d, read as the 32-bit register it sits in (bits 23:16). */
    private int syndrome() {
        return fn.read32be(0, InitSeg.HEALTH_SYND & ~3L) >>> 16 & 0xff;
    }

    /**
     * {@code mlx5_enter_error_state}: the verdict first (every later command fails at once), then
     * every command waiter woken, then the listeners, each failure logged and the rest told.
     */
    private void enterErrorState(String reason) {
        dead = reason;
        System.getLogger("org.peerdirect.mlx5").log(System.Logger.Level.ERROR, name + ": " + reason);
        cmd.complete(-1); // wake every waiter: each sees the device dead
        for (Runnable r : deadListeners) { // mlx5_ib's event: the IB device is unregistered (its users disassociated)
            try {
                r.run();
            } catch (RuntimeException e) {
                System.getLogger("org.peerdirect.mlx5").log(System.Logger.Level.WARNING, name + ": dead listener failed", e);
            }
        }
    }

    void addDeadListener(Runnable r) {
        deadListeners.add(r);
    }

    void removeDeadListener(Runnable r) {
        deadListeners.remove(r);
    }

    /**
     * Waits until the poll (or a removal) has declared the device dead, at most {@code millis};
     * true when it is dead. The listener is added before {@link #dead} is read, and
     * {@link #enterErrorState} sets the field before it runs the listeners, so no verdict is missed.
     */
    boolean awaitDead(long millis) throws InterruptedException {
        CountDownLatch found = new CountDownLatch(1);
        Runnable r = found::countDown;
        addDeadListener(r);
        try {
            return dead != null || found.await(millis, TimeUnit.MILLISECONDS);
        } finally {
            removeDeadListener(r);
        }
    }

    /** {@code mlx5:health}'s line: the verdict ({@code up} says healthy or down when there is none), counter, syndrome, misses. */
    String summary(boolean up) {
        String d = dead;
        if (!fn.present()) {
            return name + ": function gone";
        }
        int counter = fn.read32be(0, InitSeg.HEALTH_COUNTER) & 0xff_ffff;
        return String.format("%s: %s; health counter %d, syndrome 0x%x, poll every %d ms, miss count %d/%d", name,
                d == null ? (up ? "healthy" : "down") : "DEAD (" + d + ")", counter, syndrome(), pollMillis.getAsLong(), misses, MAX_MISSES);
    }
}

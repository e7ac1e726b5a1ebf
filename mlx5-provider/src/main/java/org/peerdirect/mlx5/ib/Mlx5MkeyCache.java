package org.peerdirect.mlx5.ib;

import java.lang.foreign.MemorySegment;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

import org.peerdirect.hca.cx4.ifc.Mkey;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.mlx5.core.Mlx5CoreDev;

/**
 * mlx5_ib's mkey cache ({@code drivers/infiniband/hw/mlx5/mr.c}, {@code struct mlx5_mkey_cache}):
 * free UMR-enabled mkeys kept by {@code (access mode, unchangeable access flags, ndescs)}
 * ({@code struct mlx5r_cache_rb_key}) so a registration enables one by UMR instead of creating
 * one by command, and a deregistration revokes it by UMR and keeps it.
 *
 * <p>The kernel's rules, kept:
 * <ul>
 * <li>persistent MTT entries for {@code ndescs = 4 << i}, {@code i = 0..}{@link #MAX_ORDER}
 * (16, {@code MLX5_MAX_UMR_SHIFT}: the model has no {@code umr_extended_translation_offset});</li>
 * <li>lookup ({@code mkey_cache_ent_from_rb_key}): the exact key, else the smallest entry with more
 * descriptors whose other fields match and whose {@code ndescs <= max(2 × requested, 4)}; no entry
 * → the caller creates the mkey by command and it is still cacheable by its key;</li>
 * <li>a hit pops an mkey; a miss creates one synchronously and counts {@code miss};</li>
 * <li>each entry has a {@code limit} (low water; 2 × limit the high water): below it, background
 * work refills to the high water; above the high water, mkeys are destroyed only after the entry
 * saw no additions for {@code rel_timeout} ({@link Settings#relTimeoutMillis});</li>
 * <li>dereg stores the revoked mkey in the entry of its key, creating a temporary entry when there
 * is none; temporary entries are destroyed after 30 s without additions;</li>
 * <li>peer MRs are never taken from the cache (the caller's rule).</li>
 * </ul>
 * The key's access flags are the rights no UMR sets ({@code get_unchangeable_access_flags}): on
 * the model the FLUSH rights ({@link Mlx5Mr#UMR_UNCHANGEABLE}; {@code umr_modify_atomic_disabled}
 * is 0, so atomics are changeable). Persistent entries have none, so an MR with one is created
 * by command, keyed by them, and its mkey goes to a temporary entry at dereg, as in the kernel;
 * a cache mkey created for such an entry carries them from its creation.
 *
 * <p>Limits start at 0: upstream Linux removed the profile's pre-filled limits (the MR-cache
 * profile mask is gone), so the cache fills from deregistrations and from limits set through
 * {@code mlx5:mkey_cache -l} (debugfs' {@code mr_cache/N/limit}).
 *
 * <p>Lock rules: {@code this} guards the entries and their queues and counters; mkeys are created
 * and destroyed by command outside it. The background work runs on one thread ({@link #wq}, the
 * cache's workqueue); {@link #cleanup} stops it and destroys every cached mkey.
 */
final class Mlx5MkeyCache {

    /** Orders of the persistent entries: 4 << 0 .. 4 << 16 descriptors ({@code MLX5_MAX_UMR_SHIFT}). */
    static final int MAX_ORDER = 16;
    static final int TEMP_TIMEOUT_MILLIS = 30_000;

    /** The cache's timing ({@code rel_timeout}, default 300 s) and the temporary entries' lifetime (30 s). */
    record Settings(long relTimeoutMillis, long tempTimeoutMillis) {
        static final Settings DEFAULT = new Settings(300_000, TEMP_TIMEOUT_MILLIS);
    }

    /** {@code struct mlx5r_cache_rb_key}, compared in the kernel's order: access mode, access flags, ndescs last. */
    record RbKey(int accessMode, int accessFlags, int ndescs) implements Comparable<RbKey> {
        @Override
        public int compareTo(RbKey o) {
            int c = Integer.compare(accessMode, o.accessMode);
            if (c == 0) {
                c = Integer.compare(accessFlags, o.accessFlags);
            }
            return c != 0 ? c : Integer.compare(ndescs, o.ndescs);
        }
    }

    /** {@code struct mlx5_cache_ent}. Guarded by the cache's monitor. */
    static final class Ent {
        final RbKey key;
        final boolean persistent;
        final ArrayDeque<Integer> mkeys = new ArrayDeque<>();
        int limit;
        int inUse;
        long miss;
        long hit;
        int pending;
        long lastAddNanos = System.nanoTime();
        boolean shrinkQueued;
        boolean fillQueued;

        Ent(RbKey key, boolean persistent) {
            this.key = key;
            this.persistent = persistent;
        }
    }

    /** An mkey the cache gave and the key of the entry it came from (its ndescs: the mkey's MTT capacity). */
    record Taken(int mkey, RbKey key) {
    }

    /** The key of an MTT mkey with {@code unchangeable} rights (those no UMR sets) and {@code ndescs} descriptors. */
    static RbKey key(int unchangeable, int ndescs) {
        return new RbKey(Mkey.ACCESS_MODE_MTT, unchangeable, ndescs);
    }

    private final Mlx5IbDev dev;
    private final Mlx5Umr umr;
    private final Settings settings;
    private final TreeMap<RbKey, Ent> ents = new TreeMap<>();
    private final ScheduledExecutorService wq;
    private boolean dead;

    /** {@code mlx5_mkey_cache_init}: the persistent entries, limits 0, and the cache's work thread. */
    Mlx5MkeyCache(Mlx5IbDev dev, Mlx5Umr umr, Settings settings) {
        this.dev = dev;
        this.umr = umr;
        this.settings = settings;
        for (int i = 0; i <= MAX_ORDER; i++) {
            RbKey k = new RbKey(Mkey.ACCESS_MODE_MTT, 0, 4 << i);
            ents.put(k, new Ent(k, true));
        }
        this.wq = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "mlx5_cache " + dev.name());
            t.setDaemon(true);
            return t;
        });
    }

    /** {@code mkey_cache_ent_from_rb_key}: exact, else the smallest larger entry within max(2n, 4). Caller holds the monitor. */
    private Ent lookup(RbKey k) {
        assert Thread.holdsLock(this);
        Map.Entry<RbKey, Ent> e = ents.ceilingEntry(k);
        if (e == null) {
            return null;
        }
        RbKey f = e.getKey();
        if (f.accessMode != k.accessMode || f.accessFlags != k.accessFlags) {
            return null;
        }
        return f.ndescs == k.ndescs || f.ndescs <= Math.max(2 * k.ndescs, 4) ? e.getValue() : null;
    }

    /**
     * {@code _mlx5_mr_cache_alloc}: a free mkey for {@code ndescs} MTT descriptors with the
     * {@code unchangeable} rights, from the cache (hit) or created now (miss); null when no entry
     * serves that key (the caller creates the mkey by command, {@code reg_create}).
     */
    Taken alloc(int unchangeable, int ndescs) {
        Ent ent;
        Integer mkey;
        synchronized (this) {
            if (dead) {
                return null;
            }
            ent = lookup(key(unchangeable, ndescs));
            if (ent == null) {
                return null;
            }
            mkey = ent.mkeys.pollFirst();
            if (mkey != null) {
                ent.hit++;
            } else {
                ent.miss++;
            }
            ent.inUse++;
            queueAdjust(ent);
        }
        if (mkey == null) {
            try {
                mkey = createCacheMkey(ent.key);
            } catch (RuntimeException e) {
                synchronized (this) {
                    ent.inUse--;
                }
                throw e;
            }
        }
        return new Taken(mkey, ent.key);
    }

    /** A taken mkey whose enabling UMR failed: no longer in use, destroyed rather than cached (its state is unknown). */
    void abandon(Taken t) {
        synchronized (this) {
            Ent ent = ents.get(t.key());
            if (ent != null && ent.inUse > 0) {
                ent.inUse--;
            }
        }
        destroyMkey(t.mkey());
    }

    /**
     * {@code cache_ent_find_and_store}: a revoked mkey goes back to the entry of its key {@code k}
     * (a temporary one if there is none). False when the cache is gone (the caller destroys the
     * mkey).
     */
    boolean store(int mkey, RbKey k, boolean fromCache) {
        synchronized (this) {
            if (dead) {
                return false;
            }
            Ent ent = ents.get(k);
            if (ent == null) {
                ent = new Ent(k, false);
                ents.put(k, ent);
            }
            ent.mkeys.addLast(mkey);
            ent.lastAddNanos = System.nanoTime();
            if (fromCache && ent.inUse > 0) {
                ent.inUse--;
            }
            if (!ent.persistent) {
                schedule(ent, settings.tempTimeoutMillis());
            } else if (ent.mkeys.size() > 2 * ent.limit) {
                schedule(ent, settings.relTimeoutMillis());
            }
        }
        return true;
    }

    /** debugfs {@code mr_cache/N/limit}: sets an entry's low water; the work refills to twice it. */
    void setLimit(int ndescs, int limit) {
        synchronized (this) {
            Ent ent = ents.get(key(0, ndescs));
            if (ent == null || !ent.persistent) {
                throw new IllegalArgumentException(dev.name() + ": no persistent mkey cache entry of " + ndescs + " descriptors (they are 4, 8, ... "
                        + (4 << MAX_ORDER) + ")");
            }
            if (limit < 0 || limit > 10_000) {
                throw new IllegalArgumentException(dev.name() + ": limit " + limit + " is not 0..10000");
            }
            ent.limit = limit;
            queueAdjust(ent);
            if (ent.mkeys.size() > 2 * limit) {
                schedule(ent, settings.relTimeoutMillis());
            }
        }
    }

    /** {@code queue_adjust_cache_locked}: below the low water, refill in the background. Caller holds the monitor. */
    private void queueAdjust(Ent ent) {
        assert Thread.holdsLock(this);
        if (!ent.fillQueued && ent.mkeys.size() + ent.pending < ent.limit) {
            ent.fillQueued = true;
            submit(() -> fill(ent), 0);
        }
    }

    private void schedule(Ent ent, long delayMillis) {
        assert Thread.holdsLock(this);
        if (!ent.shrinkQueued) {
            ent.shrinkQueued = true;
            submit(() -> shrink(ent), delayMillis);
        }
    }

    private void submit(Runnable r, long delayMillis) {
        try {
            wq.schedule(r, delayMillis, TimeUnit.MILLISECONDS);
        } catch (RejectedExecutionException e) {
            // the cache is being cleaned up
        }
    }

    /** The refill work: creates mkeys until the entry holds 2 × limit (one command at a time, checking the limit each time). */
    private void fill(Ent ent) {
        for (;;) {
            synchronized (this) {
                if (dead || ent.mkeys.size() + ent.pending >= 2 * ent.limit) {
                    ent.fillQueued = false;
                    return;
                }
                ent.pending++;
            }
            int mkey;
            try {
                mkey = createCacheMkey(ent.key);
            } catch (RuntimeException e) {
                synchronized (this) {
                    ent.pending--;
                    ent.fillQueued = false;
                }
                System.getLogger("org.peerdirect.mlx5").log(System.Logger.Level.WARNING, dev.name() + ": mkey cache refill of "
                        + ent.key.ndescs + " descriptors failed: " + e.getMessage());
                return;
            }
            boolean keep;
            synchronized (this) {
                ent.pending--;
                keep = !dead;
                if (keep) {
                    ent.mkeys.addLast(mkey);
                }
            }
            if (!keep) {
                destroyMkey(mkey);
            }
        }
    }

    /**
     * The garbage collection: a temporary entry without additions for its timeout goes with its
     * mkeys; a persistent one gives back what is above its high water once it saw no additions for
     * {@code rel_timeout}. Re-schedules itself while the time has not come.
     */
    private void shrink(Ent ent) {
        List<Integer> victims = new ArrayList<>();
        synchronized (this) {
            ent.shrinkQueued = false;
            if (dead) {
                return;
            }
            long timeout = ent.persistent ? settings.relTimeoutMillis() : settings.tempTimeoutMillis();
            long idle = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - ent.lastAddNanos);
            if (idle < timeout) {
                schedule(ent, timeout - idle);
                return;
            }
            int keep = ent.persistent ? 2 * ent.limit : 0;
            while (ent.mkeys.size() > keep) {
                victims.add(ent.mkeys.pollLast());
            }
            if (!ent.persistent && ent.inUse == 0) {
                ents.remove(ent.key);
            }
        }
        victims.forEach(this::destroyMkey);
    }

    /**
     * {@code create_cache_mkey}: a free, UMR-enabled MTT mkey of the key's {@code ndescs} entries
     * in the UMR PD, with the key's unchangeable rights ({@code set_cache_mkc}).
     */
    private int createCacheMkey(RbKey k) {
        int ndescs = k.ndescs();
        MemorySegment in = Mlx5CoreDev.input(Mlx5Cmd.CREATE_MKEY, 0, (int) Mkey.CREATE_IN_MTT);
        long m = Mkey.CREATE_IN_MKC;
        Mkey.MKC_FREE.set(in, m, 1);
        Mkey.MKC_UMR_EN.set(in, m, 1);
        Mkey.MKC_ACCESS_MODE_1_0.set(in, m, Mkey.ACCESS_MODE_MTT);
        Mkey.MKC_LR.set(in, m, 1);
        Mkey.MKC_FLUSH_GLOBAL.set(in, m, (k.accessFlags() & IbAccess.FLUSH_GLOBAL) != 0 ? 1 : 0);
        Mkey.MKC_FLUSH_PERSISTENT.set(in, m, (k.accessFlags() & IbAccess.FLUSH_PERSISTENT) != 0 ? 1 : 0);
        Mkey.MKC_QPN.set(in, m, 0xff_ffff);
        int keyByte = dev.mkeyKey.incrementAndGet() & 0xff;
        Mkey.MKC_MKEY_7_0.set(in, m, keyByte);
        Mkey.MKC_PD.set(in, m, umr.pdn);
        Mkey.MKC_TRANSLATIONS_OCTWORD_SIZE.set(in, m, ndescs / 2);
        Mkey.MKC_LOG_PAGE_SIZE.set(in, m, 12);
        return Mkey.idxToMkey(dev.execIndex(in, 16)) | keyByte;
    }

    void destroyMkey(int mkey) {
        dev.destroyQuietly(Mlx5Cmd.DESTROY_MKEY, Mkey.mkeyToIdx(mkey));
    }

    /**
     * {@code mlx5_mkey_cache_cleanup}: stops the work (bounded wait for a refill in progress), then
     * destroys every cached mkey. Idempotent. Returns how many it destroyed.
     */
    int cleanup() {
        synchronized (this) {
            if (dead) {
                return 0;
            }
            dead = true;
        }
        wq.shutdownNow();
        try {
            if (!wq.awaitTermination(10, TimeUnit.SECONDS)) {
                System.getLogger("org.peerdirect.mlx5").log(System.Logger.Level.WARNING, dev.name() + ": mkey cache work still running after 10 s");
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        List<Integer> all = new ArrayList<>();
        synchronized (this) {
            for (Ent e : ents.values()) {
                all.addAll(e.mkeys);
                e.mkeys.clear();
            }
        }
        all.forEach(this::destroyMkey);
        return all.size();
    }

    /** Cached (free) mkeys now, over every entry. */
    synchronized int cached() {
        int n = 0;
        for (Ent e : ents.values()) {
            n += e.mkeys.size();
        }
        return n;
    }

    /** What {@code mlx5:mkey_cache} shows: one line per entry that is not empty, or has a limit or counts. */
    synchronized List<String> describe(boolean all) {
        List<String> lines = new ArrayList<>();
        for (Ent e : ents.values()) {
            if (!all && e.mkeys.isEmpty() && e.limit == 0 && e.inUse == 0 && e.miss == 0 && e.hit == 0) {
                continue;
            }
            lines.add(String.format("  %-4s ndescs %7d%s %s: cached %d, in use %d, limit %d, hits %d, misses %d%s", "MTT", e.key.ndescs,
                    e.key.accessFlags == 0 ? "" : String.format(" access 0x%x", e.key.accessFlags),
                    e.persistent ? "persistent" : "temporary ", e.mkeys.size(), e.inUse, e.limit, e.hit, e.miss,
                    e.pending > 0 ? ", refilling " + e.pending : ""));
        }
        return lines;
    }

    /** Hits and misses of the entry serving {@code ndescs} (for tests and the demo): {hit, miss, cached, inUse}. */
    synchronized long[] counters(int ndescs) {
        return counters(0, ndescs);
    }

    /** As {@link #counters(int)} for the entry serving the key with {@code unchangeable} rights; null when none does. */
    synchronized long[] counters(int unchangeable, int ndescs) {
        Ent e = lookup(key(unchangeable, ndescs));
        return e == null ? null : new long[] { e.hit, e.miss, e.mkeys.size(), e.inUse };
    }
}

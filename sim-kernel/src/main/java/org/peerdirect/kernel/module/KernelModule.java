package org.peerdirect.kernel.module;

import java.util.concurrent.atomic.AtomicLong;

import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;

/**
 * A loaded module's reference count and state ({@code struct module}'s {@code refcnt} and
 * {@code state}). Whoever depends on the module's code staying (an MR registered through a peer
 * client, say) takes a reference and drops it when done; {@link #tryStop()} ({@code rmmod}'s
 * {@code try_stop_module}) succeeds only with no reference held, and from then on
 * {@link #tryModuleGet()} fails, so no new user can slip in between the check and the unload.
 *
 * <p>Invariant: the count and the state are one atomic word, so "no reference and LIVE → GOING"
 * and "LIVE → one more reference" cannot both win. A module is created LIVE; once GOING it stays
 * so unless the unload fails ({@link #stopFailed()}).
 *
 * @see <a href="https://elixir.bootlin.com/linux/v6.8/source/kernel/module/main.c">kernel/module/main.c: try_module_get, module_put, try_stop_module</a>
 */
public final class KernelModule {

    /** {@code enum module_state}, the two states a loaded module is seen in. */
    public enum State {
        /** {@code MODULE_STATE_LIVE}: references may be taken. */
        LIVE,
        /** {@code MODULE_STATE_GOING}: being removed, no new reference. */
        GOING;

        /** The one transition rule: LIVE → GOING (rmmod), GOING → LIVE (the removal failed). */
        State to(State next) {
            if (next == this) {
                throw new IllegalStateException("module is " + this + " already");
            }
            return next;
        }
    }

    /** Bit 62 of {@link #word}: GOING; the bits below: the reference count. */
    private static final long GOING = 1L << 62;

    private final String name;
    private final AtomicLong word = new AtomicLong();

    /** A LIVE module with no reference; {@code name} as lsmod shows it (1 to 55 characters, no '/' or blank). */
    public KernelModule(String name) {
        if (name == null || name.isEmpty() || name.length() > 55 || name.chars().anyMatch(c -> c == '/' || Character.isWhitespace(c))) {
            throw new KernelException(Errno.EINVAL, "module name '" + name + "': 1 to 55 characters, no '/' or blank (MODULE_NAME_LEN)");
        }
        this.name = name;
    }

    public String name() {
        return name;
    }

    /**
     * {@code try_module_get}: one more reference, unless the module is going (then false: the
     * caller must not use the module, e.g. a peer client claims nothing).
     */
    public boolean tryModuleGet() {
        for (;;) {
            long w = word.get();
            if ((w & GOING) != 0) {
                return false;
            }
            if (word.compareAndSet(w, w + 1)) {
                return true;
            }
        }
    }

    /**
     * {@code __module_get}: one more reference for a caller that already holds one (or runs
     * the module's own code under one), whatever the state.
     */
    public void moduleGet() {
        word.incrementAndGet();
    }

    /** {@code module_put}: drops a reference; dropping one not taken is a bug and throws. */
    public void modulePut() {
        for (;;) {
            long w = word.get();
            if ((w & ~GOING) == 0) {
                throw new IllegalStateException("module " + name + ": module_put without a reference");
            }
            if (word.compareAndSet(w, w - 1)) {
                return;
            }
        }
    }

    /** The references held now ({@code module_refcount}, lsmod's "Used by" count). */
    public long refcount() {
        return word.get() & ~GOING;
    }

    public State state() {
        return stateOf(word.get());
    }

    private static State stateOf(long w) {
        return (w & GOING) != 0 ? State.GOING : State.LIVE;
    }

    /**
     * {@code try_stop_module}: LIVE with no reference → GOING, atomically; false when a reference
     * is held (rmmod's EBUSY) or the module is going already.
     */
    public boolean tryStop() {
        return word.compareAndSet(0, GOING); // 0: LIVE and no reference
    }

    /** The removal failed after {@link #tryStop()}: LIVE again, references may be taken. */
    public void stopFailed() {
        for (;;) {
            long w = word.get();
            stateOf(w).to(State.LIVE); // throws when it is LIVE already
            if (word.compareAndSet(w, w & ~GOING)) {
                return;
            }
        }
    }

    @Override
    public String toString() {
        return name + " (" + state() + ", " + refcount() + " references)";
    }
}

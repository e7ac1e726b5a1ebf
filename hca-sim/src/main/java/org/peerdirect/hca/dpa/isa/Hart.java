package org.peerdirect.hca.dpa.isa;

/**
 * The hart running the current DPA thread, as the silicon implements it. Device code never holds
 * one: it calls {@link Dpa}'s static methods, which find the current hart in {@link #CURRENT}
 * (bound by the silicon for the length of an activation). The image verifier refuses images that
 * name this type.
 */
public interface Hart {

    /** The hart of the current activation; unbound outside a DPA activation. */
    ScopedValue<Hart> CURRENT = ScopedValue.newInstance();

    /** Read-modify-write operations on DPA memory. */
    enum AtomicOp {
        SWAP, ADD, CAS
    }

    /** The per-EU counters. */
    enum Counter {
        CYCLES, TIME, INST_RET
    }

    /** The ways an activation gives its EU back without returning. */
    enum Exit {
        RESCHEDULE, FINISH, RETRIGGER, PROCESS_FINISH
    }

    long load(long daddr, int bytes);

    void store(long daddr, int bytes, long value);

    long atomic(AtomicOp op, long daddr, int bytes, long operand, long expect);

    void fence(Space space, int pred, int succ);

    void memoryWriteback();

    void windowWriteback();

    void windowReadInv();

    void compilerBarrier();

    long counter(Counter c);

    /** Ends the activation; never returns normally. */
    void exit(Exit kind);

    void yieldContinuable();

    /** Ends the process with a user error; never returns normally. */
    void error(int code);

    ThreadCtx threadCtx();

    int activate(int threadId);

    int errno(boolean reset);

    int outboxConfig(int outboxId);

    int windowConfig(int entity, int windowId, int mkey);

    long windowPtrAcquire(int entity, long haddr);

    /**
     * An indirect call ({@code jalr}) to {@code __dpa_rpc__} entry {@code symbol} (its index in the
     * image's symbol table) with {@code arg}; returns what it returned (peerdirect ISA extension).
     */
    long call(int symbol, long arg);

    /**
     * A device library's call on the non-thread-safe object at DPA address {@code object} begins
     * (peerdirect ISA extension for check C8: the object is opaque to the silicon).
     */
    void objectEnter(long object);

    /** The call {@link #objectEnter} announced ends. */
    void objectLeave(long object);

    /** The Q16.16 fixed-point intrinsics ({@code __dpa_fxp_*}). */
    enum Fxp {
        LOG2, RCP, POW2
    }

    /** One Q16.16 fixed-point intrinsic on {@code x}. */
    int fxp(Fxp op, int x);
}

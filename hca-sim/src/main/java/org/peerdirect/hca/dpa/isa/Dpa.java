package org.peerdirect.hca.dpa.isa;

import org.peerdirect.hca.dpa.isa.Hart.AtomicOp;
import org.peerdirect.hca.dpa.isa.Hart.Counter;
import org.peerdirect.hca.dpa.isa.Hart.Exit;

/**
 * Everything device code can do on a DPA execution unit, as static calls on the current hart.
 * Every call is a scheduling point (the deterministic scheduler may switch harts there; the
 * concurrent one counts it against the instruction budget) and advances the EU's virtual counters.
 *
 * <p>Addresses are DPA addresses: process memory (heap, data), the current EU's outbox page
 * ({@link ThreadCtx#outboxBase()}) and window apertures ({@link #windowPtrAcquire}). Accesses must be
 * naturally aligned; an unaligned access or one outside the process ends the process with a fatal
 * error, as on the DPA.
 *
 * <table>
 * <caption>Java names and the C names they stand for</caption>
 * <tr><th>Java</th><th>C ({@code dpaintrin.h}, {@code flexio_dev.h}, {@code flexio_dev_err.h})</th></tr>
 * <tr><td>{@code ld8/16/32/64}, {@code st8/16/32/64}</td><td>plain (volatile) loads and stores</td></tr>
 * <tr><td>{@code amoSwap32/64}</td><td>{@code __atomic_exchange_n}</td></tr>
 * <tr><td>{@code amoAdd32/64}</td><td>{@code __atomic_fetch_add}</td></tr>
 * <tr><td>{@code cas32/64}</td><td>{@code __atomic_compare_exchange_n} (returns the value found)</td></tr>
 * <tr><td>{@code fence(space, pred, succ)}</td><td>{@code __dpa_thread_fence}</td></tr>
 * <tr><td>{@code memoryFence}, {@code windowFence}, {@code outboxFence}, {@code systemFence}</td>
 *     <td>{@code __dpa_thread_memory_fence}, {@code _window_fence}, {@code _outbox_fence}, {@code _system_fence}</td></tr>
 * <tr><td>{@code memoryWriteback}, {@code windowWriteback}, {@code windowReadInv}</td>
 *     <td>{@code __dpa_thread_memory_writeback}, {@code __dpa_thread_window_writeback}, {@code __dpa_thread_window_read_inv}</td></tr>
 * <tr><td>{@code compilerBarrier}</td><td>{@code __dpa_compiler_barrier}</td></tr>
 * <tr><td>{@code cycles}, {@code time}, {@code instRet}</td><td>{@code __dpa_thread_cycles}, {@code _time}, {@code _inst_ret}</td></tr>
 * <tr><td>{@code reschedule}, {@code finish}, {@code retrigger}</td>
 *     <td>{@code flexio_dev_thread_reschedule}, {@code _thread_finish}, {@code _thread_retrigger}</td></tr>
 * <tr><td>{@code yieldContinuable}</td><td>{@code flexio_dev_yield}</td></tr>
 * <tr><td>{@code processFinish}</td><td>{@code flexio_dev_process_finish}</td></tr>
 * <tr><td>{@code error(code)}</td><td>{@code flexio_dev_error}</td></tr>
 * <tr><td>{@code threadCtx}</td><td>{@code flexio_dev_get_thread_ctx}</td></tr>
 * <tr><td>{@code activate(id)}</td><td>{@code flexio_dev_event_handler_activate}</td></tr>
 * <tr><td>{@code errno}, {@code resetErrno}</td><td>{@code flexio_dev_get_errno}, {@code flexio_dev_get_and_rst_errno}</td></tr>
 * <tr><td>{@code outboxConfig}</td><td>{@code flexio_dev_outbox_config}</td></tr>
 * <tr><td>{@code windowConfig}, {@code windowPtrAcquire}</td><td>{@code flexio_dev_window_config}, {@code flexio_dev_window_ptr_acquire}</td></tr>
 * <tr><td>{@code fxpLog2}, {@code fxpRcp}, {@code fxpPow2}</td><td>{@code __dpa_fxp_log2}, {@code __dpa_fxp_rcp}, {@code __dpa_fxp_pow2}</td></tr>
 * <tr><td>{@code call(symbol, arg)}</td><td>a call through a function pointer (peerdirect ISA extension, below)</td></tr>
 * <tr><td>{@code objectEnter}, {@code objectLeave}</td><td>none: the memory-model checker's C8 annotations (peerdirect ISA extension, below)</td></tr>
 * </table>
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/dpa+development/index.html">DPA Development: memory model, fences, cache control</a>
 */
public final class Dpa {

    /** {@code __DPA_R}: predecessor/successor reads. */
    public static final int R = 1;
    /** {@code __DPA_W}: predecessor/successor writes. */
    public static final int W = 2;
    /** {@code __DPA_RW}. */
    public static final int RW = R | W;

    /** {@code FLEXIO_DEV_WINDOW_ENTITY_0}. */
    public static final int WINDOW_ENTITY_0 = 0;
    /** {@code FLEXIO_DEV_WINDOW_ENTITY_1}. */
    public static final int WINDOW_ENTITY_1 = 1;

    private Dpa() {
    }

    private static Hart hart() {
        if (!Hart.CURRENT.isBound()) {
            throw new IllegalStateException("a DPA ISA call outside a DPA activation (no current hart)");
        }
        return Hart.CURRENT.get();
    }

    public static int ld8(long daddr) {
        return (int) hart().load(daddr, 1) & 0xff;
    }

    public static int ld16(long daddr) {
        return (int) hart().load(daddr, 2) & 0xffff;
    }

    public static int ld32(long daddr) {
        return (int) hart().load(daddr, 4);
    }

    public static long ld64(long daddr) {
        return hart().load(daddr, 8);
    }

    public static void st8(long daddr, int v) {
        hart().store(daddr, 1, v & 0xff);
    }

    public static void st16(long daddr, int v) {
        hart().store(daddr, 2, v & 0xffff);
    }

    public static void st32(long daddr, int v) {
        hart().store(daddr, 4, v & 0xffffffffL);
    }

    public static void st64(long daddr, long v) {
        hart().store(daddr, 8, v);
    }

    /** @see <a href="https://gcc.gnu.org/onlinedocs/gcc/_005f_005fatomic-Builtins.html">__atomic_exchange_n</a> */
    public static int amoSwap32(long daddr, int v) {
        return (int) hart().atomic(AtomicOp.SWAP, daddr, 4, v & 0xffffffffL, 0);
    }

    public static long amoSwap64(long daddr, long v) {
        return hart().atomic(AtomicOp.SWAP, daddr, 8, v, 0);
    }

    /** Returns the old value ({@code __atomic_fetch_add}). */
    public static int amoAdd32(long daddr, int delta) {
        return (int) hart().atomic(AtomicOp.ADD, daddr, 4, delta & 0xffffffffL, 0);
    }

    public static long amoAdd64(long daddr, long delta) {
        return hart().atomic(AtomicOp.ADD, daddr, 8, delta, 0);
    }

    /** Returns the value found; the swap happened when it equals {@code expect}. */
    public static int cas32(long daddr, int expect, int update) {
        return (int) hart().atomic(AtomicOp.CAS, daddr, 4, update & 0xffffffffL, expect & 0xffffffffL);
    }

    public static long cas64(long daddr, long expect, long update) {
        return hart().atomic(AtomicOp.CAS, daddr, 8, update, expect);
    }

    /** {@code __dpa_thread_fence(space, pred, succ)}; {@code pred}/{@code succ} of {@link #R}, {@link #W}, {@link #RW}. */
    public static void fence(Space space, int pred, int succ) {
        hart().fence(space, pred, succ);
    }

    public static void memoryFence(int pred, int succ) {
        hart().fence(Space.MEMORY, pred, succ);
    }

    public static void windowFence(int pred, int succ) {
        hart().fence(Space.MMIO, pred, succ);
    }

    public static void outboxFence(int pred, int succ) {
        hart().fence(Space.MMIO, pred, succ);
    }

    public static void systemFence() {
        hart().fence(Space.SYSTEM, RW, RW);
    }

    public static void memoryWriteback() {
        hart().memoryWriteback();
    }

    public static void windowWriteback() {
        hart().windowWriteback();
    }

    public static void windowReadInv() {
        hart().windowReadInv();
    }

    public static void compilerBarrier() {
        hart().compilerBarrier();
    }

    public static long cycles() {
        return hart().counter(Counter.CYCLES);
    }

    public static long time() {
        return hart().counter(Counter.TIME);
    }

    public static long instRet() {
        return hart().counter(Counter.INST_RET);
    }

    /** Gives the EU back; the next trigger starts the handler from its beginning. Never returns. */
    public static void reschedule() {
        hart().exit(Exit.RESCHEDULE);
    }

    /** Gives the EU back; the thread is finished, later triggers are ignored. Never returns. */
    public static void finish() {
        hart().exit(Exit.FINISH);
    }

    /** Gives the EU back and triggers the thread again at once. Never returns. */
    public static void retrigger() {
        hart().exit(Exit.RETRIGGER);
    }

    /** Continuable handlers: waits for the next trigger and resumes here (no effect otherwise). */
    public static void yieldContinuable() {
        hart().yieldContinuable();
    }

    /** Ends every thread of the process; the process status becomes 0x40. Never returns. */
    public static void processFinish() {
        hart().exit(Exit.PROCESS_FINISH);
    }

    /** Ends the process with user error {@code code} (0x80..0xff; another code gives 0x42). Never returns. */
    public static void error(int code) {
        hart().error(code);
    }

    public static ThreadCtx threadCtx() {
        return hart().threadCtx();
    }

    /** Triggers another thread of the process; 0 on success, non-zero (errno set) otherwise. */
    public static int activate(int threadId) {
        return hart().activate(threadId);
    }

    public static int errno() {
        return hart().errno(false);
    }

    /** Returns the errno and resets it. */
    public static int resetErrno() {
        return hart().errno(true);
    }

    /** Binds the thread to an outbox object of its process; 0 on success. */
    public static int outboxConfig(int outboxId) {
        return hart().outboxConfig(outboxId);
    }

    /** Configures window entity 0 or 1 with a window object and an mkey of the window's PD; 0 on success. */
    public static int windowConfig(int entity, int windowId, int mkey) {
        return hart().windowConfig(entity, windowId, mkey);
    }

    /** The DPA address of host virtual address {@code haddr} in the entity's window aperture. */
    public static long windowPtrAcquire(int entity, long haddr) {
        return hart().windowPtrAcquire(entity, haddr);
    }

    /**
     * {@code __dpa_fxp_log2}: log2 of unsigned Q16.16 {@code x} as signed Q16.16, rounded to the
     * nearest 2^-16 (a tie rounds up); {@code x == 0} gives {@link Integer#MIN_VALUE} (minus
     * infinity saturated). Exact: computed in integer arithmetic, not through a double.
     */
    public static int fxpLog2(int x) {
        return hart().fxp(Hart.Fxp.LOG2, x);
    }

    /**
     * {@code __dpa_fxp_rcp}: 1/x of signed Q16.16 {@code x} as Q16.16, rounded to the nearest
     * 2^-16 (a tie rounds away from zero), saturated to the int range; {@code x == 0} gives
     * {@link Integer#MAX_VALUE}.
     */
    public static int fxpRcp(int x) {
        return hart().fxp(Hart.Fxp.RCP, x);
    }

    /**
     * {@code __dpa_fxp_pow2}: 2^x of signed Q16.16 {@code x} as unsigned-range Q16.16 in an int,
     * rounded to the nearest 2^-16 (a tie rounds up), saturated to {@link Integer#MAX_VALUE} from
     * x = 15.0 on; results below 2^-17 give 0 (2^-17 itself, a tie, gives 2^-16).
     */
    public static int fxpPow2(int x) {
        return hart().fxp(Hart.Fxp.POW2, x);
    }

    /**
     * Calls {@code __dpa_rpc__} entry {@code symbol} (its index in the image's symbol table) with
     * {@code argbuf} and returns its {@code uint64_t} result: the call through a function pointer
     * libflexio's RPC handler makes to the entry the host named. peerdirect ISA extension: Java
     * device code has no function pointers, so the silicon resolves the index against the
     * process's own image; an index that is no {@code __dpa_rpc__} entry ends the process (0x42).
     */
    public static long call(int symbol, long argbuf) {
        return hart().call(symbol, argbuf);
    }

    /**
     * A device library's call on the object at DPA address {@code object}, one DOCA documents as
     * not thread-safe, begins: until the matching {@link #objectLeave}, another hart entering the
     * same object is reported (check C8; strict mode ends the process naming both call sites).
     * peerdirect ISA extension: the DPA has no such instruction; it is the checker's annotation,
     * costs no cycle, is no scheduling point, and with the checker off is one field check. The
     * silicon keys on the address only; what the object is stays the library's business. Calls
     * nest per thread. A call that ends the process need not leave.
     */
    public static void objectEnter(long object) {
        hart().objectEnter(object);
    }

    /** The call {@link #objectEnter} announced on {@code object} ends. */
    public static void objectLeave(long object) {
        hart().objectLeave(object);
    }
}

package org.peerdirect.flexio;

import static org.peerdirect.hca.cx4.ifc.DpaObj.*;

import java.lang.foreign.MemorySegment;
import java.util.Objects;

import org.peerdirect.flexio.impl.Prm;
import org.peerdirect.mlx5.dv.Mlx5dv;
import org.peerdirect.mlx5.dv.Mlx5dv.DevxObj;

/**
 * {@code struct flexio_event_handler}: a DPA thread of a process running a {@code __dpa_global__}
 * handler each time it is triggered (a CQE on its armed CQ, an activation by another handler, a
 * zero CQE, a retrigger). Destroyed with its process, or before by {@link #destroy}.
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/flexio+sdk/index.html">flexio_event_handler_create, _run, _destroy</a>
 */
public final class FlexioEventHandler {

    /** {@code flexio_affinity_type}. */
    public enum AffinityType {
        /** {@code FLEXIO_AFFINITY_NONE}: any free EU. */
        NONE,
        /** {@code FLEXIO_AFFINITY_STRICT}: one EU. */
        STRICT,
        /** {@code FLEXIO_AFFINITY_GROUP}: any EU of a group. */
        GROUP
    }

    /**
     * {@code struct flexio_event_handler_attr}: the handler ({@code host_stub_func}), whether a
     * {@code flexio_dev_yield} resumes it ({@code continuable}), its {@code uint64_t} argument,
     * its thread-local storage ({@code thread_local_storage_daddr}, 0 for none) and affinity.
     */
    public record Attr(FlexioFunc func, boolean continuable, long arg, long tlsDaddr, AffinityType affinity, int affinityId) {
        public Attr {
            Objects.requireNonNull(func, "host_stub_func");
            Objects.requireNonNull(affinity, "affinity");
        }

        /** A handler with argument {@code arg}, no TLS, any EU. */
        public static Attr of(FlexioFunc func, long arg) {
            return new Attr(func, false, arg, 0, AffinityType.NONE, 0);
        }
    }

    private final FlexioProcess process;
    private final DevxObj thread;
    private final Runnable destroy;
    private boolean destroyed;

    private FlexioEventHandler(FlexioProcess process, DevxObj thread) {
        this.process = process;
        this.thread = thread;
        this.destroy = process.own(() -> Mlx5dv.devxObjDestroy(thread));
    }

    /**
     * {@code flexio_event_handler_create}.
     *
     * @throws FlexioException FAILED naming the refusal (an entry the app lacks, an EU outside the partition)
     */
    public static FlexioEventHandler create(FlexioProcess process, Attr attr) {
        process.lock.lock();
        try {
            process.checkAlive();
            int index = process.entryIndex(attr.func(), FlexioFunc.Kind.GLOBAL);
            return new FlexioEventHandler(process, createThread(process, index, attr.arg(), attr.tlsDaddr(),
                    attr.affinity().ordinal(), attr.affinityId(), attr.continuable()));
        } catch (RuntimeException e) {
            throw FlexioProcess.failure("flexio_event_handler_create of " + attr.func().name(), e);
        } finally {
            process.lock.unlock();
        }
    }

    /**
     * A thread of a runtime library's {@code __dpa_global__} entry named by its symbol ([model]:
     * DOCA DPA's kernel rank handler, which dpacc links into images using doca-dpa-dev), with its
     * argument and thread-local storage, on any EU.
     *
     * @throws FlexioException FAILED when the image has no such symbol (or the firmware refuses)
     */
    public static FlexioEventHandler createRuntime(FlexioProcess process, String symbol, long arg, long tlsDaddr) {
        process.lock.lock();
        try {
            process.checkAlive();
            int index = process.symbols.indexOf(symbol);
            if (index < 0) {
                throw new FlexioException(FlexioStatus.FAILED, "app " + process.app().name() + "'s image has no runtime entry " + symbol);
            }
            return new FlexioEventHandler(process, createThread(process, index, arg, tlsDaddr, 0, 0, false));
        } catch (RuntimeException e) {
            throw FlexioProcess.failure("flexio_event_handler_create of " + symbol, e);
        } finally {
            process.lock.unlock();
        }
    }

    /** A thread of the runtime's own entry at symbol {@code index} (the RPC handler), on any EU; the caller holds the process lock. */
    static FlexioEventHandler runtime(FlexioProcess process, int index, long arg) {
        assert process.lock.isHeldByCurrentThread();
        return new FlexioEventHandler(process, createThread(process, index, arg, 0, 0, 0, false));
    }

    static DevxObj createThread(FlexioProcess p, int entry, long arg, long tls, int affinity, int affinityId, boolean continuable) {
        int pid = p.id();
        return Prm.create(p.ctx, OBJ_DPA_THREAD, c -> {
            THREAD_PROCESS.set(c, 0, pid);
            THREAD_ENTRY_INDEX.set(c, 0, entry);
            THREAD_AFFINITY_TYPE.set(c, 0, affinity);
            THREAD_AFFINITY_ID.set(c, 0, affinityId);
            THREAD_CONTINUABLE.set(c, 0, continuable ? 1 : 0);
            set64(c, THREAD_ARG, arg);
            set64(c, THREAD_TLS, tls);
        });
    }

    /** {@code flexio_event_handler_run}: the thread becomes triggerable. */
    public void run() {
        process.lock.lock();
        try {
            process.checkAlive();
            Prm.threadState(thread, THREAD_STATE_RUN);
        } catch (RuntimeException e) {
            throw FlexioProcess.failure("flexio_event_handler_run", e);
        } finally {
            process.lock.unlock();
        }
    }

    /**
     * Whether the thread has had more than {@code before} activations and waits for a trigger
     * again (its activation ended: returned, rescheduled or finished), from the thread's query.
     */
    public boolean activationEnded(int before) {
        process.lock.lock();
        try {
            process.checkAlive();
            MemorySegment q = Prm.query(thread, OBJ_DPA_THREAD);
            int state = THREAD_STATE.get(q, 0);
            return THREAD_ACTIVATIONS.get(q, 0) > before && (state == FlexioProcess.STATE_WAITING || state == FlexioProcess.STATE_FINISHED);
        } finally {
            process.lock.unlock();
        }
    }

    /** The DPA_THREAD id ({@code flexio_event_handler_get_id}/{@code _get_obj_id}): what a CQ names as its element and {@code flexio_dev_event_handler_activate} takes. */
    public int id() {
        return Prm.objId(thread);
    }

    /** Activations so far (the thread's query). */
    public int activations() {
        process.lock.lock();
        try {
            process.checkAlive();
            return THREAD_ACTIVATIONS.get(Prm.query(thread, OBJ_DPA_THREAD), 0);
        } finally {
            process.lock.unlock();
        }
    }

    /** Its line of {@code flexio_crash_data}. */
    String describeLine(String name) {
        return describe(name, thread);
    }

    static String describe(String name, DevxObj t) {
        MemorySegment q = Prm.query(t, OBJ_DPA_THREAD);
        int eu = THREAD_EU.get(q, 0);
        return String.format("  thread %d %s: state %d, eu %s, activations %d", Prm.objId(t), name, THREAD_STATE.get(q, 0),
                eu == 0xffff ? "-" : String.valueOf(eu), THREAD_ACTIVATIONS.get(q, 0));
    }

    /** {@code flexio_event_handler_destroy}; nothing when already destroyed (or its process was). */
    public void destroy() {
        process.lock.lock();
        try {
            if (destroyed) {
                return;
            }
            destroyed = true;
            if (process.alive()) { // a destroyed process took its threads down already
                process.disown(destroy);
                destroy.run();
            }
        } catch (RuntimeException e) {
            throw FlexioProcess.failure("flexio_event_handler_destroy", e);
        } finally {
            process.lock.unlock();
        }
    }
}

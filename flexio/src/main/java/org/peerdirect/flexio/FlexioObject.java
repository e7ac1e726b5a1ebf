package org.peerdirect.flexio;

import java.util.function.Supplier;

import org.peerdirect.flexio.impl.Prm;
import org.peerdirect.mlx5.dv.Mlx5dv;
import org.peerdirect.mlx5.dv.Mlx5dv.DevxObj;

/**
 * An object made in a FlexIO process by one DevX command and destroyed by its destroy command:
 * {@link FlexioOutbox}, {@link FlexioWindow}, {@link FlexioMkey}, {@link FlexioCq}. Its process
 * destroys it, newest first, unless {@link #destroy} did before.
 */
public abstract sealed class FlexioObject permits FlexioOutbox, FlexioWindow, FlexioMkey, FlexioCq, FlexioQp {

    final FlexioProcess process;
    final DevxObj obj;
    private final Runnable destroy;
    private boolean destroyed;

    FlexioObject(FlexioProcess process, DevxObj obj) {
        this(process, obj, null);
    }

    /** {@code after} runs once the object is destroyed (the umem under a host mkey). */
    FlexioObject(FlexioProcess process, DevxObj obj, Runnable after) {
        this.process = process;
        this.obj = obj;
        this.destroy = process.own(() -> {
            Mlx5dv.devxObjDestroy(obj);
            if (after != null) {
                after.run();
            }
        });
    }

    /** Runs {@code create} under the process's lock, a failure reported as {@code what} failing. */
    static <T> T make(FlexioProcess p, String what, Supplier<T> create) {
        p.lock.lock();
        try {
            p.checkAlive();
            return create.get();
        } catch (RuntimeException e) {
            throw FlexioProcess.failure(what, e);
        } finally {
            p.lock.unlock();
        }
    }

    /** The general object's id, or the number of a CQ/mkey. */
    int objectId() {
        return Prm.objId(obj);
    }

    /** Destroys it now; nothing when it or its process already went. */
    public void destroy() {
        process.lock.lock();
        try {
            if (destroyed) {
                return;
            }
            destroyed = true;
            if (process.alive()) {
                process.disown(destroy);
                destroy.run();
            }
        } catch (RuntimeException e) {
            throw FlexioProcess.failure("destroy of " + this, e);
        } finally {
            process.lock.unlock();
        }
    }
}

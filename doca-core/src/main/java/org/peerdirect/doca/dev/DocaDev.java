package org.peerdirect.doca.dev;

import java.util.ArrayList;
import java.util.List;

import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.ib.core.verbs.IbvPd;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;

/**
 * {@code struct doca_dev}: a local device opened in a process: a verbs context and the protection
 * domain DOCA allocates for it (every memory map registers its range in that PD, so one device's
 * keys serve every DOCA object of the process on it).
 *
 * <p>{@link #open} of a devinfo already open returns the same instance with one more reference;
 * {@link #close} drops one, and the last one frees the PD and the context, or answers
 * DOCA_ERROR_IN_USE while a DOCA object built on the device (a started memory map, a sync event
 * located on it, a DPA context) still {@linkplain #hold holds} it. Not thread-safe.
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/DOCA+Core">DOCA Core: device handling</a>
 */
public final class DocaDev {

    private final DocaDevinfo info;
    private final IbvContext ctx;
    private final IbvPd pd;
    private int refs = 1;
    private boolean closed;
    /** The DOCA objects using the device, by identity; their toString names them in IN_USE. */
    private final List<Object> holders = new ArrayList<>();

    private DocaDev(DocaDevinfo info, IbvContext ctx, IbvPd pd) {
        this.info = info;
        this.ctx = ctx;
        this.pd = pd;
    }

    /**
     * {@code doca_dev_open}: opens the device in the devinfo's process and allocates its PD; the
     * same instance again if it is open already.
     *
     * @throws DocaException DOCA_ERROR_NOT_CONNECTED when the device cannot be opened (removed),
     *         DOCA_ERROR_NO_MEMORY when its PD cannot be allocated
     */
    public static DocaDev open(DocaDevinfo devinfo) {
        DocaException.check(devinfo != null, DocaError.DOCA_ERROR_INVALID_VALUE, "doca_dev_open: null devinfo");
        if (devinfo.opened != null) {
            devinfo.opened.refs++;
            return devinfo.opened;
        }
        IbvContext c;
        try {
            c = devinfo.ibvDevice().open(devinfo.process());
        } catch (KernelException e) {
            throw new DocaException(DocaError.DOCA_ERROR_NOT_CONNECTED, "doca_dev_open: " + devinfo.getIbdevName() + ": " + e.getMessage(), e);
        }
        IbvPd p;
        try {
            p = c.allocPd();
        } catch (KernelException e) {
            c.close();
            throw new DocaException(DocaError.DOCA_ERROR_NO_MEMORY, "doca_dev_open: " + devinfo.getIbdevName()
                    + ": failed to allocate the protection domain: " + e.getMessage(), e);
        }
        devinfo.opened = new DocaDev(devinfo, c, p);
        return devinfo.opened;
    }

    /**
     * {@code doca_dev_close}: drops one reference; the last frees the PD and the verbs context.
     *
     * @throws DocaException DOCA_ERROR_IN_USE (the reference kept) while a DOCA object holds the
     *         device; DOCA_ERROR_INVALID_VALUE when it is closed already
     */
    public void close() {
        checkOpen("doca_dev_close");
        if (refs == 1 && !holders.isEmpty()) {
            throw new DocaException(DocaError.DOCA_ERROR_IN_USE, "doca_dev_close: " + name() + " is used by " + holders);
        }
        if (--refs > 0) {
            return;
        }
        closed = true;
        info.opened = null;
        try {
            pd.dealloc();
        } finally {
            ctx.close();
        }
    }

    /** {@code doca_dev_as_devinfo}. */
    public DocaDevinfo asDevinfo() {
        return info;
    }

    /** {@code doca_rdma_bridge_get_dev_pd}: the verbs PD DOCA allocated for this device. */
    public IbvPd rdmaBridgeGetDevPd() {
        checkOpen("doca_rdma_bridge_get_dev_pd");
        return pd;
    }

    /** The verbs context of the device in its process. */
    public IbvContext ibvContext() {
        checkOpen("doca_dev context");
        return ctx;
    }

    /** The process the device is open in. */
    public AddressSpace process() {
        return info.process();
    }

    /** The ibdev name, e.g. {@code mlx5_0}. */
    public String name() {
        return info.getIbdevName();
    }

    /** Whether {@link #close} released the device. */
    public boolean isClosed() {
        return closed;
    }

    /**
     * Marks the device used by {@code owner} (a DOCA object built on it): {@link #close} answers
     * IN_USE until {@link #unhold}. For DOCA Core and DOCA DPA objects; a user does not call it.
     */
    public void hold(Object owner) {
        checkOpen("doca_dev");
        holders.add(owner);
    }

    /** The objects of {@code type} among those holding the device, in the order they took it (DOCA Core finds a map's DPA context so). */
    public <T> List<T> holders(Class<T> type) {
        List<T> l = new ArrayList<>();
        for (Object o : holders) {
            if (type.isInstance(o)) {
                l.add(type.cast(o));
            }
        }
        return l;
    }

    /** Ends a {@link #hold} of {@code owner}; a no-op if it held nothing. */
    public void unhold(Object owner) {
        for (int i = 0; i < holders.size(); i++) {
            if (holders.get(i) == owner) {
                holders.remove(i);
                return;
            }
        }
    }

    /** DOCA_ERROR_INVALID_VALUE naming {@code what} when the device is closed. */
    public void checkOpen(String what) {
        DocaException.check(!closed, DocaError.DOCA_ERROR_INVALID_VALUE, what + ": device " + name() + " is closed");
    }

    @Override
    public String toString() {
        return "doca_dev " + name() + " in " + process();
    }
}

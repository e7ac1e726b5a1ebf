package org.peerdirect.kernel.pci;

import java.util.BitSet;
import java.util.Dictionary;
import java.util.Hashtable;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.osgi.framework.BundleContext;
import org.osgi.framework.ServiceRegistration;

/**
 * What a driver component keeps per PCI function it binds: the device object its probe made,
 * the service it publishes for it (properties: the index under {@code indexProperty} and
 * {@link PciFunction#PCI_BDF}), and its index — the lowest free one, as the kernel numbers
 * {@code nvidia0} or {@code nvme0} — given back when the function goes. A driver component calls
 * {@link #bind} and {@link #unbind} from its dynamic {@code PciFunction} reference and
 * {@link #unbindAll} from its deactivation.
 *
 * <p>Thread safety: bind and unbind may run on any thread; the index set is guarded by itself,
 * the table is concurrent; the probe and the removal run without a lock of this class.
 *
 * @param <T> the device object, published as a service of type {@code T}
 * @since 0.6
 */
public final class PciDriverBindings<T> {

    /** The driver's probe: the device object for {@code fn}, numbered {@code index}; throws to refuse the function. */
    @FunctionalInterface
    public interface Probe<T> {
        T probe(PciFunction fn, int index);
    }

    /** The driver's removal of a device: what could not be cleaned, in words (logged as warnings). */
    @FunctionalInterface
    public interface Remove<T> {
        List<String> remove(T device);
    }

    private record Bound<T>(T device, int index, ServiceRegistration<T> registration) {
    }

    private final BundleContext context;
    private final Class<T> type;
    private final String indexProperty;
    private final Probe<T> probe;
    private final Remove<T> remove;
    private final System.Logger log;
    private final Map<PciFunction, Bound<T>> bound = new ConcurrentHashMap<>();
    private final BitSet indices = new BitSet();

    public PciDriverBindings(BundleContext context, Class<T> type, String indexProperty, Probe<T> probe, Remove<T> remove, System.Logger log) {
        this.context = context;
        this.type = type;
        this.indexProperty = indexProperty;
        this.probe = probe;
        this.remove = remove;
        this.log = log;
    }

    /** Probes {@code fn} and publishes its device; a probe that throws is logged and leaves nothing bound. */
    public void bind(PciFunction fn) {
        int index;
        synchronized (indices) {
            index = indices.nextClearBit(0);
            indices.set(index);
        }
        T device;
        try {
            device = probe.probe(fn, index);
        } catch (RuntimeException e) {
            release(index);
            log.log(System.Logger.Level.ERROR, fn.bdf() + ": probe failed: " + e.getMessage());
            return;
        }
        Dictionary<String, Object> props = new Hashtable<>();
        props.put(indexProperty, index);
        props.put(PciFunction.PCI_BDF, fn.bdf());
        bound.put(fn, new Bound<>(device, index, context.registerService(type, device, props)));
    }

    /** The function goes: its service is withdrawn first, then the driver removes the device. */
    public void unbind(PciFunction fn) {
        Bound<T> b = bound.remove(fn);
        if (b == null) {
            return;
        }
        try {
            b.registration.unregister();
        } catch (IllegalStateException alreadyGone) {
            // unregistered with the stopping bundle
        }
        try {
            for (String leak : remove.remove(b.device)) {
                log.log(System.Logger.Level.WARNING, leak);
            }
        } finally {
            release(b.index);
        }
    }

    /** Unbinds every function (the driver's deactivation). */
    public void unbindAll() {
        for (PciFunction fn : bound.keySet()) {
            unbind(fn);
        }
    }

    private void release(int index) {
        synchronized (indices) {
            indices.clear(index);
        }
    }
}

package org.peerdirect.kernel.pci.impl;

import java.util.ArrayList;
import java.util.List;
import java.util.NavigableMap;
import java.util.Objects;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.function.Consumer;

import org.peerdirect.kernel.iommu.Iommu;

import org.peerdirect.kernel.pci.PciBus;
import org.peerdirect.kernel.pci.PciDeviceSpec;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * The bus without OSGi (the component wraps it): address assignment, the list of present
 * functions, and shutdown.
 *
 * <p>Bus addresses: the n-th function registered (from 0) gets bus {@code 0x03 + n % 253} in domain
 * {@code n / 253}, device 0, function 0 — {@code 0000:03:00.0}, {@code 0000:04:00.0}, ... as NICs behind
 * their own root ports appear on a real machine. Addresses are never reused, so a re-plugged model
 * shows up at a new address and a stale handle can never be confused with the new device.
 *
 * <p>Locking: {@code this} guards {@code next} and {@code closed} and is held while a function is
 * created and entered into {@code functions} (so {@link #close()} sees every function that
 * {@link #register} returns); reads of {@code functions} are lock free. The {@link Listener} and
 * everything a function calls out to (handlers, removal listeners) run without the bus lock.
 */
public final class PciBusCore implements PciBus {

    /** Publication of functions; called without bus locks held, from the registering or removing thread. */
    public interface Listener {
        /** A function was registered; it may already be removed again when this runs. */
        void added(PciFunction f);

        /** A function was removed; may run before {@link #added} for it has returned. */
        void removed(PciFunction f);
    }

    /** Buses 0x03..0xff of a domain. */
    static final int BUSES_PER_DOMAIN = 0x100 - 3;

    private final Listener listener;
    private final Consumer<String> warn;
    /** Present functions by address number (domain * 253 + bus - 3); insertion is under {@code this}. */
    private final NavigableMap<Long, PciFunctionImpl> functions = new ConcurrentSkipListMap<>();
    private long next; // guarded by this
    private boolean closed; // guarded by this

    private final Iommu iommu;

    /** A bus without IOMMU: its functions cannot do DMA (for tests of the bus alone). */
    public PciBusCore(Listener listener, Consumer<String> warn) {
        this(listener, warn, null);
    }

    /**
     * A bus behind {@code iommu}: each function gets its own domain, named by its bus address, when
     * it is plugged in, and the domain is destroyed when it is removed (after its driver unbound).
     */
    public PciBusCore(Listener listener, Consumer<String> warn, Iommu iommu) {
        this.listener = Objects.requireNonNull(listener, "listener");
        this.warn = Objects.requireNonNull(warn, "warn");
        this.iommu = iommu;
    }

    static String bdf(long n) {
        return String.format("%04x:%02x:00.0", n / BUSES_PER_DOMAIN, 3 + n % BUSES_PER_DOMAIN);
    }

    @Override
    public PciFunction register(PciDeviceSpec spec) {
        Objects.requireNonNull(spec, "spec");
        PciFunctionImpl f;
        synchronized (this) {
            if (closed) {
                throw new IllegalStateException("the PCI bus is shut down: cannot register " + spec.name());
            }
            long n = next++;
            String bdf = bdf(n);
            f = new PciFunctionImpl(this, n, bdf, spec, warn, iommu == null ? null : iommu.createDomain(bdf));
            functions.put(n, f);
        }
        try {
            if (spec.powerOn() != null) {
                spec.powerOn().accept(f); // reset values in the BARs before any driver can see the function
            }
            listener.added(f);
        } catch (RuntimeException e) {
            f.remove();
            throw e;
        }
        return f;
    }

    @Override
    public List<PciFunction> functions() {
        return List.copyOf(functions.values());
    }

    /** Called by {@link PciFunctionImpl#remove()} first thing: the function leaves the list. */
    void unlink(PciFunctionImpl f) {
        functions.remove(f.number(), f);
    }

    /**
     * Called by {@link PciFunctionImpl#remove()} once its driver unbound: the function's IOMMU domain
     * goes; mappings the driver left are counted as leaked by the IOMMU's audit.
     */
    void detachDomain(PciFunctionImpl f) {
        if (f.domain != null) {
            long leaked = iommu.destroyDomain(f.domain);
            if (leaked != 0) {
                warn.accept("pci " + f.bdf() + ": its driver left " + leaked + " page(s) DMA-mapped at removal");
            }
        }
    }

    /** Called by {@link PciFunctionImpl#remove()} after the removal listeners. */
    void unpublish(PciFunctionImpl f) {
        try {
            listener.removed(f);
        } catch (RuntimeException e) {
            warn.accept("pci " + f.bdf() + ": unpublishing failed: " + e);
        }
    }

    /**
     * Removes every function (last registered first, as a machine powering down) and refuses further
     * registrations. Idempotent. When it returns no IRQ thread of this bus is alive.
     */
    public void close() {
        List<PciFunctionImpl> all;
        synchronized (this) {
            closed = true;
            all = new ArrayList<>(functions.descendingMap().values());
        }
        for (PciFunctionImpl f : all) {
            f.remove();
        }
    }
}

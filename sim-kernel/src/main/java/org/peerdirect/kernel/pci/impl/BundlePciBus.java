package org.peerdirect.kernel.pci.impl;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

import org.peerdirect.kernel.pci.PciBus;
import org.peerdirect.kernel.pci.PciDeviceSpec;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * One bundle's view of the bus: it remembers the functions the bundle registered so that
 * {@link #release()} (the bundle released the {@link PciBus} service, because it stopped) removes
 * them — the surprise hot-unplug of a device model's devices.
 *
 * <p>Locking: {@code this} guards {@code mine} and {@code released}; functions are registered and
 * removed outside it (both call out to drivers).
 */
final class BundlePciBus implements PciBus {

    private final PciBusCore core;
    private final String owner;
    private final Set<PciFunction> mine = new LinkedHashSet<>(); // guarded by this
    private boolean released; // guarded by this

    BundlePciBus(PciBusCore core, String owner) {
        this.core = core;
        this.owner = owner;
    }

    @Override
    public PciFunction register(PciDeviceSpec spec) {
        synchronized (this) {
            if (released) {
                throw new IllegalStateException("the PciBus service of " + owner + " was released: cannot register " + spec.name());
            }
        }
        PciFunction f = core.register(spec);
        boolean late;
        synchronized (this) {
            late = released;
            if (!late) {
                mine.add(f);
            }
        }
        if (late) {
            // released while we registered: the owner is gone, so is its device
            f.remove();
            throw new IllegalStateException("the PciBus service of " + owner + " was released while registering " + spec.name());
        }
        f.addRemovalListener(() -> forget(f)); // removed by its model: no need to remember it any more
        return f;
    }

    private synchronized void forget(PciFunction f) {
        mine.remove(f);
    }

    @Override
    public List<PciFunction> functions() {
        return core.functions();
    }

    /** Removes every function still registered through this view, newest first; idempotent. */
    void release() {
        List<PciFunction> todo;
        synchronized (this) {
            released = true;
            todo = new ArrayList<>(mine);
            mine.clear();
        }
        Collections.reverse(todo);
        for (PciFunction f : todo) {
            f.remove();
        }
    }

    /** Functions registered through this view and not removed yet (for tests). */
    synchronized List<PciFunction> registered() {
        return List.copyOf(mine);
    }
}

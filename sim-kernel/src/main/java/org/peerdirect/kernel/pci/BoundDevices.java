package org.peerdirect.kernel.pci;

import java.util.Comparator;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.ToIntFunction;

/**
 * The devices of one driver as another module tracks them from its dynamic service reference
 * (a peer client, a tool): kept in the driver's index order ({@code nvme0}, {@code nvme1}; GPU 0,
 * GPU 1), read as consistent snapshots by any thread while devices come and go. Why one class:
 * every consumer of {@link PciDriverBindings}' services wants the same list, and sorting on each
 * bind is what keeps "device 1" meaning the same device in every tool.
 *
 * <p>Thread safety: {@link #add} and {@link #remove} serialise on this object (the DS bind and
 * unbind methods call them); readers take {@link #all} without a lock.
 *
 * @param <T> the driver's per-device service type
 */
public final class BoundDevices<T> {

    private final List<T> devices = new CopyOnWriteArrayList<>();
    private final Comparator<T> order;

    /** @param index the device's index in its driver (the service's {@code *.index} property) */
    public BoundDevices(ToIntFunction<T> index) {
        this.order = Comparator.comparingInt(index);
    }

    /** A device bound: it takes its place by index. */
    public synchronized void add(T device) {
        devices.add(device);
        devices.sort(order);
    }

    /** A device unbound; nothing when it was not there. */
    public synchronized void remove(T device) {
        devices.remove(device);
    }

    /** The devices now, in index order: a snapshot. */
    public List<T> all() {
        return List.copyOf(devices);
    }

    public boolean isEmpty() {
        return devices.isEmpty();
    }

    public int size() {
        return devices.size();
    }
}

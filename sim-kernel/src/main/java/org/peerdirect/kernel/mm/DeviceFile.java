package org.peerdirect.kernel.mm;

import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A driver's open device file in a process ({@code /dev/nvidia0}, {@code /dev/example_peer}):
 * {@link AddressSpace#openFile} it on the process's first use of the device, and its release
 * (the process's exit, or {@link AddressSpace#closeFile}) runs the driver's cleanup once, as the
 * kernel calls a file's {@code release} when its last reference goes.
 *
 * @since 0.8
 */
public final class DeviceFile implements AutoCloseable {

    private final Runnable release;
    private final AtomicBoolean released = new AtomicBoolean();

    /** @param release what the driver does when the process lets go of the file */
    public DeviceFile(Runnable release) {
        this.release = release;
    }

    @Override
    public void close() {
        if (released.compareAndSet(false, true)) {
            release.run();
        }
    }
}

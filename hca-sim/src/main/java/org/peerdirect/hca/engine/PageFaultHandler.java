package org.peerdirect.hca.engine;

/**
 * Where the device's page-fault EQ delivers {@link PageFault} events (mlx5's page-fault EQ, created
 * with the first on-demand mkey). Called on the device's executing thread: the handler only queues
 * the fault for the driver's fault work and returns (the kernel's EQ handler does the same); the
 * work answers with {@link HcaDevice#pageFaultResume}. Without a handler a translation miss cannot
 * be served and fails the access as a protection error.
 */
@FunctionalInterface
public interface PageFaultHandler {

    void pageFault(PageFault fault);
}

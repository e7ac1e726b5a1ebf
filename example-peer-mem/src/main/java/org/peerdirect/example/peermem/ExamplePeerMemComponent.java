package org.peerdirect.example.peermem;

import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Deactivate;
import org.osgi.service.component.annotations.Reference;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.peermem.PeerMemoryAllocator;
import org.peerdirect.peermem.PeerMemoryClient;

/**
 * The example client as an OSGi component: it publishes itself as a {@link PeerMemoryClient}
 * service and the IB core registers it (the whiteboard), like {@code example_peer_mem.ko}'s init
 * calling {@code ib_register_peer_memory_client}.
 *
 * <p>Configuration ({@value #PID}): {@code name}, {@code page.size} (4096, or 65536 for
 * GPU-like 64 KiB pages), {@code region.size} (default allocation size),
 * {@code peermem.invalidation} (register with an invalidation callback, default true) and
 * {@code invalidate.unmaps} (the INVALIDATE_UNMAPS flavour). A change re-registers the client.
 *
 * <p>Stopping the bundle unregisters the client: the stop waits until every MR over its memory
 * is deregistered (logging the registrations it waits for), then frees its memory.
 */
@Component(immediate = true, // holds state: a delayed component would be disposed when unused
        // also under its own type, for this bundle's commands (the package is private)
        service = {PeerMemoryClient.class, PeerMemoryAllocator.class, ExamplePeerMemComponent.class}, configurationPid = ExamplePeerMemComponent.PID,
        property = PeerMemoryClient.INVALIDATION_PROPERTY + ":Boolean=true")
public final class ExamplePeerMemComponent extends ExamplePeerMemory {

    public static final String PID = "org.peerdirect.example_peer_mem";

    @interface Config {
        String name() default "example_peer";

        long page_size() default 4096;

        long region_size() default 1 << 20;

        boolean invalidate_unmaps() default false;
    }

    private final long regionSize;

    @Activate
    public ExamplePeerMemComponent(@Reference Mm mm, Config c) {
        super(mm, c.name(), c.page_size(), c.invalidate_unmaps());
        if (c.region_size() <= 0) {
            throw new IllegalArgumentException(PID + ": region.size must be positive, not " + c.region_size());
        }
        this.regionSize = c.region_size();
    }

    public long defaultRegionSize() {
        return regionSize;
    }

    /** The core has unregistered us (service gone, MRs deregistered): free what is left. */
    @Deactivate
    void deactivate() {
        freeAll();
    }
}

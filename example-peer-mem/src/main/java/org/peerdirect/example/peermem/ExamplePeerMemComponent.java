package org.peerdirect.example.peermem;

import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.metatype.annotations.AttributeDefinition;
import org.osgi.service.metatype.annotations.Designate;
import org.osgi.service.metatype.annotations.ObjectClassDefinition;
import org.osgi.service.metatype.annotations.Option;
import org.osgi.service.component.annotations.Deactivate;
import org.osgi.service.component.annotations.Modified;
import org.osgi.service.component.annotations.Reference;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.peermem.alloc.PeerMemoryAllocator;
import org.peerdirect.peermem.PeerMemoryClient;

/**
 * The example client as an OSGi component: it publishes itself as a {@link PeerMemoryClient}
 * service and the IB core registers it (the whiteboard), like {@code example_peer_mem.ko}'s init
 * calling {@code ib_register_peer_memory_client}.
 *
 * <p>Configuration ({@value #PID}): {@code name}, {@code page.size} (4096, or 65536 for
 * GPU-like 64 KiB pages), {@code region.size} (default allocation size),
 * {@code peermem.invalidation} (register with an invalidation callback, default true) and
 * {@code invalidate.unmaps} (the INVALIDATE_UNMAPS flavour). As {@code example_peer_mem.ko}'s
 * module parameters are read at load, {@code name}, {@code page.size} and {@code invalidate.unmaps}
 * are the client's identity and apply at the next start of the bundle; {@code region.size} applies
 * at once. {@code peermem.invalidation} is a service property the IB core's whiteboard reads: a
 * change takes effect in place there (the core unregisters the client, waiting for its MRs, and
 * registers it again with the new flavour; the client learns it through
 * {@link #registered}), so the example keeps no copy of it. A delivery never re-creates the client (it used to, even for an unchanged
 * configuration such as the one Configuration Admin makes when the guard puts back a rejected
 * value: the unregistration then waited for every MR over the client's memory).
 *
 * <p>Stopping the bundle unregisters the client: the stop waits until every MR over its memory
 * is deregistered (logging the registrations it waits for), then frees its memory.
 */
@Component(immediate = true, // holds state: a delayed component would be disposed when unused
        // also under its own type, for this bundle's commands (the package is private)
        service = {PeerMemoryClient.class, PeerMemoryAllocator.class, ExamplePeerMemComponent.class}, configurationPid = ExamplePeerMemComponent.PID,
        property = PeerMemoryClient.INVALIDATION_PROPERTY + ":Boolean=true")
@Designate(ocd = ExamplePeerMemComponent.Config.class)
public final class ExamplePeerMemComponent extends ExamplePeerMemory {

    public static final String PID = "org.peerdirect.example_peer_mem";

    @ObjectClassDefinition(name = "example peer-memory client",
            description = "The template peer-memory client: its name, page size and invalidation flavour")
    @interface Config {
        // "applies at the next start": the suffix peerdirect:config reads (ConfigCommands.AT_NEXT_START)
        @AttributeDefinition(description = "client name under /sys/kernel/infiniband/memory_peers (1 to 63 characters, no '/'); applies at the next start")
        String name() default "example_peer";

        @AttributeDefinition(description = "page size reported by get_page_size: a power of two from 4 KiB to 4 MiB; applies at the next start",
                options = {@Option(label = "4K", value = "4096"), @Option(label = "8K", value = "8192"), @Option(label = "16K", value = "16384"), @Option(label = "32K", value = "32768"), @Option(label = "64K", value = "65536"), @Option(label = "128K", value = "131072"), @Option(label = "256K", value = "262144"), @Option(label = "512K", value = "524288"), @Option(label = "1M", value = "1048576"), @Option(label = "2M", value = "2097152"), @Option(label = "4M", value = "4194304")})
        long page_size() default 4096;

        @AttributeDefinition(min = "4096", max = "1099511627776", description = "default allocation size in bytes (4 KiB to 1 TiB)")
        long region_size() default 1 << 20;

        // a service property (the configuration's keys are the component's): read by the IB core's whiteboard
        @AttributeDefinition(description = "register with an invalidation callback (freeing memory invalidates its MRs); "
                + "applies in place: the IB core unregisters the client, waiting for its MRs, and registers it again")
        boolean peermem_invalidation() default true;

        @AttributeDefinition(description = "the INVALIDATE_UNMAPS flavour: the client unmaps right after an invalidation; applies at the next start")
        boolean invalidate_unmaps() default false;
    }

    /** The default allocation size: set by the activation and by {@link #modified}, read by the commands. */
    private volatile long regionSize;

    @Activate
    public ExamplePeerMemComponent(@Reference Mm mm, Config c) {
        super(mm, c.name(), c.page_size(), c.invalidate_unmaps());
        this.regionSize = regionSize(c);
    }

    /**
     * A new configuration: the region size at once; a different identity (name, page size,
     * flavour) is logged and kept for the next start, as a module parameter read at load is.
     */
    @Modified
    void modified(Config c) {
        regionSize = regionSize(c);
        if (!c.name().equals(name()) || c.page_size() != pageSize() || c.invalidate_unmaps() != ((flags() & INVALIDATE_UNMAPS) != 0)) {
            System.getLogger(PID).log(System.Logger.Level.INFO, PID + ": name, page.size and invalidate.unmaps are read at load: "
                    + "the new values apply at the next start of the client (stop and start its bundle)");
        }
    }

    private static long regionSize(Config c) {
        if (c.region_size() <= 0) {
            throw new IllegalArgumentException(PID + ": region.size must be positive, not " + c.region_size());
        }
        return c.region_size();
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

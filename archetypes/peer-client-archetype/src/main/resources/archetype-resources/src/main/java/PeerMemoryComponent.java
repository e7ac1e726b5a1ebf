package ${package};

import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Deactivate;
import org.osgi.service.component.annotations.Reference;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.peermem.PeerMemoryClient;
import org.peerdirect.peermem.alloc.PeerMemoryAllocator;

/**
 * The client as an OSGi component: it publishes itself as a {@link PeerMemoryClient} service and
 * peerdirect's IB core registers it as {@value #NAME} (the whiteboard; {@code peermem:clients}
 * lists it), with an invalidation callback ({@link PeerMemoryClient#INVALIDATION_PROPERTY}). As a
 * {@link PeerMemoryAllocator} it offers its memory to the {@code rdma:*} tools
 * ({@code rdma:pingpong --mem ${clientName}}).
 *
 * <p>Stopping the bundle unregisters the client: the stop waits until every MR over its memory
 * is deregistered, then {@link #deactivate} frees what is left.
 */
@Component(immediate = true, service = {PeerMemoryClient.class, PeerMemoryAllocator.class},
        property = PeerMemoryClient.INVALIDATION_PROPERTY + ":Boolean=true")
public final class PeerMemoryComponent extends PeerMemory {

    /** The name the client registers under (at most {@link PeerMemoryClient#NAME_MAX} characters). */
    public static final String NAME = "${clientName}";

    @Activate
    public PeerMemoryComponent(@Reference Mm mm) {
        super(mm, NAME, 4096, false);
    }

    /** The core has unregistered the client (service gone, MRs deregistered): free what is left. */
    @Deactivate
    void deactivate() {
        freeAll();
    }
}

package org.peerdirect.hca.boards;

import org.osgi.annotation.versioning.ProviderType;
import org.osgi.service.component.annotations.Component;

/**
 * The subnet that links the ports of boards in one JVM: it assigns LIDs (as a subnet manager
 * does) and routes a packet to the port with the destination LID. Lookup is an array read.
 *
 * <p>A lab constructs one and hands it to the boards it builds; in the container it is the
 * service every HCA model plugs its boards into. A board's silicon {@link #attach attaches} its
 * ports when it powers up and {@link #detach detaches} them when it goes; a lab never needs to.
 */
@Component(service = Fabric.class, immediate = true)
public final class Fabric {

    /** A port on the subnet, as the subnet manager knows it: by its LID. Implemented by the silicon. */
    @ProviderType
    public interface Port {
        /** The LID {@link Fabric#attach} assigned, 0 before. */
        int lid();
    }

    /** Unicast LIDs are 1..0xBFFF. */
    static final int MAX_LID = 0xC000;

    /** Written under this; read without a lock on the data path ({@link #port}). */
    private final Port[] byLid = new Port[MAX_LID];
    /** Guarded by this. */
    private int nextLid = 1;

    /** Brings a port up: assigns it the next LID. */
    public synchronized int attach(Port port) {
        int lid = nextLid++;
        if (lid >= MAX_LID) {
            throw new IllegalStateException("fabric is out of LIDs");
        }
        byLid[lid] = port;
        return lid;
    }

    /** Takes a port off the subnet: packets to its LID are lost from now on. */
    public synchronized void detach(Port port) {
        int lid = port.lid();
        if (lid > 0 && lid < MAX_LID && byLid[lid] == port) {
            byLid[lid] = null;
        }
    }

    /** The port with this LID, or null (unassigned, or its board removed). */
    public Port port(int lid) {
        return lid > 0 && lid < MAX_LID ? byLid[lid] : null;
    }
}

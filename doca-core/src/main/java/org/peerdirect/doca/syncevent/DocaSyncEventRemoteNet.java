package org.peerdirect.doca.syncevent;

import org.peerdirect.doca.DocaDpaContext;
import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.dev.DocaDev;

/**
 * {@code struct doca_sync_event_remote_net}: a remote node's sync event, imported from its export,
 * that this node signals over RDMA (DOCA RDMA's {@code signal_set/add}, from the DPA with
 * {@code doca_dpa_dev_rdma_signal_*} through {@link #getDpaHandle}); {@link #addr}/{@link #rkey}
 * say where an RDMA atomic must land [model]. It cannot be configured. Not thread-safe.
 */
public final class DocaSyncEventRemoteNet {

    private final DocaDev dev;
    private final SyncEventExportDesc desc;
    private boolean destroyed;
    /** DPA handles given out, per DPA context. */
    private final java.util.Map<DocaDpaContext, Long> dpaHandles = new java.util.HashMap<>();

    private DocaSyncEventRemoteNet(DocaDev dev, SyncEventExportDesc desc) {
        this.dev = dev;
        this.desc = desc;
    }

    /**
     * {@code doca_sync_event_remote_net_create_from_export}.
     *
     * @throws DocaException INVALID_VALUE (null or closed device, malformed data)
     */
    public static DocaSyncEventRemoteNet createFromExport(DocaDev dev, byte[] data) {
        DocaException.check(dev != null, DocaError.DOCA_ERROR_INVALID_VALUE, "doca_sync_event_remote_net_create_from_export: null device");
        dev.checkOpen("doca_sync_event_remote_net_create_from_export");
        DocaSyncEventRemoteNet r = new DocaSyncEventRemoteNet(dev, SyncEventExportDesc.parse(data));
        dev.hold(r);
        return r;
    }

    /**
     * {@code doca_sync_event_remote_net_get_dpa_handle}: what {@code doca_dpa_dev_rdma_signal_set/add}
     * take, the remote counter's address and key in {@code dpa}'s memory [model]; one per DPA
     * context, freed with this handle.
     *
     * @throws DocaException INVALID_VALUE (null, destroyed), NOT_SUPPORTED (a context without DPA memory), BAD_STATE
     */
    public long getDpaHandle(DocaDpaContext dpa) {
        check("doca_sync_event_remote_net_get_dpa_handle");
        DocaException.check(dpa != null, DocaError.DOCA_ERROR_INVALID_VALUE, "doca_sync_event_remote_net_get_dpa_handle: null DPA");
        return dpaHandles.computeIfAbsent(dpa, d -> d.dpaRemoteSyncEventHandle(desc.addr(), desc.rkey()));
    }

    /** The remote counter's address in its owner's process [model]. */
    public long addr() {
        check("doca_sync_event_remote_net addr");
        return desc.addr();
    }

    /** The key of the remote counter's registration (RDMA write and atomic allowed) [model]. */
    public int rkey() {
        check("doca_sync_event_remote_net rkey");
        return desc.rkey();
    }

    /** The local device the handle was imported through. */
    public DocaDev dev() {
        return dev;
    }

    /** {@code doca_sync_event_remote_net_destroy}; a second one is INVALID_VALUE. */
    public void destroy() {
        check("doca_sync_event_remote_net_destroy");
        destroyed = true;
        dev.unhold(this);
        for (java.util.Map.Entry<DocaDpaContext, Long> e : dpaHandles.entrySet()) {
            try {
                e.getKey().dpaRemoteSyncEventHandleFree(e.getValue());
            } catch (DocaException x) {
                if (x.error() != DocaError.DOCA_ERROR_BAD_STATE) { // BAD_STATE: the DPA context stopped, the handle went with its memory
                    throw x;
                }
            }
        }
        dpaHandles.clear();
    }

    private void check(String what) {
        DocaException.check(!destroyed, DocaError.DOCA_ERROR_INVALID_VALUE, what + ": the handle was destroyed");
    }

    @Override
    public String toString() {
        return String.format("doca_sync_event_remote_net %d at 0x%x rkey 0x%x via %s", desc.eventId(), desc.addr(), desc.rkey(), dev.name());
    }
}

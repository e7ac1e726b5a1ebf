package org.peerdirect.doca;

import org.osgi.annotation.versioning.ConsumerType;
import org.peerdirect.doca.dev.DocaDev;

/**
 * What DOCA Core needs of a {@code struct doca_dpa} (the DOCA DPA context, built in the
 * {@code doca-dpa} library on FlexIO): the device it runs on, and a sync event counter in its DPA
 * memory for an event whose subscriber is the DPA (DPA_MODEL.md §2.5: the DPA updates it with its
 * own atomics; the host reads and sets it through the DPA runtime's copies). The counter calls
 * answer {@link DocaError#DOCA_ERROR_NOT_SUPPORTED} unless the implementation has DPA memory.
 */
@ConsumerType
public interface DocaDpaContext {

    /** The device the DPA context was created on ({@code doca_dpa_create(dev, ...)}). */
    DocaDev dev();

    /** Whether the context has DPA memory for sync event counters (a DOCA DPA context does; the calls below answer NOT_SUPPORTED otherwise). */
    default boolean hasDpaMemory() {
        return false;
    }

    /**
     * An 8-byte counter, zero, in the context's DPA memory; its DPA address (what the DPA's
     * sync event handle names).
     *
     * @throws DocaException BAD_STATE (the context is not started), NO_MEMORY, NOT_SUPPORTED
     */
    default long syncEventCounterAlloc() {
        throw new DocaException(DocaError.DOCA_ERROR_NOT_SUPPORTED, "this DPA context has no DPA memory for a sync event");
    }

    /** Frees a counter of {@link #syncEventCounterAlloc}; BAD_STATE once the context stopped (the counter went with its memory). */
    default void syncEventCounterFree(long daddr) {
        throw new DocaException(DocaError.DOCA_ERROR_NOT_SUPPORTED, "this DPA context has no DPA memory for a sync event");
    }

    /** The counter's value, read from DPA memory (one 8-byte copy). */
    default long syncEventCounterGet(long daddr) {
        throw new DocaException(DocaError.DOCA_ERROR_NOT_SUPPORTED, "this DPA context has no DPA memory for a sync event");
    }

    /** Stores {@code value} into the counter (one 8-byte copy into DPA memory). */
    default void syncEventCounterSet(long daddr, long value) {
        throw new DocaException(DocaError.DOCA_ERROR_NOT_SUPPORTED, "this DPA context has no DPA memory for a sync event");
    }

    /**
     * An mkey over {@code len} bytes of the context's DPA memory at {@code daddr} (local and remote
     * read, write and atomics), for a map's DPA memory range ({@code doca_mmap_set_dpa_memrange})
     * or a DPA-subscribed sync event a remote node publishes to; its key.
     *
     * @throws DocaException INVALID_VALUE (a range outside the DPA memory), BAD_STATE, NOT_SUPPORTED
     */
    default int dpaMkeyCreate(long daddr, long len) {
        throw new DocaException(DocaError.DOCA_ERROR_NOT_SUPPORTED, "this DPA context has no DPA memory for a memory map");
    }

    /** Destroys a key of {@link #dpaMkeyCreate}. */
    default void dpaMkeyDestroy(int key) {
        throw new DocaException(DocaError.DOCA_ERROR_NOT_SUPPORTED, "this DPA context has no DPA memory for a memory map");
    }

    /**
     * A key the context's DPA process reaches {@code len} bytes of host memory at {@code va} with
     * (a map of host memory's {@code doca_mmap_dev_get_dpa_handle}): an mkey of the process's PD,
     * writable only when {@code writable} (the map's permissions) [model].
     *
     * @throws DocaException BAD_STATE (not started), NOT_SUPPORTED, DRIVER
     */
    default int dpaHostMkeyCreate(long va, long len, boolean writable) {
        throw new DocaException(DocaError.DOCA_ERROR_NOT_SUPPORTED, "this DPA context cannot reach host memory");
    }

    /** Whether the context is started (a DPA process exists to give keys); false by default. */
    default boolean dpaStarted() {
        return false;
    }

    /**
     * The DPA handle of a remote node's sync event ({@code doca_sync_event_remote_net_get_dpa_handle}):
     * where DPA code finds the remote counter's address and key for
     * {@code doca_dpa_dev_rdma_signal_set/add}, in the context's DPA memory [model].
     *
     * @throws DocaException BAD_STATE (not started), NO_MEMORY, NOT_SUPPORTED
     */
    default long dpaRemoteSyncEventHandle(long addr, int rkey) {
        throw new DocaException(DocaError.DOCA_ERROR_NOT_SUPPORTED, "this DPA context has no DPA memory for a remote sync event's handle");
    }

    /** Frees a handle of {@link #dpaRemoteSyncEventHandle}; BAD_STATE once the context stopped (it went with its memory). */
    default void dpaRemoteSyncEventHandleFree(long handle) {
        throw new DocaException(DocaError.DOCA_ERROR_NOT_SUPPORTED, "this DPA context has no DPA memory for a remote sync event's handle");
    }

    /**
     * The DPA handle of a sync event counter in host memory at {@code va} (8 bytes of the
     * context's process, a CPU subscriber's): a descriptor in the context's DPA memory naming the
     * counter, a key of the DPA process over it and the context's window, which the device's
     * {@code doca_dpa_dev_sync_event_*} reach it through [model].
     *
     * @throws DocaException BAD_STATE (not started), NO_MEMORY, DRIVER, NOT_SUPPORTED
     */
    default long dpaHostSyncEventHandle(long va) {
        throw new DocaException(DocaError.DOCA_ERROR_NOT_SUPPORTED, "this DPA context cannot reach a sync event in host memory");
    }

    /** Frees a handle of {@link #dpaHostSyncEventHandle} and its key; BAD_STATE once the context stopped (both went with the process). */
    default void dpaHostSyncEventHandleFree(long handle) {
        throw new DocaException(DocaError.DOCA_ERROR_NOT_SUPPORTED, "this DPA context cannot reach a sync event in host memory");
    }
}

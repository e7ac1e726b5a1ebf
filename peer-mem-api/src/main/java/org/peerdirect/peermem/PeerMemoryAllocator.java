package org.peerdirect.peermem;

import org.osgi.annotation.versioning.ConsumerType;

/**
 * Optional: a peer device whose memory tools and tests can allocate, as {@code cudaMalloc} is to
 * {@code perftest --use_cuda} or {@code ibv_rc_pingpong} built with GPU support. Published as a
 * service by a client bundle beside its {@link PeerMemoryClient}, with the same {@link #name()}.
 * The memory is mapped into the process as device memory (not pinnable), so registering it takes
 * the peer path.
 *
 * @since 1.1
 */
@ConsumerType
public interface PeerMemoryAllocator {

    /** The peer client's name. */
    String name();

    /** Allocates at least {@code size} bytes of device memory mapped into process {@code pid}; returns the address. */
    long alloc(int pid, long size);

    /** Frees an allocation: its registrations are invalidated first (or EBUSY for clients that cannot). */
    void free(int pid, long addr);
}

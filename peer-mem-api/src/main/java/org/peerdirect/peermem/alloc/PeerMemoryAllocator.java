package org.peerdirect.peermem.alloc;

import org.osgi.annotation.versioning.ConsumerType;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.peermem.PeerMemoryClient;

/**
 * Optional: a peer device whose memory tools and tests can allocate, as {@code cudaMalloc} is to
 * {@code perftest --use_cuda} or {@code ibv_rc_pingpong} built with GPU support. Published as a
 * service by a client bundle beside its {@link PeerMemoryClient}, with the same {@link #name()}.
 * The memory is mapped into the process as device memory (not pinnable), so registering it takes
 * the peer path.
 *
 * <p>In its own package since peer-mem-api 3.0.0: it hands out process mappings and kernel errors
 * ({@code org.peerdirect.kernel.mm}, not released), so it is versioned apart from the released client
 * contract, which no longer depends on an unreleased package. Its {@code @since} tags are the versions
 * of {@code org.peerdirect.peermem} in which each call appeared.
 *
 * @since 1.1 (of org.peerdirect.peermem)
 */
@ConsumerType
public interface PeerMemoryAllocator {

    /** The peer client's name. */
    String name();

    /** Allocates at least {@code size} bytes of device memory mapped into process {@code pid}; returns the address. */
    long alloc(int pid, long size);

    /**
     * The devices {@link #alloc(int, long, int)} can allocate on (a host's GPUs): 1 unless the
     * client has more.
     *
     * @since 2.3
     */
    default int devices() {
        return 1;
    }

    /**
     * Allocates on device {@code device} (0 to {@link #devices()} − 1), as {@code cudaSetDevice}
     * then {@code cudaMalloc} ({@code perftest --use_cuda=<index>}); everything else takes the
     * address alone, which tells the device (unified addresses). The default serves device 0 by
     * {@link #alloc(int, long)}.
     *
     * @throws KernelException ENODEV for a device the client does not have
     * @since 2.3
     */
    default long alloc(int pid, long size, int device) {
        if (device == 0) {
            return alloc(pid, size);
        }
        throw new KernelException(Errno.ENODEV,
                name() + ": no device " + device + " (it has " + devices() + ")");
    }

    /**
     * Maps the device memory at a fixed device offset into process {@code pid} (as {@code mmap}
     * of a DAX or PMR device file at that offset), for memory whose offsets mean something across
     * runs: an SSD's persistent memory region. Undone by {@link #free}. The default refuses:
     * most devices' memory has no fixed offsets.
     *
     * @throws KernelException EOPNOTSUPP when the device has no fixed offsets
     * @since 2.2
     */
    default long map(int pid, long deviceOffset, long size) {
        throw new KernelException(Errno.EOPNOTSUPP,
                name() + ": device memory without fixed offsets (allocate it instead)");
    }

    /**
     * Exports [addr, addr+size) of an allocation of process {@code pid} as a dma-buf open in that
     * process; returns the descriptor ({@code cuMemGetHandleForAddressRange} with
     * {@code CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD} for a GPU), for {@code ibv_reg_dmabuf_mr}. The
     * default refuses.
     *
     * @throws KernelException EOPNOTSUPP when the device exports no dma-buf
     * @since 2.2
     */
    default int exportDmabuf(int pid, long addr, long size) {
        throw new KernelException(Errno.EOPNOTSUPP,
                name() + ": exports no dma-buf");
    }

    /** Frees an allocation: its registrations are invalidated first (or EBUSY for clients that cannot). */
    void free(int pid, long addr);

    /**
     * Copies {@code len} bytes of {@code src} into device memory at {@code addr} of {@code proc}
     * ({@code cuMemcpyHtoD}'s role). The default stores through the process's mapping, for devices
     * whose memory the CPU reaches; a GPU, whose memory an x86 CPU cannot touch, copies with its
     * copy engine.
     *
     * @since 2.1
     */
    default void copyToDevice(AddressSpace proc, long addr, byte[] src, int off, int len) {
        proc.write(addr, src, off, len);
    }

    /**
     * Copies {@code len} bytes of device memory at {@code addr} of {@code proc} into {@code dst}
     * ({@code cuMemcpyDtoH}'s role); the default loads through the process's mapping.
     *
     * @since 2.1
     */
    default void copyFromDevice(AddressSpace proc, long addr, byte[] dst, int off, int len) {
        proc.read(addr, dst, off, len);
    }
}

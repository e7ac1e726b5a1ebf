package org.peerdirect.ib.core.umem;

import org.osgi.annotation.versioning.ProviderType;

/**
 * {@code struct ib_umem_odp}: an on-demand-paging registration. Nothing is pinned or mapped when
 * it is created; the driver maps pages when its device faults on them (or on prefetch), and an
 * invalidation of the process's range unmaps them before the frames change.
 *
 * <h2>Protocol (the interval notifier's collision-retry scheme)</h2>
 * <pre>
 *   fault:       n = umem.mapDmaAndLock(va, len, access, true)   returns holding the umem mutex
 *                read dmaEntry(...) for each page, program the device (UMR)
 *                umem.unlock()
 *   invalidate:  (the driver's {@link UmemOdpInvalidate}, called by the mm before the pages change)
 *                umem.lock(); umem.setSeq(curSeq); zap the device's translation and wait for
 *                its DMA; umem.unmapDmaPages(start, end); umem.unlock()
 * </pre>
 * The umem mutex is {@code umem_mutex}: it serialises the fault path's mapping against the
 * invalidation's unmapping, and a mapping made from a walk that an invalidation overtook is never
 * installed ({@code mmu_interval_read_retry} under the mutex).
 *
 * <h2>Cost</h2>
 * Unlike the kernel, whose {@code pfn_list} and {@code dma_list} are arrays over the whole range
 * (16 bytes per 4 KiB page, allocated at registration), the per-page entries live in 512-entry
 * chunks made when a page in them is first mapped and dropped when their last page is unmapped:
 * a 1 TiB registration costs nothing until it is touched ({@link #metadataBytes()}).
 *
 * <p>An implicit umem ({@code ib_umem_odp_alloc_implicit}) has no range, no list and no notifier;
 * its children ({@link #allocChild}) are ordinary ODP umems over parts of the address space.
 *
 * @see "include/rdma/ib_umem_odp.h, drivers/infiniband/core/umem_odp.c"
 */
@ProviderType
public interface IbUmemOdp {

    /** {@code ODP_READ_ALLOWED_BIT}: the device may read the page (low bit of a {@link #dmaEntry}). */
    long ODP_READ_ALLOWED = 1;
    /** {@code ODP_WRITE_ALLOWED_BIT}: the device may write the page. */
    long ODP_WRITE_ALLOWED = 1 << 1;
    /** The access bits of a {@link #dmaEntry}; the rest is the DMA address. */
    long ODP_DMA_ADDR_MASK = ~(ODP_READ_ALLOWED | ODP_WRITE_ALLOWED);

    /** The registration's user address (unaligned; 0 for an implicit umem). */
    long address();

    /** The registration's length (0 for an implicit umem). */
    long length();

    /** {@code ib_umem_start}: the address aligned down to the page size. */
    long start();

    /** {@code ib_umem_end}: the end aligned up to the page size. */
    long end();

    /** {@code page_shift}: 12, or 21 with {@code IB_ACCESS_HUGETLB}. */
    int pageShift();

    /** Whether the device may write ({@code ib_access_writable} of the access flags). */
    boolean writable();

    /** {@code is_implicit_odp}. */
    boolean isImplicit();

    /** The process whose address space the range is in. */
    int pid();

    /**
     * {@code ib_umem_odp_map_dma_and_lock}: makes [userVirt, userVirt+bcnt) present for the device
     * with {@code accessMask} ({@link #ODP_READ_ALLOWED}, {@link #ODP_WRITE_ALLOWED}). With
     * {@code fault}, missing pages are faulted in for the CPU first ({@code hmm_range_fault} with
     * {@code HMM_PFN_REQ_FAULT}, for write if asked); without it, only the pages present for the
     * CPU now are mapped, with write access where the CPU may write (the no-fault snapshot of
     * registration and {@code PREFETCH_NO_FAULT}). Pages already mapped only gain access bits.
     * Retries while invalidations overtake the walk (see EBUSY below for the bound).
     *
     * @return the number of pages of the range mapped now, <b>with the umem mutex held</b>: the
     *         caller reads the entries, programs the device, then calls {@link #unlock()}. On an
     *         exception the mutex is not held.
     * @throws org.peerdirect.kernel.mm.KernelException EFAULT the range is outside the umem, or
     *         the walk met a hole, a device mapping or a protection that refuses the access;
     *         EINVAL the process has exited, an implicit umem, or a huge-page umem over pages that
     *         are not huge; EBUSY invalidations kept interrupting the walk itself
     *         ({@code hmm_range_fault}) past its one-second timeout. A walk overtaken only after it
     *         finished (the {@code mmu_interval_read_retry} check) is walked again without a bound,
     *         as the kernel does.
     */
    long mapDmaAndLock(long userVirt, long bcnt, long accessMask, boolean fault);

    /** Takes the umem mutex ({@code mutex_lock(&umem_odp->umem_mutex)}). */
    void lock();

    /** Releases the umem mutex. */
    void unlock();

    /** Whether the calling thread holds the umem mutex (for assertions). */
    boolean isLockedByCurrentThread();

    /**
     * The {@code dma_list} entry of the page holding {@code va}: its DMA address with the access
     * bits in the low bits, or 0 when the page is not mapped for the device. Caller holds the
     * umem mutex.
     */
    long dmaEntry(long va);

    /**
     * The first mapped page (granule) at or after {@code va} and before {@code bound}: its address,
     * or -1 when none. Skips unmapped stretches without visiting them page by page, so a driver can
     * walk what a huge, sparsely mapped umem holds. Caller holds the umem mutex.
     */
    long nextMapped(long va, long bound);

    /** {@code mmu_interval_set_seq}: from the invalidation callback, under the umem mutex. */
    void setSeq(long curSeq);

    /**
     * {@code ib_umem_odp_unmap_dma_pages}: unmaps the pages of [virt, bound) that are mapped (the
     * IOMMU waits for DMA through them) and clears their entries. Caller holds the umem mutex and
     * has already stopped the device from using them.
     */
    void unmapDmaPages(long virt, long bound);

    /** {@code npages}: pages mapped for the device now. */
    long mappedPages();

    /** Bytes of per-page bookkeeping held now (it grows with what is mapped, not with the range). */
    long metadataBytes();

    /**
     * {@code ib_umem_odp_alloc_child}: an ODP umem over [addr, addr+size) of an implicit umem's
     * process, with the parent's access and its own notifier calling {@code ops}.
     *
     * @throws org.peerdirect.kernel.mm.KernelException EINVAL on a umem that is not implicit or a
     *         bad range; EFAULT when the process has exited
     */
    IbUmemOdp allocChild(long addr, long size, UmemOdpInvalidate ops);

    /**
     * {@code ib_umem_odp_release}: unmaps every page, removes the notifier (waiting for a running
     * invalidation) and frees the lists. Must not be called holding the umem mutex.
     *
     * @throws IllegalStateException released twice
     */
    void release();
}

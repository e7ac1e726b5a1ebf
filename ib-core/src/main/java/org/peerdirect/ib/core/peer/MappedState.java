package org.peerdirect.ib.core.peer;

/**
 * {@code enum ib_umem_mapped_state} of a peer umem, with its one transition method. Guarded by
 * the umem's mapping lock.
 *
 * <pre>
 *   UNMAPPED --MAP--------> MAPPED        num_alloc_mrs, num_reg_pages/bytes
 *   MAPPED --INVALIDATE---> UNMAPPED      driver func, core dma_unmap + put_pages,
 *                                         num_dealloc_mrs, num_dereg_pages/bytes
 *   MAPPED --INVALIDATE---> INVALIDATED   (INVALIDATE_UNMAPS client) driver func, num_dealloc_mrs;
 *                                         the client unmaps itself
 *   MAPPED --DEREGISTER---> UNMAPPED      core dma_unmap + put_pages, num_dealloc_mrs, num_dereg_*
 *   INVALIDATED --DEREGISTER--> UNMAPPED  num_dereg_* only
 *   anything else: no change, no effect (an invalidation of an unmapped umem only counts)
 * </pre>
 * {@code num_dereg_pages} grows by the umem's {@code nmap}: the 5.1–5.4 behaviour, not OFED 5.5's,
 * which zeroes the table first and so never grows it.
 */
enum MappedState {
    UNMAPPED, MAPPED, INVALIDATED;

    enum Event { MAP, INVALIDATE, DEREGISTER }

    /**
     * What an event does in this state.
     *
     * @param next        the state afterwards
     * @param callDriver  call the driver's invalidate function (if armed) before anything else
     * @param coreUnmaps  the core calls {@code dmaUnmap} then {@code putPages}
     * @param allocMr     count a registration (num_alloc_mrs, num_reg_*)
     * @param deallocMr   count num_dealloc_mrs
     * @param deregPages  count num_dereg_pages / num_dereg_bytes
     */
    record Step(MappedState next, boolean callDriver, boolean coreUnmaps, boolean allocMr, boolean deallocMr, boolean deregPages) {
    }

    private static Step stay(MappedState s) {
        return new Step(s, false, false, false, false, false);
    }

    Step on(Event e, boolean unmapsOnInvalidate) {
        return switch (this) {
            case UNMAPPED -> e == Event.MAP ? new Step(MAPPED, false, false, true, false, false) : stay(this);
            case MAPPED -> switch (e) {
                case MAP -> throw new IllegalStateException("peer umem mapped twice");
                case INVALIDATE -> unmapsOnInvalidate
                        ? new Step(INVALIDATED, true, false, false, true, false)
                        : new Step(UNMAPPED, true, true, false, true, true);
                case DEREGISTER -> new Step(UNMAPPED, false, true, false, true, true);
            };
            case INVALIDATED -> switch (e) {
                case MAP -> throw new IllegalStateException("invalidated peer umem mapped again");
                case INVALIDATE -> stay(this);
                case DEREGISTER -> new Step(UNMAPPED, false, false, false, false, true);
            };
        };
    }
}

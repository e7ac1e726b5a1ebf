package org.peerdirect.hca.dpa.isa;

/**
 * A memory space of a fence ({@code __DPA_HEAP}, {@code __DPA_MEMORY}, {@code __DPA_MMIO},
 * {@code __DPA_SYSTEM} of {@code dpaintrin.h}).
 */
public enum Space {
    /** {@code __DPA_HEAP}: the process heap (part of {@link #MEMORY}). */
    HEAP,
    /** {@code __DPA_MEMORY}: process memory (heap, stack, data), not MMIO. */
    MEMORY,
    /** {@code __DPA_MMIO}: the window apertures and the outbox. */
    MMIO,
    /** {@code __DPA_SYSTEM}: every space. */
    SYSTEM;

    /** Whether a fence on this space orders accesses to DPA memory. */
    public boolean coversMemory() {
        return this != MMIO;
    }

    /** Whether a fence on this space orders window and outbox accesses. */
    public boolean coversMmio() {
        return this == MMIO || this == SYSTEM;
    }
}

/**
 * sim-kernel's private half of {@code mm/}: the frames and their {@code struct page} table
 * ({@link org.peerdirect.kernel.mm.internal.PhysicalMemory}). Not exported: other bundles reach
 * memory through a process ({@code AddressSpace}), through {@code Mm}'s page allocator (a kernel
 * driver's {@code alloc_pages}) or, as devices, through their IOMMU domain; only the IOMMU and the
 * memory manager in this bundle see frames.
 */
package org.peerdirect.kernel.mm.internal;

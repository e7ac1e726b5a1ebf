/**
 * The BlueField-3 Data-Path Accelerator's silicon (private): DPA memory (on-card, not behind the
 * host IOMMU), execution units, the DPA RTOS scheduling DPA threads onto them, the image loader
 * and verifier, the outbox and window MMIO, and the checked weak memory model. Hardware and
 * firmware vocabulary only; device code reaches it only through {@code org.peerdirect.hca.dpa.isa}.
 * The entry point is {@link org.peerdirect.hca.dpa.DpaUnit}.
 */
package org.peerdirect.hca.dpa;

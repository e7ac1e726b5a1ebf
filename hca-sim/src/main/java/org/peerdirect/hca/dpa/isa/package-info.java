/**
 * The DPA's instruction-set boundary: everything code running on a DPA execution unit (a hart) can
 * do, as static calls of {@link org.peerdirect.hca.dpa.isa.Dpa} on the current hart. Loads and
 * stores on DPA addresses, atomics, fences by memory space, cache control, the per-EU counters and
 * the DPA RTOS's system calls; each call is a scheduling point of the silicon's scheduler.
 *
 * <p>This is the only package of {@code hca-sim} a DPA image may reference (with its device
 * libraries and a {@code java.lang} allowlist); the silicon behind it is private. The names map
 * one to one to the C intrinsics of {@code dpaintrin.h} and the system calls of
 * {@code flexio_dev.h} (the table is in {@link org.peerdirect.hca.dpa.isa.Dpa}).
 */
@Export
@Version("0.3.0")
package org.peerdirect.hca.dpa.isa;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;

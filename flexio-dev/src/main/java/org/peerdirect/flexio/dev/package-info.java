/**
 * FlexIO's device library ({@code libflexio_dev}: {@code flexio_dev.h}, {@code flexio_dev_err.h},
 * {@code flexio_dev_queue_access.h}), the code a DPA handler calls. Statically linked into DPA
 * images: its classes reference only the DPA ISA ({@link org.peerdirect.hca.dpa.isa.Dpa}) and the
 * silicon's {@code java.lang} allowlist, so the image verifier accepts them, and every call is a
 * thin layer over {@code Dpa.*} so the memory-model checker sees the library's own accesses.
 *
 * <p>Errors, as the C library reports them: calls that return {@code flexio_dev_status_t} return
 * {@link org.peerdirect.flexio.dev.FlexioDev#STATUS_SUCCESS} or
 * {@link org.peerdirect.flexio.dev.FlexioDev#STATUS_FAILED}; a bad address, an unaligned access or a
 * doorbell on a foreign queue is the silicon's business and ends the process (its status and crash
 * data say why), as it does on the DPA. Nothing here throws to device code.
 *
 * <p>Java names map one to one to the C names ({@code flexio_dev_cq_arm} → {@code FlexioDev.cqArm});
 * each method's {@code @see} names its original.
 */
@Export
@Version("0.1.0")
package org.peerdirect.flexio.dev;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;

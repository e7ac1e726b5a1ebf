/**
 * Device memory that tools and tests can allocate ({@code cudaMalloc} for {@code perftest
 * --use_cuda}): {@link org.peerdirect.peermem.alloc.PeerMemoryAllocator}, published by a peer
 * client's bundle beside its client. Not released (0.x): it speaks the simulated kernel's process
 * and error types ({@code org.peerdirect.kernel.mm} 0.x), which the released client contract
 * ({@code org.peerdirect.peermem} 3.x) must not depend on.
 */
@Export
@Version("0.1.0")
package org.peerdirect.peermem.alloc;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;

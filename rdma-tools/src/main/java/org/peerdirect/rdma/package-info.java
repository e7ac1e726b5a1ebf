/**
 * User-space helpers over the verbs API that programs and tests share: {@link
 * org.peerdirect.rdma.RcConnect}, the RESET → INIT → RTR → RTS sequence of {@code pp_connect_ctx}.
 */
@Export
@Version("0.3.0")
package org.peerdirect.rdma;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;

/**
 * The user verbs objects alive now, read-only, for tools that show them (the web console): each
 * process's contexts with their protection domains, memory regions (kind, state), queue pairs and
 * completion queues, as rdma-core's {@code rdma resource show} lists them.
 */
@Export
@Version("0.1.0")
package org.peerdirect.ib.core.objects;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;

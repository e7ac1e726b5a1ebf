/**
 * DOCA Core's sync event ({@code doca_sync_event.h}): {@link
 * org.peerdirect.doca.syncevent.DocaSyncEvent}, a 64-bit counter with one publisher and one
 * subscriber location, and {@link org.peerdirect.doca.syncevent.DocaSyncEventRemoteNet}, a remote
 * node's event imported from its export. CPU publishers and subscribers work; DPA locations and
 * signalling a remote event come with DOCA DPA on FlexIO and DOCA RDMA and answer
 * {@code DOCA_ERROR_NOT_SUPPORTED} until then.
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/Sync+Event">DOCA Sync Event</a>
 */
@Export
@Version("0.5.0")
package org.peerdirect.doca.syncevent;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;

/**
 * The HCA transport engine: what the silicon of an RDMA NIC does, shared by the ConnectX-3 and
 * (later) ConnectX-4+ personalities. Memory protection tables (MPT entries with their MTT-style
 * translations to IOVAs), completion queues, queue pairs with the RC and UD transports (PSNs,
 * acknowledgements, RNR NAK back-off, transport retries, flush on error), shared receive queues
 * and the {@link org.peerdirect.hca.engine.Fabric} that links the ports of devices in one JVM.
 * Every byte moves through the devices' IOMMU domains.
 *
 * <p>Simplifications, stated: the driver hands work requests to the device by a direct call
 * (a BlueFlame-style doorbell carrying the WQE) and completions are written into a CQ ring in
 * the device model rather than DMA'd into host memory; the payload always goes through the
 * IOMMU. The fabric is lossless, so transport retries happen only when the destination is
 * unreachable (its device removed, its QP not ready).
 */
@Export
@Version("0.1.0")
package org.peerdirect.hca.engine;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;

/**
 * DOCA Verbs ({@code libdoca_verbs}: {@code doca_verbs.h}, DOCA 3.2) with its data path on the DPA:
 * {@link org.peerdirect.doca.verbs.DocaVerbsQp} creates RC QPs whose queues live in the DPA heap of
 * a DOCA DPA context (DevX through FlexIO), whose CQs are DOCA DPA completion contexts, moves them
 * RESET→INIT→RTR→RTS with attributes and masks ({@link org.peerdirect.doca.verbs.DocaVerbsQpAttr},
 * {@link org.peerdirect.doca.verbs.DocaVerbsAhAttr}), and hands DPA code their handles for
 * {@code doca_dpa_dev_verbs_*} ({@link org.peerdirect.doca.dpa.dev.DocaDpaDevVerbs}).
 *
 * <p>What is absent: {@code doca_verbs_context} and {@code doca_verbs_pd} objects (the DOCA device
 * stands for both), CQ objects ({@code doca_verbs_cq_*}), the host data path
 * ({@code doca_verbs_bridge_post_*}), external umem/DBR/UAR (the library allocates in the DPA heap),
 * UC/UD, SRQs, raw Ethernet SQ/RQ ({@code doca_verbs_eth_*}), device attribute queries.
 */
@Export
@Version("0.1.0")
package org.peerdirect.doca.verbs;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;

/**
 * DOCA DPA's device library ({@code libdoca_dpa_dev}: {@code doca_dpa_dev.h}), the code a DOCA DPA
 * kernel calls. Statically linked into DPA images (marked {@code META-INF/dpa-device-library}): its
 * classes reference only the DPA ISA ({@link org.peerdirect.hca.dpa.isa.Dpa}), {@code flexio-dev}
 * and the silicon's {@code java.lang} allowlist, so the image verifier accepts them.
 *
 * <p>Java names map one to one to the C names ({@code doca_dpa_dev_thread_rank} →
 * {@code DocaDpaDev.threadRank}). Built: the thread calls ({@code DocaDpaDev}: rank, count, local
 * storage, reschedule, finish, notify, yield, log), the sync events on the DPA
 * ({@code DocaDpaDevSyncEvent}), completions ({@code DocaDpaDevCompletion}: get_completion, the
 * element getters, ack, request_notification) and RDMA from the DPA ({@code DocaDpaDevRdma}: posts,
 * signals, submit flags), DPA verbs ({@code DocaDpaDevVerbs}: send and receive WR setters, post +
 * commit), async ops ({@code DocaDpaDevAsyncOps}), the device trace ({@code DocaDpaDevTrace}) and the
 * kernel launch runtime ({@code DocaDpaDevKernel}: rank handler and start RPC, linked by dpacc with a
 * launch trampoline per kernel).
 */
@Export
@Version("0.4.0")
package org.peerdirect.doca.dpa.dev;

import org.osgi.annotation.bundle.Export;
import org.osgi.annotation.versioning.Version;

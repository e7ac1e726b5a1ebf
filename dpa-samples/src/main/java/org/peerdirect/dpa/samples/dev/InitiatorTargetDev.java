package org.peerdirect.dpa.samples.dev;

import org.peerdirect.doca.dpa.dev.DocaDpaDev;
import org.peerdirect.doca.dpa.dev.DocaDpaDevCompletion;
import org.peerdirect.doca.dpa.dev.DocaDpaDevRdma;
import org.peerdirect.doca.dpa.dev.DocaDpaDevSyncEvent;
import org.peerdirect.dpacc.DpaApp;
import org.peerdirect.dpacc.DpaGlobal;
import org.peerdirect.dpacc.DpaRpc;
import org.peerdirect.flexio.dev.FlexioDev;
import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * Device code of {@code dpa:sample initiator_target}: DOCA's {@code dpa_initiator_target} sample
 * ({@code samples/doca_dpa/dpa_initiator_target/device/dpa_initiator_target_kernels_dev.c} and
 * {@code common/dpa_initiator_target_common_defs.h}, doca-samples 3.3; DPA_MODEL.md §4 scenario 6),
 * its log lines as the C sample's {@code DOCA_DPA_DEV_LOG_*} print them. Also the device program of
 * itest's {@code DocaRdmaIT} (scenario 6 in Felix), hence exported.
 *
 * <p>[model] Where the C sample differs from what dpacc compiles: {@code struct dpa_thread1_arg} is
 * packed with a 32-bit {@code dpa_mmap_handle}, putting {@code length} at an unaligned offset the
 * DPA may not load in one access (C5); here every field is an 8-byte word. The C file's globals
 * {@code received_values} and {@code num_receive} (dpacc has no device globals) follow the argument
 * at {@link #T1_NUM_RECEIVE} and {@link #T1_RECEIVED_VALUES}. Each activation also records what it
 * read at {@link #T1_RECORD} (type, immediate, user data, value per receive) so a test can check
 * what the log shows without relying on a best-effort log, and {@link #T1_MUTANT_NO_REQUEST} (0 in
 * the sample) omits {@code request_notification}: scenario 6's mutant. There is no extended
 * device, so the context handle is 0 and {@code doca_dpa_dev_device_set} is never called.
 */
@DpaApp("dpa_sample_initiator_target")
public final class InitiatorTargetDev {

    /** {@code EXPECTED_NUM_RECEIVES}. */
    public static final int EXPECTED_NUM_RECEIVES = 4;
    /** {@code struct dpa_thread1_arg}, a word each: see the class comment. */
    public static final int T1_DPA_CTX_HANDLE = 0, T1_NOTIFICATION_COMP_HANDLE = 8, T1_DPA_COMP_HANDLE = 16, T1_TARGET_RDMA_HANDLE = 24,
            T1_LOCAL_BUF_ADDR = 32, T1_DPA_MMAP_HANDLE = 40, T1_LENGTH = 48;
    /** The C file's globals: {@code num_receive} (u32 in a word) and {@code received_values[4]} (u32 each). */
    public static final int T1_NUM_RECEIVE = 56, T1_RECEIVED_VALUES = 64;
    /** Not in the C sample: the mutant's switch (non-zero: no {@code request_notification}). */
    public static final int T1_MUTANT_NO_REQUEST = 80;
    /** Not in the C sample: per receive n, 4 words at {@code T1_RECORD + 32 n}: completion type, immediate, user data, value. */
    public static final int T1_RECORD = 88;
    /** Bytes of thread 1's argument with the globals and the record. */
    public static final int T1_SIZE = T1_RECORD + 32 * EXPECTED_NUM_RECEIVES;
    /** {@code struct dpa_thread2_arg}. */
    public static final int T2_SYNC_EVENT_HANDLE = 0, T2_COMPLETION_COUNT = 8, T2_SIZE = 16;
    /** The process error a thread-1 activation without a completion ends with (the C sample reads garbage instead). */
    public static final int ERROR_NO_COMPLETION = 0x95;

    private InitiatorTargetDev() {
    }

    private static void info(String text) {
        DocaDpaDev.log(DocaDpaDev.LOG_LEVEL_INFO, text);
    }

    /**
     * {@code thread1_kernel}: one receive completion per activation: logs the element, marks the
     * value received; after the 4th checks all four, notifies thread 2 and finishes; else re-posts
     * the receive, acknowledges, requests notification and reschedules.
     */
    @DpaGlobal("thread1_kernel")
    static void thread1Kernel(long arg) {
        String f = "thread1_kernel";
        info(f + ": Hello from Thread #1");
        long comp = Dpa.ld64(arg + T1_DPA_COMP_HANDLE);
        info(f + ": Read completion info");
        long e = DocaDpaDevCompletion.getCompletion(comp);
        info(f + ": doca_dpa_dev_get_completion() returned " + (e != 0 ? 1 : 0));
        if (e == 0) {
            FlexioDev.error(ERROR_NO_COMPLETION);
        }
        long n = Dpa.ld64(arg + T1_NUM_RECEIVE) + 1;
        Dpa.st64(arg + T1_NUM_RECEIVE, n);
        int type = DocaDpaDevCompletion.getCompletionType(e);
        info(f + ": doca_dpa_dev_get_completion_type() returned " + type);
        int imm = DocaDpaDevCompletion.getCompletionImmediate(e);
        info(f + ": doca_dpa_dev_get_completion_immediate() returned " + Integer.toUnsignedString(imm));
        int userData = DocaDpaDevCompletion.getCompletionUserData(e);
        info(f + ": doca_dpa_dev_get_completion_user_data() returned " + Integer.toUnsignedString(userData));
        long buf = Dpa.ld64(arg + T1_LOCAL_BUF_ADDR);
        long value = Dpa.ld64(buf);
        info(f + ": Value of DPA received buffer is " + Long.toUnsignedString(value));
        if (value >= 1 && value <= EXPECTED_NUM_RECEIVES) { // the C sample indexes without a check
            Dpa.st32(arg + T1_RECEIVED_VALUES + 4 * (value - 1), 1);
        }
        if (n <= EXPECTED_NUM_RECEIVES) {
            long rec = arg + T1_RECORD + 32 * (n - 1);
            Dpa.st64(rec, type);
            Dpa.st64(rec + 8, imm & 0xffffffffL);
            Dpa.st64(rec + 16, userData & 0xffffffffL);
            Dpa.st64(rec + 24, value);
        }
        if (n == EXPECTED_NUM_RECEIVES) {
            Dpa.memoryWriteback(); // the globals and the record, for the host's d2h copy (a NIC read)
            for (int i = 0; i < EXPECTED_NUM_RECEIVES; i++) {
                if (Dpa.ld32(arg + T1_RECEIVED_VALUES + 4 * i) != 1) {
                    DocaDpaDev.log(DocaDpaDev.LOG_LEVEL_ERROR, f + ": Thread #1 didn't receive data with value " + (i + 1));
                    info(f + ": Finish");
                    DocaDpaDev.threadFinish();
                }
            }
            info(f + ": Received all data values, Notify Thread #2");
            DocaDpaDev.threadNotify(Dpa.ld64(arg + T1_NOTIFICATION_COMP_HANDLE));
            info(f + ": Finish");
            DocaDpaDev.threadFinish();
        }
        int mmap = (int) Dpa.ld64(arg + T1_DPA_MMAP_HANDLE);
        long length = Dpa.ld64(arg + T1_LENGTH);
        info(f + ": Repost RDMA receive on DPA Mmap handle 0x" + Integer.toHexString(mmap) + ", address 0x" + Long.toHexString(buf)
                + ", length " + Long.toUnsignedString(length));
        DocaDpaDevRdma.postReceive(Dpa.ld64(arg + T1_TARGET_RDMA_HANDLE), mmap, buf, length);
        info(f + ": Acknowledge and request another notification");
        DocaDpaDevCompletion.completionAck(comp, 1);
        if (Dpa.ld64(arg + T1_MUTANT_NO_REQUEST) == 0) {
            DocaDpaDevCompletion.completionRequestNotification(comp);
        }
        info(f + ": Reschedule");
        DocaDpaDev.threadReschedule();
    }

    /** {@code thread2_kernel}: sets the host's sync event to the completion count and finishes. */
    @DpaGlobal("thread2_kernel")
    static void thread2Kernel(long arg) {
        String f = "thread2_kernel";
        info(f + ": Hello from Thread #2");
        long count = Dpa.ld64(arg + T2_COMPLETION_COUNT);
        info(f + ": Set sync event value to " + Long.toUnsignedString(count));
        DocaDpaDevSyncEvent.updateSet(Dpa.ld64(arg + T2_SYNC_EVENT_HANDLE), count);
        info(f + ": Finish");
        DocaDpaDev.threadFinish();
    }

    /**
     * {@code rdma_post_receive_rpc}: the target's first receive into the DPA buffer. Its log line
     * prints nothing here: an RPC has no DOCA thread block, so no log stream (doca-dpa-dev's
     * {@code log}, best effort as DOCA documents).
     */
    @DpaRpc("rdma_post_receive_rpc")
    static long rdmaPostReceiveRpc(long rdmaDpaCtxHandle, long targetRdma, long localBufAddr, int dpaMmapHandle, long length) {
        info("rdma_post_receive_rpc: Target RDMA post receive on DPA Mmap handle 0x" + Integer.toHexString(dpaMmapHandle) + ", address 0x"
                + Long.toHexString(localBufAddr) + ", length " + Long.toUnsignedString(length));
        DocaDpaDevRdma.postReceive(targetRdma, dpaMmapHandle, localBufAddr, length);
        return 0;
    }

    /** {@code rdma_post_send_imm_rpc}: a send with immediate on the initiator, flushed, no report of its own. */
    @DpaRpc("rdma_post_send_imm_rpc")
    static long rdmaPostSendImmRpc(long rdmaDpaCtxHandle, long rdma, int connectionId, long localBufAddr, int dpaMmapHandle, long length,
            int immediate) {
        info("rdma_post_send_imm_rpc: Post RDMA send with connection_id " + Integer.toUnsignedString(connectionId) + ", immediate "
                + Integer.toUnsignedString(immediate) + " on DPA Mmap handle 0x" + Integer.toHexString(dpaMmapHandle) + ", address 0x"
                + Long.toHexString(localBufAddr) + ", length " + Long.toUnsignedString(length));
        DocaDpaDevRdma.postSendImm(rdma, connectionId, dpaMmapHandle, localBufAddr, length, immediate,
                DocaDpaDevRdma.SUBMIT_FLAG_FLUSH | DocaDpaDevRdma.SUBMIT_FLAG_OPTIMIZE_REPORTS);
        return 0;
    }
}

package org.peerdirect.itest.dpa;

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
 * DocaRdmaIT's DPA application: DOCA's {@code dpa_initiator_target} sample (DPA_MODEL.md §4
 * scenario 6), as doca-rdma's test app has it: thread 1 takes one receive per activation,
 * counting each value at {@link #T1_VALUES} and keeping its immediate and user data at
 * {@link #T1_LOG}; after the 4th it notifies thread 2, which sets the sync event.
 */
@DpaApp("itest_doca_rdma")
public final class InitiatorTargetProgs {

    public static final int T1_COMP = 0, T1_NOTIFY = 8, T1_RDMA = 16, T1_MMAP = 24, T1_BUF = 32, T1_LEN = 40, T1_NUM = 48,
            T1_VALUES = 64, T1_LOG = 128, T1_SIZE = T1_LOG + 16 * 8;
    public static final int T2_EVENT = 0, T2_COUNT = 8, T2_SIZE = 16;

    private InitiatorTargetProgs() {
    }

    @DpaGlobal
    static void thread1(long a) {
        long comp = Dpa.ld64(a + T1_COMP);
        long e = DocaDpaDevCompletion.getCompletion(comp);
        if (e == 0) {
            FlexioDev.error(0x95);
        }
        long n = Dpa.ld64(a + T1_NUM);
        long value = Dpa.ld64(Dpa.ld64(a + T1_BUF));
        Dpa.st64(a + T1_LOG + 16 * n, DocaDpaDevCompletion.getCompletionImmediate(e) & 0xffffffffL);
        Dpa.st64(a + T1_LOG + 16 * n + 8, DocaDpaDevCompletion.getCompletionUserData(e) & 0xffffffffL);
        if (value >= 1 && value <= 4) {
            Dpa.st64(a + T1_VALUES + 8 * (value - 1), Dpa.ld64(a + T1_VALUES + 8 * (value - 1)) + 1);
        }
        n++;
        Dpa.st64(a + T1_NUM, n);
        if (n == 4) {
            Dpa.memoryWriteback(); // the record, for the host's d2h copy
            DocaDpaDev.threadNotify(Dpa.ld64(a + T1_NOTIFY));
            DocaDpaDev.threadFinish();
        }
        DocaDpaDevRdma.postReceive(Dpa.ld64(a + T1_RDMA), (int) Dpa.ld64(a + T1_MMAP), Dpa.ld64(a + T1_BUF), Dpa.ld64(a + T1_LEN));
        DocaDpaDevCompletion.completionAck(comp, 1);
        DocaDpaDevCompletion.completionRequestNotification(comp);
        DocaDpaDev.threadReschedule();
    }

    @DpaGlobal
    static void thread2(long a) {
        DocaDpaDevSyncEvent.updateSet(Dpa.ld64(a + T2_EVENT), Dpa.ld64(a + T2_COUNT));
        DocaDpaDev.threadFinish();
    }

    @DpaRpc
    static long postReceive(long rdma, long buf, int mmap, long length) {
        DocaDpaDevRdma.postReceive(rdma, mmap, buf, length);
        return 0;
    }

    @DpaRpc
    static long postSendImm(long rdma, int connectionId, long buf, int mmap, long length, int immediate) {
        DocaDpaDevRdma.postSendImm(rdma, connectionId, mmap, buf, length, immediate,
                DocaDpaDevRdma.SUBMIT_FLAG_FLUSH | DocaDpaDevRdma.SUBMIT_FLAG_OPTIMIZE_REPORTS);
        return 0;
    }
}

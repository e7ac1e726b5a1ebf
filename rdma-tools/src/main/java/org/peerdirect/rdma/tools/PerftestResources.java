package org.peerdirect.rdma.tools;

import java.util.Arrays;

import org.peerdirect.ib.core.verbs.IbvRecvWr;
import org.peerdirect.ib.core.verbs.IbvSendWr;
import org.peerdirect.ib.core.verbs.IbvWc;
import org.peerdirect.ib.core.verbs.IbvWcStatus;
import org.peerdirect.ib.core.verbs.IbvWrOpcode;

/**
 * perftest's measuring loops ({@code perftest_resources.c}: {@code run_iter_bw},
 * {@code run_iter_lat_write}) for one message size. Bandwidth tests keep {@code -t} requests
 * outstanding per QP and signal every 100th (CQ moderation); BW peak is the best 1 ms window.
 */
final class PerftestResources {

    private PerftestResources() {
    }

    /** One bandwidth row: {@code iters} operations of {@code size} bytes on each QP of {@code c} towards {@code s}. */
    static PerftestResult runIterBw(IbvWrOpcode op, String title, Endpoint c, Endpoint s, int size, int iters, int qps, int depth) {
        return new BwRun(op, title, c, s, size, iters, qps, depth).run();
    }

    /**
     * {@code run_iter_bw}'s state: per QP what was posted and completed (the client) and what
     * receives were posted (the server, for SEND); the 1 ms window of the peak.
     */
    private static final class BwRun {
        final IbvWrOpcode op;
        final String title;
        final Endpoint c;
        final Endpoint s;
        final int size;
        final int iters;
        final int qps;
        final int depth;
        final int mod;
        final boolean send;
        final IbvSendWr[] wr;
        final IbvRecvWr[] rwr;
        final long[] posted;
        final long[] completed;
        final long[] recvPosted;
        final IbvWc[] wc = new IbvWc[16];
        final long total;
        long done;
        long received;
        long windowStart;
        long windowDone;
        double peak;

        BwRun(IbvWrOpcode op, String title, Endpoint c, Endpoint s, int size, int iters, int qps, int depth) {
            this.op = op;
            this.title = title;
            this.c = c;
            this.s = s;
            this.size = size;
            this.iters = iters;
            this.qps = qps;
            this.depth = depth;
            this.mod = Math.min(100, depth);
            this.send = op == IbvWrOpcode.SEND;
            this.wr = new IbvSendWr[qps];
            this.rwr = new IbvRecvWr[qps];
            this.posted = new long[qps];
            this.completed = new long[qps];
            this.recvPosted = new long[qps];
            this.total = (long) iters * qps;
            for (int i = 0; i < wc.length; i++) {
                wc[i] = new IbvWc();
            }
        }

        PerftestResult run() {
            for (int q = 0; q < qps; q++) {
                prepare(q);
            }
            long t0 = System.nanoTime();
            windowStart = t0;
            long deadline = t0 + Completions.TIMEOUT_NS;
            while (done < total || (send && received < total)) {
                Completions.checkInterrupted("rdma:" + title.trim());
                for (int q = 0; q < qps; q++) {
                    postWindow(q);
                }
                int n = pollClient();
                if (send) {
                    pollServer();
                }
                long t = System.nanoTime();
                // windows start and end at completions, so the bytes counted were moved inside them
                if (n > 0 && (t - windowStart >= 1_000_000 || done == total)) {
                    if (t > windowStart && done > windowDone) {
                        peak = Math.max(peak, (done - windowDone) * (double) size / ((t - windowStart) / 1e9) / (1 << 20));
                    }
                    windowStart = t;
                    windowDone = done;
                }
                if (n > 0) {
                    deadline = t + Completions.TIMEOUT_NS; // the limit is on a stall, not on the whole run
                }
                if (t - deadline > 0) {
                    throw new IllegalStateException("no progress within 60 s (" + done + " of " + total + " completed)");
                }
            }
            double secs = Math.max(1e-9, (System.nanoTime() - t0) / 1e9);
            double avg = total * (double) size / secs / (1 << 20);
            return new PerftestResult.Bw(size, iters, Math.max(peak, avg), avg, total / secs / 1e6);
        }

        /** QP {@code q}'s work request, and for SEND the server's first {@code depth} receives. */
        private void prepare(int q) {
            wr[q] = new IbvSendWr().sge(c.buf, size, c.mr.lkey());
            wr[q].opcode = op;
            if (op == IbvWrOpcode.ATOMIC_WRITE) {
                wr[q].numSge = 0; // the 8 bytes travel in the request: its number, set at each post
            }
            wr[q].compareAdd = op == IbvWrOpcode.ATOMIC_FETCH_AND_ADD ? 1 : 0;
            wr[q].remoteAddr = s.buf;
            wr[q].rkey = s.mr.rkey();
            if (send) {
                rwr[q] = new IbvRecvWr().sge(s.buf, size, s.mr.lkey());
                for (int i = 0; i < depth && recvPosted[q] < iters; i++) {
                    s.qps[q].postRecv(rwr[q]);
                    recvPosted[q]++;
                }
            }
        }

        /** Posts on QP {@code q} until {@code depth} are outstanding (for SEND, no more than the server has receives for). */
        private void postWindow(int q) {
            while (posted[q] < iters && posted[q] - completed[q] < depth && (!send || posted[q] < recvPosted[q])) {
                long k = posted[q];
                wr[q].wrId = k;
                if (op == IbvWrOpcode.ATOMIC_WRITE) {
                    wr[q].compareAdd = k + 1;
                } else if (op == IbvWrOpcode.ATOMIC_CMP_AND_SWP) {
                    wr[q].swap = k + 1; // compare 0: only the first of all QPs' swaps lands
                }
                wr[q].sendFlags = (k + 1) % mod == 0 || k + 1 == iters ? IbvSendWr.SEND_SIGNALED : 0;
                c.qps[q].postSend(wr[q]);
                posted[q]++;
            }
        }

        /** The client's completions: a signalled one completes every request of its QP up to its wr_id. */
        private int pollClient() {
            int n = c.cq.poll(wc.length, wc);
            if (n < 0) {
                throw new IllegalStateException("the client CQ is in error");
            }
            for (int i = 0; i < n; i++) {
                if (wc[i].status != IbvWcStatus.SUCCESS) {
                    throw new IllegalStateException(String.format("Completion with error at client: %s (%d), wr_id %d", wc[i].status.str(),
                            wc[i].status.ordinal(), wc[i].wrId));
                }
                int q = index(c, wc[i].qpNum);
                long now = wc[i].wrId + 1;
                done += now - completed[q];
                completed[q] = now;
            }
            return n;
        }

        /**
         * SEND: the server's receive completions, each replaced by a new receive. Every one is
         * polled before the size ends: left behind, they filled the server's CQ across the sizes
         * of a -a sweep (CQ overrun, then "transport retry counter exceeded" at the client).
         */
        private void pollServer() {
            int m = s.cq.poll(wc.length, wc);
            if (m < 0) {
                throw new IllegalStateException("the server CQ is in error");
            }
            received += m;
            for (int i = 0; i < m; i++) {
                if (wc[i].status != IbvWcStatus.SUCCESS) {
                    throw new IllegalStateException("Completion with error at server: " + wc[i].status.str());
                }
                int q = index(s, wc[i].qpNum);
                if (recvPosted[q] < iters) {
                    s.qps[q].postRecv(rwr[q]);
                    recvPosted[q]++;
                }
            }
        }
    }

    private static int index(Endpoint e, int qpn) {
        for (int i = 0; i < e.qps.length; i++) {
            if (e.qps[i].qpNum() == qpn) {
                return i;
            }
        }
        throw new IllegalStateException("completion for unknown QP 0x" + Integer.toHexString(qpn));
    }

    /**
     * ib_write_lat: the client writes {@code size} bytes into the server's buffer; the server sees
     * the last byte change (polling its memory), writes back; the client sees its last byte
     * change. Latency = round trip / 2.
     */
    static PerftestResult runIterLatWrite(Endpoint c, Endpoint s, int size, int iters) {
        long half = c.size / 2;
        IbvSendWr cw = new IbvSendWr().sge(c.buf, size, c.mr.lkey());
        cw.opcode = IbvWrOpcode.RDMA_WRITE;
        cw.sendFlags = IbvSendWr.SEND_SIGNALED;
        cw.remoteAddr = s.buf + half;
        cw.rkey = s.mr.rkey();
        IbvSendWr sw = new IbvSendWr().sge(s.buf, size, s.mr.lkey());
        sw.opcode = IbvWrOpcode.RDMA_WRITE;
        sw.sendFlags = IbvSendWr.SEND_SIGNALED;
        sw.remoteAddr = c.buf + half;
        sw.rkey = c.mr.rkey();
        IbvWc[] wc = {new IbvWc()};
        double[] lat = new double[iters];
        for (int i = 0; i < iters; i++) {
            byte stamp = (byte) (i % 255 + 1);
            long t0 = System.nanoTime();
            c.writeByte(c.buf + size - 1, stamp);
            c.qps[0].postSend(cw);
            Completions.waitOk(c.cq, wc, "client write");
            spin(s, s.buf + half + size - 1, stamp);
            s.writeByte(s.buf + size - 1, stamp);
            s.qps[0].postSend(sw);
            Completions.waitOk(s.cq, wc, "server write");
            spin(c, c.buf + half + size - 1, stamp);
            lat[i] = (System.nanoTime() - t0) / 2e3;
        }
        Arrays.sort(lat);
        return PerftestResult.Lat.of(size, lat);
    }

    private static void spin(Endpoint e, long va, byte stamp) {
        long deadline = System.nanoTime() + Completions.TIMEOUT_NS;
        for (int spins = 0; e.readByte(va) != stamp; spins++) {
            if (System.nanoTime() - deadline > 0) {
                throw new IllegalStateException("write_lat: the peer's write did not arrive within 60 s");
            }
            Completions.relax(spins);
        }
    }

    /**
     * The remote word after an atomic run: every QP's requests went to the server's first 8
     * bytes, so FETCH_AND_ADD leaves the count of all of them, ATOMIC_WRITE the last number each
     * QP stored (all QPs end on {@code iters}), CMP_AND_SWAP the first swap (1). A wrong word
     * fails the tool: the device lost or repeated an operation.
     */
    static String checkAtomicWord(IbvWrOpcode op, Endpoint s, int iters, int qps) {
        long want = op == IbvWrOpcode.ATOMIC_FETCH_AND_ADD ? (long) iters * qps : op == IbvWrOpcode.ATOMIC_WRITE ? iters : 1;
        long got = s.proc.readLong(s.buf);
        if (got != want) {
            throw new IllegalStateException(String.format("remote word after %s: %d, expected %d", op, got, want));
        }
        return String.format(" remote word after %d x %d %s: %d (as expected)", qps, iters, op, got);
    }
}

package org.peerdirect.doca.rdma;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;
import org.peerdirect.doca.DocaAccessFlag;
import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.dev.DocaDev;
import org.peerdirect.doca.dpa.DocaDpaCompletion;
import org.peerdirect.doca.dpa.DpaLabFixture;
import org.peerdirect.doca.dpa.dev.DocaDpaDevCompletion;
import org.peerdirect.doca.dpa.dev.DocaDpaDevRdma;
import org.peerdirect.doca.mmap.DocaMmap;
import org.peerdirect.doca.rdma.progs.RdmaProgs;
import org.peerdirect.doca.rdma.progs.RdmaProgsStubs;
import org.peerdirect.doca.syncevent.DocaSyncEvent;
import org.peerdirect.doca.syncevent.DocaSyncEventRemoteNet;

/**
 * DOCA RDMA with its data path on the DPA: an RDMA WRITE posted from the DPA lands in the peer's
 * DPA memory, its completion is reported to the completion context only when asked (no
 * OPTIMIZE_REPORTS) and only once flushed; calls out of order and bad input answer DOCA's errors,
 * a post on a connection not connected ends the DPA process naming it; nothing is left.
 */
class DocaRdmaTest extends DpaLabFixture {

    private static final int RW = DocaAccessFlag.DOCA_ACCESS_FLAG_LOCAL_READ_WRITE | DocaAccessFlag.DOCA_ACCESS_FLAG_RDMA_WRITE
            | DocaAccessFlag.DOCA_ACCESS_FLAG_RDMA_READ;

    DocaRdmaTest() {
        super(RdmaProgsStubs.APP);
    }

    private static DocaError status(Executable e) {
        return assertThrows(DocaException.class, e).error();
    }

    private DocaRdma rdma(DocaDpaCompletion comp) {
        DocaRdma r = DocaRdma.create(dev);
        r.setPermissions(RW);
        r.setDatapathOnDpa(dpa);
        if (comp != null) {
            r.dpaCompletionAttach(comp);
        }
        r.start();
        undo.add(r::destroy);
        return r;
    }

    private DocaMmap dpaMap(long daddr, long len) {
        return dpaMmap(dpa, dev, daddr, len, RW);
    }

    /** A completion context with no thread (DOCA's manual polling): an RPC or a kernel polls it. */
    private DocaDpaCompletion polledCompletion() {
        DocaDpaCompletion c = DocaDpaCompletion.create(dpa, 8);
        c.start();
        undo.add(c::destroy);
        return c;
    }

    private void connect(DocaRdma a, DocaRdma b) {
        DocaRdma.Export ea = a.export();
        DocaRdma.Export eb = b.export();
        a.connect(eb.connectionDetails(), ea.connection());
        b.connect(ea.connectionDetails(), eb.connection());
    }

    private long poll(DocaDpaCompletion c) {
        return dpa.rpc(RdmaProgsStubs.POLL_ONE, c.getDpaHandle());
    }

    /**
     * A writer connected to a peer, its completions to a polled context, 64 bytes of DPA memory as
     * its source (holding {@code words}, mapped) and 64 as the peer's destination, whose map
     * reaches the writer by its export as two hosts do.
     */
    private record Writer(DocaDpaCompletion comp, long h, long src, int srcKey, long dst, int dstKey) {
    }

    private Writer writer(long... words) {
        DocaDpaCompletion comp = polledCompletion();
        DocaRdma writer = rdma(comp);
        connect(writer, rdma(null));
        long src = alloc(64);
        long dst = alloc(64);
        ByteBuffer b = ByteBuffer.allocate(8 * words.length).order(ByteOrder.LITTLE_ENDIAN);
        for (long w : words) {
            b.putLong(w);
        }
        dpa.h2dMemcpy(src, b.array());
        int srcKey = dpaMap(src, 64).devGetDpaHandle(dev);
        DocaMmap remote = DocaMmap.createFromExport(0, dpaMap(dst, 64).exportRdma(dev), dev);
        undo.add(remote::destroy);
        return new Writer(comp, writer.getDpaHandle(), src, srcKey, dst, remote.devGetDpaHandle(dev));
    }

    @Test
    void aWriteFromTheDpaLandsAndIsReportedOnlyWhenAskedAndFlushed() {
        Writer wr = writer(0x1122334455667788L, 42);
        DocaDpaCompletion comp = wr.comp();
        long h = wr.h();
        long src = wr.src();
        long dst = wr.dst();
        int srcKey = wr.srcKey();
        int dstKey = wr.dstKey();

        dpa.rpc(RdmaProgsStubs.POST_WRITE, h, 0, dstKey, dst, srcKey, src, 8L, DocaDpaDevRdma.SUBMIT_FLAG_NONE);
        assertEquals(-1, poll(comp), "not flushed: no completion");
        assertEquals(0, le64(dpa.d2hMemcpy(dst, 8)), "not flushed: nothing written");
        dpa.rpc(RdmaProgsStubs.POST_WRITE, h, 0, dstKey, dst + 8, srcKey, src + 8, 8L,
                DocaDpaDevRdma.SUBMIT_FLAG_FLUSH | DocaDpaDevRdma.SUBMIT_FLAG_OPTIMIZE_REPORTS);
        long deadline = System.nanoTime() + 30_000_000_000L;
        while (le64(dpa.d2hMemcpy(dst + 8, 8)) != 42) {
            assertTrue(System.nanoTime() < deadline, "the flushed writes landed");
            Thread.onSpinWait();
        }
        assertEquals(0x1122334455667788L, le64(dpa.d2hMemcpy(dst, 8)), "the earlier post went with the flush");
        long first = poll(comp);
        while (first == -1 && System.nanoTime() < deadline) {
            first = poll(comp);
        }
        assertEquals(DocaDpaDevCompletion.COMP_SEND, first, "the first write asked for its completion");
        assertEquals(-1, poll(comp), "the second did not (OPTIMIZE_REPORTS)");
    }

    /**
     * A send doorbell whose producer index went backwards (two posters ringing one queue out of
     * order) is ignored by the NIC: it fetches nothing (before, it took the index as 65535 new WQEs
     * and ran the ring's stale and empty slots: error completions, the QP in error). A flushed
     * write after it lands, and the first write's destination keeps its bytes though its source
     * changed (its WQE was not run again); every completion is a good one.
     */
    @Test
    void aDoorbellBehindTheFetchedIndexFetchesNothing() {
        Writer wr = writer(7, 42);
        DocaDpaCompletion comp = wr.comp();
        long h = wr.h();
        long src = wr.src();
        long dst = wr.dst();
        int srcKey = wr.srcKey();
        int dstKey = wr.dstKey();
        long deadline = System.nanoTime() + 30_000_000_000L;
        dpa.rpc(RdmaProgsStubs.POST_WRITE, h, 0, dstKey, dst, srcKey, src, 8L, DocaDpaDevRdma.SUBMIT_FLAG_FLUSH);
        while (le64(dpa.d2hMemcpy(dst, 8)) != 7) {
            assertTrue(System.nanoTime() < deadline, "the first write landed");
            Thread.onSpinWait();
        }
        dpa.h2dMemcpy(src, ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(9).array()); // a rerun would carry 9
        int pi = (int) dpa.rpc(RdmaProgsStubs.LOAD64, h + DocaDpaDevRdma.OFF_CONN + DocaDpaDevRdma.C_SQ_PI);
        dpa.rpc(RdmaProgsStubs.RING_SQ, h, pi - 1); // behind the index the NIC fetched
        dpa.rpc(RdmaProgsStubs.POST_WRITE, h, 0, dstKey, dst + 8, srcKey, src + 8, 8L, DocaDpaDevRdma.SUBMIT_FLAG_FLUSH);
        while (le64(dpa.d2hMemcpy(dst + 8, 8)) != 42) { // the NIC takes doorbells in order: the bad one came first
            assertTrue(System.nanoTime() < deadline, "the write after the bad doorbell landed: " + lab.dpa());
            Thread.onSpinWait();
        }
        assertEquals(7, le64(dpa.d2hMemcpy(dst, 8)), "the first write's WQE was not run again");
        for (int i = 0; i < 2; i++) {
            long c = poll(comp);
            while (c == -1 && System.nanoTime() < deadline) {
                c = poll(comp);
            }
            assertEquals(DocaDpaDevCompletion.COMP_SEND, c, "completion " + i + " is the write's, no error");
        }
        assertEquals(-1, poll(comp), "no completion of a stale slot");
    }

    /**
     * DOCA's manual polling from a kernel: a completion context started without a thread takes
     * the writer's reported completion, and a kernel rank reading it with
     * {@code doca_dpa_dev_get_completion} sees its type and the connection's user data.
     */
    @Test
    void aKernelPollsACompletionContextThatHasNoThread() {
        Writer wr = writer(0x5a5a);
        DocaDpaCompletion comp = wr.comp();
        DocaSyncEvent done = DocaSyncEvent.create();
        done.addPublisherLocationDpa(dpa);
        done.addSubscriberLocationCpu(dev);
        done.start();
        undo.add(done::destroy);
        long b = alloc(24);
        dpa.h2dMemcpy(b, ByteBuffer.allocate(24).order(ByteOrder.LITTLE_ENDIAN).putLong(comp.getDpaHandle()).putLong(-1).putLong(-1).array());

        dpa.kernelLaunchUpdateSet(null, 0, done, 1, 1, RdmaProgsStubs.POLL_KERNEL, b); // polls before anything arrives
        dpa.rpc(RdmaProgsStubs.POST_WRITE, wr.h(), 0, wr.dstKey(), wr.dst(), wr.srcKey(), wr.src(), 8L, DocaDpaDevRdma.SUBMIT_FLAG_FLUSH);
        done.waitGt(0, -1L, java.time.Duration.ofSeconds(60));
        assertEquals(1, done.get(), "the polling kernel ended: " + dpa.kernelFailure());
        ByteBuffer r = ByteBuffer.wrap(dpa.d2hMemcpy(b + 8, 16)).order(ByteOrder.LITTLE_ENDIAN);
        assertEquals(DocaDpaDevCompletion.COMP_SEND, r.getLong(), "the kernel read the write's completion");
        assertEquals(0, r.getLong(), "its user data: the writer's connection 0");
        assertEquals(0x5a5a, le64(dpa.d2hMemcpy(wr.dst(), 8)), "the write landed");
        assertEquals(-1, poll(comp), "acknowledged: nothing left");
    }

    @Test
    void badInputAndCallsOutOfOrder() {
        DocaRdma hostPath = DocaRdma.create(dev);
        assertEquals(DocaError.DOCA_ERROR_NOT_SUPPORTED, status(hostPath::start), "a host data path is not built");
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, status(hostPath::export), "export before start");
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, status(() -> hostPath.dpaCompletionAttach(polledCompletion())), "attach before the DPA data path");
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(() -> hostPath.setPermissions(0)));
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(() -> hostPath.setMaxNumConnections(0)));
        hostPath.destroy();
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(hostPath::destroy), "double destroy");

        DocaDpaCompletion comp = polledCompletion();
        DocaRdma a = rdma(comp);
        DocaRdma b = rdma(null);
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, status(() -> a.setMaxNumConnections(2)), "configured after start");
        DocaRdma.Export ea = a.export();
        assertEquals(DocaError.DOCA_ERROR_FULL, status(a::export), "one connection at most by default");
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(() -> a.connect(new byte[7], ea.connection())), "details of 7 bytes");
        byte[] garbage = new byte[RdmaConnDesc.SIZE];
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(() -> a.connect(garbage, ea.connection())), "no magic");
        DocaRdma.Export eb = b.export();
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(() -> a.connect(eb.connectionDetails(), eb.connection())),
                "a connection of another context");
        assertEquals(DocaError.DOCA_ERROR_IN_USE, status(comp::stop), "the completion context serves a's connection");
        a.connect(eb.connectionDetails(), ea.connection());
        assertEquals(DocaError.DOCA_ERROR_BAD_STATE, status(() -> a.connect(eb.connectionDetails(), ea.connection())), "connected twice");
        assertEquals(0, ea.connection().getId());
        assertTrue(ea.connection().isConnected() && !eb.connection().isConnected());

        // another device: the ConnectX-6 Dx has no DPA; a DPA map has no handle on it
        DocaDev other = lab.open(1);
        DocaRdma onOther = DocaRdma.create(other);
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(() -> onOther.setDatapathOnDpa(dpa)), "a DPA context of another device");
        onOther.destroy();
        long src = alloc(64);
        DocaMmap srcMap = dpaMap(src, 64);
        assertEquals(DocaError.DOCA_ERROR_NOT_FOUND, status(() -> srcMap.devGetDpaHandle(other)), "the map's handle on another device");
        other.close();

        // b's connection is not connected: a post on it ends the DPA process naming the error
        int key = srcMap.devGetDpaHandle(dev);
        DocaException e = assertThrows(DocaException.class, () -> dpa.rpc(RdmaProgsStubs.POST_SEND_IMM, b.getDpaHandle(), 0, src, key, 8L, 1));
        assertEquals(DocaError.DOCA_ERROR_DRIVER, e.error(), e.getMessage());
        assertTrue(e.getMessage().contains(Integer.toHexString(DocaDpaDevRdma.ERROR_BAD_CONNECTION)), e.getMessage());
    }

    /**
     * The memory model sees the posts' ring writes: a SEND made by hand through the handle's
     * layout without the write-back before its doorbell is caught (C1) naming the RPC's line, the
     * process ends (strict), and the peer receives nothing.
     */
    @Test
    void aPostWithoutWritebackBeforeItsDoorbellIsCaught() {
        DocaRdma a = rdma(null);
        DocaRdma b = rdma(polledCompletion());
        connect(a, b);
        long buf = alloc(64);
        int key = dpaMap(buf, 64).devGetDpaHandle(dev);
        dpa.rpc(RdmaProgsStubs.POST_RECEIVE, b.getDpaHandle(), buf, key, 8L);
        try {
            dpa.rpc(RdmaProgsStubs.POST_SEND_WITHOUT_WRITEBACK, a.getDpaHandle(), key, buf, 8L);
        } catch (DocaException e) {
            assertEquals(DocaError.DOCA_ERROR_DRIVER, e.error(), e.getMessage()); // the process may end before the RPC answers
        }
        long deadline = System.nanoTime() + 30_000_000_000L;
        String ps;
        while (!(ps = String.join("\n", lab.dpa())).contains("C1")) {
            assertTrue(System.nanoTime() < deadline, "C1 reported: " + ps);
            Thread.onSpinWait();
        }
        assertTrue(ps.contains("without __dpa_thread_memory_writeback before the doorbell") && ps.contains("RdmaProgs.postSendWithoutWriteback"), ps);
    }

    /**
     * Signals: the peer's DPA-subscribed sync event, exported to the remote net, is set by
     * {@code signal_set} after 4 KiB written on the same connection (the host that sees the value
     * sees every byte), then increased by {@code signal_add}.
     */
    @Test
    void signalsReachTheRemoteEventAfterTheWritesOfTheirConnection() {
        DocaRdma writer = rdma(null);
        DocaRdma peer = rdma(null);
        connect(writer, peer);
        DocaSyncEvent ev = DocaSyncEvent.create();
        ev.addPublisherLocationRemoteNet();
        ev.addSubscriberLocationDpa(dpa);
        ev.start();
        undo.add(ev::destroy);
        DocaSyncEventRemoteNet remote = DocaSyncEventRemoteNet.createFromExport(dev, ev.exportToRemoteNet());
        undo.add(remote::destroy);
        long event = remote.getDpaHandle(dpa);
        assertEquals(event, remote.getDpaHandle(dpa), "one handle per DPA context");

        int n = 4096;
        long src = alloc(n);
        long dst = alloc(n);
        byte[] pattern = new byte[n];
        for (int i = 0; i < n; i++) {
            pattern[i] = (byte) (i * 7 + 3);
        }
        dpa.h2dMemcpy(src, pattern);
        int srcKey = dpaMap(src, n).devGetDpaHandle(dev);
        DocaMmap remoteDst = DocaMmap.createFromExport(0, dpaMap(dst, n).exportRdma(dev), dev);
        undo.add(remoteDst::destroy);
        dpa.rpc(RdmaProgsStubs.WRITE_THEN_SIGNAL_SET, writer.getDpaHandle(), remoteDst.devGetDpaHandle(dev), dst, srcKey, src, (long) n, event, 7L);
        ev.waitGt(6, -1L, java.time.Duration.ofSeconds(30));
        assertEquals(7, ev.get());
        assertTrue(java.util.Arrays.equals(pattern, dpa.d2hMemcpy(dst, n)), "every byte written before the signal is there");
        dpa.rpc(RdmaProgsStubs.SIGNAL_ADD, writer.getDpaHandle(), event, 5L);
        ev.waitGt(11, -1L, java.time.Duration.ofSeconds(30));
        assertEquals(12, ev.get(), "signal_add added 5");
    }

    /**
     * Check C8 on RDMA handles: two kernel ranks posting on connections of one handle side by side
     * are silent with one connection each (as the all-to-all's threads), and are C8 naming the
     * posting line when both post on one connection (strict: the process ends).
     */
    @Test
    void twoRanksPostingOnOneConnectionIsC8AndOneConnectionEachIsSilent() {
        postLoopC8(0, 1, 0, 0, "DocaDpaDevRdma.post:");
    }

    /**
     * Check C8 on a handle's receives ({@code post_receive} names no connection: the handle's
     * receive queue is one object): a rank posting receives beside a rank writing on a connection
     * of the same handle is silent (a receive queue and a send queue), two ranks posting receives
     * on one handle are C8 naming the receive (strict: the process ends).
     */
    @Test
    void twoRanksPostingReceivesOnOneHandleIsC8AndAReceiveBesideAWriteIsSilent() {
        postLoopC8(-1, 0, -1, -1, "DocaDpaDevRdma.postReceive:");
    }

    /**
     * {@code RdmaProgs.postLoop} with two ranks on one handle of two connections (connection -1:
     * the rank posts receives): first on {@code ok0}/{@code ok1}, which stays free of C8 after 500
     * posts each; then on {@code bad0}/{@code bad1}, which strict C8 must end naming the kernel's
     * line and {@code libraryCall}.
     */
    private void postLoopC8(int ok0, int ok1, int bad0, int bad1, String libraryCall) {
        DocaRdma writer = DocaRdma.create(dev);
        writer.setPermissions(RW);
        writer.setDatapathOnDpa(dpa);
        writer.setMaxNumConnections(2);
        writer.start();
        undo.add(writer::destroy);
        connect(writer, rdma(null));
        connect(writer, rdma(null));
        long buf = alloc(64);
        int key = dpaMap(buf, 64).devGetDpaHandle(dev);
        DocaSyncEvent done = DocaSyncEvent.create();
        done.addPublisherLocationDpa(dpa);
        done.addSubscriberLocationCpu(dev);
        done.start();
        undo.add(done::destroy);
        long b = alloc(RdmaProgs.PL_SIZE);
        java.util.function.LongUnaryOperator posts = r -> dpa.rpc(RdmaProgsStubs.LOAD64, b + RdmaProgs.PL_POSTS + 8 * r);

        dpa.h2dMemcpy(b, postLoopBlock(writer.getDpaHandle(), ok0, ok1, key, buf));
        dpa.kernelLaunchUpdateSet(null, 0, done, 1, 2, RdmaProgsStubs.POST_LOOP, b);
        long deadline = System.nanoTime() + 60_000_000_000L;
        while (posts.applyAsLong(0) < 500 || posts.applyAsLong(1) < 500) {
            assertTrue(dpa.kernelFailure() == null && System.nanoTime() < deadline, "both ranks post: " + lab.findings());
        }
        dpa.memset(b + RdmaProgs.PL_STOP, 1, 8);
        done.waitGt(0, -1L, java.time.Duration.ofSeconds(60));
        assertTrue(lab.findings().stream().noneMatch(l -> l.contains("C8")), lab.findings().toString());

        dpa.h2dMemcpy(b, postLoopBlock(writer.getDpaHandle(), bad0, bad1, key, buf)); // the mutant
        dpa.kernelLaunchUpdateSet(null, 0, done, 2, 2, RdmaProgsStubs.POST_LOOP, b);
        while (dpa.kernelFailure() == null) {
            assertTrue(System.nanoTime() < deadline, "strict C8 ends the process: " + lab.findings());
            Thread.onSpinWait();
        }
        List<String> crashes = lab.crashes();
        assertTrue(crashes.stream().anyMatch(l -> l.contains("C8") && l.contains("RdmaProgs.postLoop:") && l.contains(libraryCall)),
                crashes.toString());
    }

    private static byte[] postLoopBlock(long rdma, int conn0, int conn1, int key, long addr) {
        return ByteBuffer.allocate(RdmaProgs.PL_SIZE).order(ByteOrder.LITTLE_ENDIAN).putLong(RdmaProgs.PL_RDMA, rdma)
                .putLong(RdmaProgs.PL_CONN, conn0).putLong(RdmaProgs.PL_CONN + 8, conn1).putLong(RdmaProgs.PL_KEY, key)
                .putLong(RdmaProgs.PL_ADDR, addr).array();
    }

    private static long le64(byte[] b) {
        return ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).getLong();
    }
}

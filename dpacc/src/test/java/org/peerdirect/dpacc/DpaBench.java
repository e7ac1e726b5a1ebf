package org.peerdirect.dpacc;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

import org.peerdirect.hca.dpa.Affinity;
import org.peerdirect.hca.dpa.DpaConfig;
import org.peerdirect.hca.dpa.DpaNic;
import org.peerdirect.hca.dpa.DpaUnit;
import org.peerdirect.hca.dpa.ImageRejected;
import org.peerdirect.hca.dpa.LoaderPolicy;
import org.peerdirect.hca.dpa.ProcessStatus;
import org.peerdirect.hca.dpa.WindowPort;

/**
 * A DPA unit of the silicon (no NIC queues, no windows) to run dpacc's images on: an image is
 * loaded as the firmware loads it (written into a DPA_MEM, a process created over it), an RPC is
 * called as {@code flexio_process_call} does (argument buffer in the process heap, a thread on the
 * entry, one trigger). {@link #close} checks nothing is left on the DPA.
 */
public final class DpaBench implements AutoCloseable {

    static final int UID = 3;
    final List<String> errors = new CopyOnWriteArrayList<>();
    public final DpaUnit unit;

    public DpaBench() {
        unit = new DpaUnit(DpaConfig.test(6, 1), new NoQueues(), new NoWindows(),
                (p, u, s, crash) -> errors.add(p + ":" + Integer.toHexString(s) + ":" + crash), LoaderPolicy.isaOnly());
    }

    public int load(byte[] image, long heap) throws ImageRejected {
        int mem = unit.memCreate(UID, image.length);
        try {
            unit.nicWrite(unit.memAddress(mem), MemorySegment.ofArray(image), 0, image.length);
            return unit.processCreate(UID, 1, 1, mem, image.length, heap);
        } finally {
            unit.memDestroy(mem);
        }
    }

    /** Copies {@code argbuf} to the heap's start and runs {@code entry} on it once; its result. */
    public long call(int pid, String entry, byte[] argbuf) {
        long heap = unit.heapBase(pid);
        if (argbuf.length > 0) {
            unit.nicWrite(heap, MemorySegment.ofArray(argbuf), 0, argbuf.length);
        }
        int t = unit.threadCreate(pid, entry, heap, 0, Affinity.ANY, false);
        unit.threadRun(t);
        unit.trigger(t);
        settle();
        assertEquals(ProcessStatus.OK, unit.processStatus(pid), unit.crashData(pid));
        long r = unit.rpcResult(t);
        unit.threadDestroy(t);
        return r;
    }

    public void settle() {
        if (!unit.awaitIdle()) {
            throw new AssertionError("the DPA did not settle: " + unit.describe());
        }
    }

    @Override
    public void close() {
        unit.close();
        assertEquals(List.of(), unit.leaks(), "nothing left on the DPA");
        assertEquals(List.of(), errors, "no process error");
    }

    private static final class NoQueues implements DpaNic {
        @Override
        public int ownerUid(QueueKind kind, int number) {
            return -1;
        }

        @Override
        public void cqArm(int cqn, int ci) {
            throw new IllegalStateException("no CQ " + cqn + " in dpacc's tests");
        }

        @Override
        public void sqDoorbell(int qn, int pi) {
            throw new IllegalStateException("no SQ " + qn + " in dpacc's tests");
        }

        @Override
        public void zeroCqe(int cqn) {
            throw new IllegalStateException("no CQ " + cqn + " in dpacc's tests");
        }

        @Override
        public void eqUpdateCi(int eqn, int ci) {
            throw new IllegalStateException("no EQ " + eqn + " in dpacc's tests");
        }

        @Override
        public CqState cqState(int cqn) {
            return null;
        }
    }

    private static final class NoWindows implements WindowPort {
        @Override
        public Mkey lookup(int mkey) {
            return null;
        }

        @Override
        public void read(int mkey, long va, MemorySegment dst, long dstOffset, long len) {
            throw new IllegalStateException("no window memory in dpacc's tests");
        }

        @Override
        public void write(int mkey, long va, MemorySegment src, long srcOffset, long len) {
            throw new IllegalStateException("no window memory in dpacc's tests");
        }
    }
}

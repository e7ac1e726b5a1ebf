package org.peerdirect.hca.dpa;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * The NIC side of the DPA tests: queue owners by uid, CQ arming with the consumer index (arming
 * while CQEs at or past it exist fires at once), send doorbells that fetch the WQE from DPA memory
 * through {@link DpaUnit#nicRead} (so the memory model sees the fetch), zero CQEs that trigger the
 * CQ's thread.
 */
final class FakeNic implements DpaNic {

    DpaUnit unit;
    final Map<String, Integer> owners = new ConcurrentHashMap<>();
    final List<String> doorbells = new CopyOnWriteArrayList<>();
    final Map<Integer, CqState> cqs = new ConcurrentHashMap<>();
    final Map<Integer, Integer> cqThread = new ConcurrentHashMap<>();
    /** Send queue number → {ring DPA address, log2 of its WQE count}. */
    final Map<Integer, long[]> sqRings = new ConcurrentHashMap<>();
    /** First 8 bytes of every WQE the NIC fetched. */
    final List<Long> fetched = new CopyOnWriteArrayList<>();
    /** What the NIC does after taking a send doorbell (a completion, in a test). */
    volatile Runnable onSend = () -> { };
    /**
     * When set, a raised completion event is counted at once (as the CQ counts it under its lock)
     * and delivered only by {@link #deliver}: the NIC's event path lagging behind, in a test.
     */
    volatile boolean deliverLater;
    final java.util.Queue<int[]> undelivered = new java.util.concurrent.ConcurrentLinkedQueue<>();

    void own(QueueKind k, int number, int uid) {
        owners.put(k + ":" + number, uid);
    }

    /** A CQ of {@code uid} bound to DPA thread {@code tid}, unarmed and empty. */
    void threadCq(int cqn, int uid, int tid) {
        own(QueueKind.CQ, cqn, uid);
        cqs.put(cqn, new CqState(false, 0, 0, 0));
        cqThread.put(cqn, tid);
        unit.bindCq(cqn, tid);
    }

    /** A CQE lands on {@code cqn}: it triggers the thread if the CQ is armed (and disarms it). */
    void cqe(int cqn) {
        CqState s = cqs.get(cqn);
        cqs.put(cqn, new CqState(false, s.eventsRaised() + (s.armed() ? 1 : 0), s.producerIndex() + 1, s.consumerIndex()));
        if (s.armed()) {
            raised(cqn);
        }
    }

    /** An event CQ {@code cqn} raised (and counted): delivered now, or queued for {@link #deliver}. */
    private void raised(int cqn) {
        if (deliverLater) {
            undelivered.add(new int[] {cqn, cqThread.get(cqn)});
        } else {
            unit.cqEvent(cqn, cqThread.get(cqn));
        }
    }

    /** Delivers the events held back by {@link #deliverLater}; returns how many. */
    int deliver() {
        int n = 0;
        for (int[] e; (e = undelivered.poll()) != null; n++) {
            unit.cqEvent(e[0], e[1]);
        }
        return n;
    }

    @Override
    public int ownerUid(QueueKind kind, int number) {
        return owners.getOrDefault(kind + ":" + number, -1);
    }

    @Override
    public void cqArm(int cqn, int ci) {
        doorbells.add("CQ_DB cq " + cqn + " ci " + ci);
        CqState s = cqs.getOrDefault(cqn, new CqState(false, 0, 0, 0));
        if (s.producerIndex() > ci && cqThread.containsKey(cqn)) {
            cqs.put(cqn, new CqState(false, s.eventsRaised() + 1, s.producerIndex(), ci));
            raised(cqn);
        } else {
            cqs.put(cqn, new CqState(true, s.eventsRaised(), s.producerIndex(), ci));
        }
    }

    @Override
    public void sqDoorbell(int qn, int pi) {
        doorbells.add("SXD_DB sq " + qn + " pi " + pi);
        long[] ring = sqRings.get(qn);
        if (ring != null) {
            long slot = ring[0] + (((pi - 1) & ((1L << ring[1]) - 1)) << 6);
            MemorySegment wqe = Arena.ofAuto().allocate(64);
            unit.nicRead(slot, wqe, 0, 64, "a send WQE");
            fetched.add(wqe.get(DpaMemory.LONG, 0));
        }
        onSend.run();
    }

    @Override
    public void zeroCqe(int cqn) {
        doorbells.add("RXT_DB cq " + cqn);
        CqState s = cqs.get(cqn);
        if (s != null && cqThread.containsKey(cqn)) {
            cqs.put(cqn, new CqState(s.armed(), s.eventsRaised() + 1, s.producerIndex(), s.consumerIndex()));
            raised(cqn);
        }
    }

    @Override
    public void eqUpdateCi(int eqn, int ci) {
        doorbells.add("EQ_DB_NO_REARM eq " + eqn + " ci " + ci);
    }

    @Override
    public CqState cqState(int cqn) {
        return cqs.get(cqn);
    }
}

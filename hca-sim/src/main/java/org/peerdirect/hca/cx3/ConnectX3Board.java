package org.peerdirect.hca.cx3;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

import org.peerdirect.hca.engine.HcaDevice;

/**
 * A ConnectX-3 board's firmware: its node GUID, firmware version and board id, and its engine.
 * The model puts the board into the function's spec (so the function never appears without
 * it) and attaches the engine once the bus assigned the function's address, which names the
 * engine and its IOMMU domain. Tests and benchmarks that build devices without OSGi use the
 * attached constructor.
 *
 * <p>Lock rules: {@link #lock} guards {@link #engine}; {@link #engine()} waits on {@link #attached}
 * at most {@value #ATTACH_WAIT_MS} ms.
 */
public final class ConnectX3Board implements ConnectX3 {

    static final long ATTACH_WAIT_MS = 5000;

    private final long nodeGuid;
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition attached = lock.newCondition();
    private HcaDevice engine;

    /** A board whose engine the model attaches later. */
    public ConnectX3Board(long nodeGuid) {
        this.nodeGuid = nodeGuid;
    }

    /** A board with its engine. */
    public ConnectX3Board(HcaDevice engine, long nodeGuid) {
        this(nodeGuid);
        attach(engine);
    }

    /** The node GUID of board {@code index} (Mellanox OUI 00:02:c9). */
    public static long guid(int index) {
        return 0x0002_c903_0000_1000L + index * 0x10L;
    }

    /** The model attaches the engine; once. */
    public void attach(HcaDevice e) {
        lock.lock();
        try {
            if (engine != null) {
                throw new IllegalStateException("board " + Long.toHexString(nodeGuid) + " already has its engine");
            }
            engine = e;
            attached.signalAll();
        } finally {
            lock.unlock();
        }
    }

    @Override
    public HcaDevice engine() {
        lock.lock();
        try {
            long left = TimeUnit.MILLISECONDS.toNanos(ATTACH_WAIT_MS);
            while (engine == null) {
                if (left <= 0) {
                    throw new IllegalStateException("ConnectX-3 board " + Long.toHexString(nodeGuid) + ": firmware not ready after "
                            + ATTACH_WAIT_MS + " ms");
                }
                left = attached.awaitNanos(left);
            }
            return engine;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while waiting for the ConnectX-3 firmware", e);
        } finally {
            lock.unlock();
        }
    }

    @Override
    public String bdf() {
        return engine().name();
    }

    @Override
    public long nodeGuid() {
        return nodeGuid;
    }

    @Override
    public String firmwareVersion() {
        return "2.42.5000";
    }

    @Override
    public String boardId() {
        return "MT_1090120019";
    }
}

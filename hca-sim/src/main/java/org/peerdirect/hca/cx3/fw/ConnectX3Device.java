package org.peerdirect.hca.cx3.fw;

import static org.peerdirect.hca.cx3.ifc.Be.BE32;
import static org.peerdirect.hca.cx3.ifc.Be.BE64;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.VarHandle;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Function;

import org.peerdirect.hca.cx3.ifc.Hcr;
import org.peerdirect.hca.cx3.ifc.Uar;
import org.peerdirect.hca.engine.HcaDevice;
import org.peerdirect.hca.engine.HwCq;
import org.peerdirect.kernel.pci.BarWriteHandler;
import org.peerdirect.kernel.pci.PciDeviceSpec;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * A ConnectX-3 function (PCI {@code 15b3:1003}) as its driver sees it: BAR0 with the HCR and the
 * reset register, BAR2 with the UAR pages (EQ, CQ and send doorbells), MSI-X, and a firmware thread that
 * executes each command the driver posts by setting the HCR's go bit, reading and writing
 * mailboxes by DMA through the function's IOMMU domain ({@link Firmware}).
 *
 * <p>Lock rules: {@link #fwLock} is held by the firmware thread around each command and by a
 * chip reset (the driver's thread, from the BAR write handler), so a reset never meets a command
 * half done; the EQ doorbells take only their EQ's monitor.
 */
public final class ConnectX3Device {

    public static final int VENDOR_MELLANOX = 0x15b3;
    public static final int DEVICE_CONNECTX3 = 0x1003;
    public static final long BAR0_SIZE = 1L << 20;
    /** UAR pages (4 MiB, QUERY_DEV_CAP's uar_sz), then as many BlueFlame pages ({@link Uar#BF_BASE}). */
    public static final long BAR2_SIZE = 8L << 20;
    public static final int MSIX_VECTORS = 8;

    private final String name;
    private final long nodeGuid;
    private final int nports;
    private final Function<PciFunction, HcaDevice> bringUp;
    private volatile PciFunction fn;
    private volatile MemorySegment bar0;
    private volatile MemorySegment bar2;
    private volatile Firmware fw;
    private final LinkedBlockingQueue<Integer> goes = new LinkedBlockingQueue<>();
    private final ReentrantLock fwLock = new ReentrantLock();
    private volatile boolean closed;
    private Thread thread;

    /**
     * A device named {@code name} with node GUID {@code nodeGuid} and {@code nports} ports, whose
     * engine {@code bringUp} creates at {@code INIT_HCA} from the function (again after a reset).
     */
    public ConnectX3Device(String name, long nodeGuid, int nports, Function<PciFunction, HcaDevice> bringUp) {
        this.name = name;
        this.nodeGuid = nodeGuid;
        this.nports = nports;
        this.bringUp = bringUp;
    }

    /**
     * What the function looks like on the bus: class 0x020700 (InfiniBand), BAR0 (1 MiB: HCR,
     * reset), BAR2 (8 MiB: UAR pages, then BlueFlame pages), 8 MSI-X vectors; powered on before it is published.
     */
    public PciDeviceSpec.Builder spec() {
        return PciDeviceSpec.builder(name).vendorId(VENDOR_MELLANOX).deviceId(DEVICE_CONNECTX3).classCode(0x020700)
                .bar(0, BAR0_SIZE, bar0Writes).bar(2, BAR2_SIZE, bar2Writes).msixVectors(MSIX_VECTORS).powerOn(this::attach);
    }

    private synchronized void attach(PciFunction function) {
        if (fn != null) {
            throw new IllegalStateException(name + ": already attached to " + function.bdf());
        }
        fn = function;
        bar0 = function.barMemory(0);
        bar2 = function.barMemory(2);
        fw = new Firmware(name, function, nodeGuid, nports, () -> bringUp.apply(function));
        thread = Thread.ofPlatform().daemon().name("fw-" + function.bdf()).start(this::firmwareLoop);
        function.addRemovalListener(this::close);
    }

    private final BarWriteHandler bar0Writes = (bar, offset, width, value) -> {
        MemorySegment b = bar0;
        if (b == null) {
            return;
        }
        if (offset == Hcr.BASE + Hcr.STATUS && width == 4) {
            int word = b.get(BE32, offset);
            if (Hcr.go(word)) {
                goes.add(word);
            }
        } else if (offset == Hcr.RESET && b.get(BE32, offset) == Hcr.RESET_VALUE) {
            chipReset();
        }
    };

    /**
     * BAR2: the UAR pages' doorbells (MMIO writes), and from {@link Uar#BF_BASE} on the BlueFlame
     * pages, which take a write-combined burst whole (a send WQE,
     * {@link MemQp#fetchSend}); elsewhere a burst is the 64-bit writes it is made of.
     */
    private final BarWriteHandler bar2Writes = new BarWriteHandler() {
        @Override
        public void written(int bar, long offset, int width, long value) {
            uarWrite(offset, width, value);
        }

        @Override
        public void writtenBurst(int bar, long offset, MemorySegment payload, long payloadOffset, int length) {
            Firmware f = fw;
            if (f == null || offset < Uar.BF_BASE) {
                BarWriteHandler.super.writtenBurst(bar, offset, payload, payloadOffset, length);
                return;
            }
            blueFlame(f, (int) ((offset - Uar.BF_BASE) / Uar.PAGE_SIZE), offset & (Uar.PAGE_SIZE - 1), payload, payloadOffset, length);
        }
    };

    private void uarWrite(long offset, int width, long value) {
        MemorySegment b = bar2;
        Firmware f = fw;
        if (b == null || f == null) {
            return;
        }
        if (offset >= Uar.BF_BASE) {
            f.eqs.strayDoorbells.incrementAndGet(); // a BlueFlame register takes bursts only
            return;
        }
        // Each doorbell acts on the value its write carried, never on the register's bytes read
        // back: every QP and CQ of a UAR page rings the same register, so another thread's
        // doorbell may have replaced them before this handler looks (a lost send doorbell hung
        // its work request: UarDoorbellRaceTest).
        long in = offset & (Uar.PAGE_SIZE - 1);
        int page = (int) (offset / Uar.PAGE_SIZE);
        if (in >= Uar.EQ_DOORBELL && in < Uar.EQ_DOORBELL + 32 && (in & 7) == 0 && width == 4) {
            f.eqs.doorbell(page, (int) (in - Uar.EQ_DOORBELL) / 8, (int) value); // write32be: the be32 as written
        } else if (in == Uar.CQ_DOORBELL && width == 8) {
            // mlx4_write64: two be32 words in memory order; a 64-bit store is little-endian, so the first word is the value's low bytes reversed
            long be = Long.reverseBytes(value);
            cqDoorbell(f, (int) (be >>> 32), (int) be & 0xff_ffff);
        } else if (in == Uar.SEND_DOORBELL && width == 4) {
            sendDoorbell(f, page, (int) value >>> 8); // write32be of qpn << 8
        }
    }

    /**
     * The CQ doorbell ({@code mlx4_cq_arm}'s 64-bit write: be32 {@code sn << 28 | cmd | cqn}, then
     * the consumer index): {@code REQ_NOT} arms the CQ for the next completion, {@code REQ_NOT_SOL}
     * for the next solicited one, and a CQE already waiting at or past the consumer index fires
     * at once ({@link HwCq#arm(boolean, long)}); a doorbell for no live CQ is counted and dropped.
     */
    private void cqDoorbell(Firmware f, int word, int ci) {
        HcaDevice e = f.engine();
        HwCq cq = e == null ? null : e.cqByNumber(word & 0xff_ffff);
        int cmd = word & 3 << 24;
        if (cq == null || cmd != Uar.CQ_DB_REQ_NOT && cmd != Uar.CQ_DB_REQ_NOT_SOL) {
            f.eqs.strayDoorbells.incrementAndGet();
            return;
        }
        cq.arm(cmd == Uar.CQ_DB_REQ_NOT_SOL, ci);
    }

    /**
     * The send doorbell (be32 {@code qpn << 8}) on UAR page {@code page}: the QP's send queue is
     * fetched from memory while its WQEs are the hardware's. A doorbell for no QP in hardware
     * ownership, or on another UAR page than the QP's, is counted and dropped.
     */
    private void sendDoorbell(Firmware f, int page, int qpn) {
        MemQp q = f.qps.qp(qpn);
        if (q == null || q.uar != page) {
            f.eqs.strayDoorbells.incrementAndGet();
            return;
        }
        q.fetchSend(null, 0, 0);
    }

    /**
     * A burst into BlueFlame page {@code page} at {@code in}: a send WQE whose {@code bf_qpn}
     * names the QP (its UAR page must be this page's), within one BlueFlame register. Anything
     * else is a stray write.
     */
    private void blueFlame(Firmware f, int page, long in, MemorySegment payload, long payloadOffset, int length) {
        MemQp q = in + length <= Uar.BF_REG_SIZE && length >= org.peerdirect.hca.cx3.ifc.Wqe.CTRL_SIZE
                ? f.qps.qp(payload.get(BE32, payloadOffset + org.peerdirect.hca.cx3.ifc.Wqe.CTRL_BF_QPN) >>> 8) : null;
        if (q == null || q.uar != page) {
            f.eqs.strayDoorbells.incrementAndGet();
            return;
        }
        q.fetchSend(payload, payloadOffset, length);
    }

    /** {@code mlx4_reset}: everything the firmware was given is forgotten, the engine goes, the HCR is idle. */
    private void chipReset() {
        fwLock.lock();
        try {
            goes.clear();
            fw.reset();
            bar0.set(BE32, Hcr.BASE + Hcr.STATUS, 0);
        } finally {
            fwLock.unlock();
        }
    }

    private void firmwareLoop() {
        while (!closed) {
            Integer word;
            try {
                word = goes.poll(10, TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                return;
            }
            if (word == null) {
                continue;
            }
            fwLock.lock();
            try {
                if (!closed) {
                    hcr();
                }
            } finally {
                fwLock.unlock();
            }
        }
    }

    /**
     * Executes the command in the HCR: the output parameter first, then the status with the go
     * bit cleared (the toggle, event bit and opcode kept), then, in event mode, the completion
     * EQE with the driver's token.
     */
    private void hcr() {
        MemorySegment b = bar0;
        long base = Hcr.BASE;
        int word = b.get(BE32, base + Hcr.STATUS);
        if (!Hcr.go(word)) {
            return; // a stale doorbell: this command already ran
        }
        Firmware.Cmd c = new Firmware.Cmd(Hcr.opcode(word), Hcr.opModifier(word), b.get(BE64, base + Hcr.IN_PARAM),
                b.get(BE32, base + Hcr.IN_MODIFIER), b.get(BE64, base + Hcr.OUT_PARAM), b.get(BE32, base + Hcr.TOKEN) >>> 16);
        Firmware.Result r = fw.execute(c);
        b.set(BE64, base + Hcr.OUT_PARAM, r.out());
        VarHandle.releaseFence(); // the output before the status the driver polls
        b.set(BE32, base + Hcr.STATUS, r.status() << Hcr.STATUS_SHIFT | word & ~(1 << Hcr.GO_BIT) & 0x00ff_ffff);
        if (Hcr.event(word)) {
            fw.eqs.postCmd(c.token(), r.status(), r.out());
        }
    }

    /** The engine, once a driver's {@code INIT_HCA} brought it up (also after it was removed), else null. */
    public HcaDevice engineIfUp() {
        Firmware f = fw;
        return f == null ? null : f.engine();
    }

    /** The reason of the last refused command (a log line the firmware would keep). */
    public String lastRefusal() {
        Firmware f = fw;
        return f == null ? "" : f.lastRefusal();
    }

    /** Commands executed and refused (tools and tests). */
    public long commandsExecuted() {
        Firmware f = fw;
        return f == null ? 0 : f.executed.get();
    }

    public long commandsRefused() {
        Firmware f = fw;
        return f == null ? 0 : f.refused.get();
    }

    /** What the model shows tools: state, lent memory, EQs, CQs and the CQEs written, QPs and the WQEs fetched. */
    public String describe() {
        Firmware f = fw;
        if (f == null) {
            return name + ": not attached";
        }
        return String.format("%s: %s, FA %d pages, aux %d pages, ICM %d pages mapped, commands %d (refused %d), EQs %d%s, events lost %d, "
                + "stray doorbells %d, CQs %d (CQEs written %d, ring DMA faults %d), QPs %d (send WQEs fetched %d, by BlueFlame %d, malformed %d; "
                + "receive WQEs fetched %d; WQE DMA faults %d)", name, f.state(), f.icm.faPages(), f.icm.auxPages(),
                f.icmMappedPages(), f.executed.get(), f.refused.get(), f.eqs.count(), f.eqs.describe(), f.eqs.lost.get(),
                f.eqs.strayDoorbells.get(), f.cqs.count(), f.cqs.cqesWritten.sum(), f.cqs.cqDmaFaults.get(), f.qps.count(),
                f.qps.sendWqes.sum(), f.qps.bfWqes.sum(), f.qps.badWqes.get(), f.qps.recvWqes.sum(), f.qps.dmaFaults.get());
    }

    /** Powers the firmware down (the function's removal): the EQs and the engine stop, then the thread. Idempotent. */
    public void close() {
        closed = true;
        Firmware f = fw;
        if (f != null) {
            fwLock.lock();
            try {
                f.reset();
            } finally {
                fwLock.unlock();
            }
        }
        Thread t;
        synchronized (this) {
            t = thread;
        }
        // waits for the thread (5 s at most) even when the caller is interrupted; its flag is handed back after
        if (t != null && org.peerdirect.hca.engine.FirmwareThreads.kthreadStop(t, java.time.Duration.ofSeconds(5))) {
            Thread.currentThread().interrupt();
        }
    }
}

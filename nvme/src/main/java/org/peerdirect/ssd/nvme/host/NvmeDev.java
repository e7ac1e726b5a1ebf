package org.peerdirect.ssd.nvme.host;

import static org.peerdirect.ssd.regs.NvmeCommand.*;
import static org.peerdirect.ssd.regs.NvmeRegs.*;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;

import org.peerdirect.kernel.dma.DmaDirection;
import org.peerdirect.kernel.dma.DmaMapper;
import org.peerdirect.kernel.dma.coherent.DmaCoherentPages;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.pci.PciFunction;
import org.peerdirect.ssd.nvme.host.NvmeQueue.Completion;

/**
 * One NVMe controller as {@code nvme.ko} drives it through its registers and its admin queue
 * ({@code struct nvme_dev} of {@code drivers/nvme/host/pci.c} with the {@code struct nvme_ctrl}
 * parts of {@code core.c} it needs): bring-up as {@code nvme_pci_configure_admin_queue} does it
 * (disable, wait for {@code CSTS.RDY} 0, program {@code AQA}/{@code ASQ}/{@code ACQ}, enable, wait
 * for {@code CSTS.RDY} 1 within {@code CAP.TO}), Identify Controller, one outstanding
 * Asynchronous Event Request, synchronous admin commands ({@code nvme_submit_sync_cmd}) completed
 * by polling after the doorbell and by the admin queue's MSI-X vector ({@code nvme_irq}), the
 * controller reset when the controller failed under a command ({@code CSTS.CFS}, not ready,
 * no answer: {@code nvme_timeout} → {@code nvme_reset_work}), and shutdown through
 * {@code CC.SHN}/{@code CSTS.SHST} ({@code nvme_disable_ctrl(ctrl, true)}).
 *
 * <p>Lock: {@link #lock} (the admin lock) guards the queue, the command ids, the completions
 * and every field below; a waiting submitter releases it while it waits ({@link #completed}). The
 * IRQ handler takes it; {@code freeIrq} is never called with it held. Never held while calling
 * out of the driver (the {@code afterReset} hook runs with it held and only writes registers).
 */
public final class NvmeDev {

    /** Admin queue entries ({@code NVME_AQ_DEPTH}). */
    public static final int NVME_AQ_DEPTH = 32;
    /**
     * System property: how long a synchronous admin command may take before the controller is
     * reset, in milliseconds (the kernel's {@code nvme_core.admin_timeout} module parameter, 60 s
     * there; 10 s here, where the model answers at once). Read at probe.
     */
    public static final String ADMIN_TIMEOUT_PROPERTY = "nvme_core.admin_timeout_ms";
    /** {@code shutdown_timeout}: 5 s for CSTS.SHST to say complete. */
    static final long SHUTDOWN_TIMEOUT_NANOS = TimeUnit.SECONDS.toNanos(5);
    /** The asynchronous events remembered for {@code ssd:info}. */
    static final int EVENTS_KEPT = 16;

    /** What Identify Controller said: model number, serial number, firmware revision, version. */
    public record Identity(int vid, String model, String serial, String firmware, int version) {
        public String versionText() {
            return (version >>> 16) + "." + ((version >>> 8) & 0xff) + ((version & 0xff) == 0 ? "" : "." + (version & 0xff));
        }
    }

    /** An admin command's outcome: status ({@code NVME_SC_*} with SCT and DNR) and DW0. */
    public record AdminResult(int status, int result) {
        public boolean ok() {
            return status == NVME_SC_SUCCESS;
        }
    }

    private final String name;
    private final Mm mm;
    private final PciFunction fn;
    private final DmaMapper dma;
    private final long cap;
    private final Runnable afterReset;
    private final long adminTimeoutNanos = TimeUnit.MILLISECONDS.toNanos(Math.max(1, Long.getLong(ADMIN_TIMEOUT_PROPERTY, 10_000)));
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition completed = lock.newCondition();
    private final NvmeQueue adminq;
    private final MemorySegment cmd = Arena.ofAuto().allocate(SQE_SIZE, 8);
    private final Map<Integer, Completion> done = new HashMap<>();
    private final BitSet cids = new BitSet();
    private int nextCid;
    /** The outstanding Asynchronous Event Request's command id, or -1. */
    private int aerCid = -1;
    private boolean resubmitAer;
    private final ArrayDeque<Integer> events = new ArrayDeque<>();
    private long aens;
    private long resets;
    private String lastReset = "";
    private boolean dead;
    private Identity identity;
    private final Runnable removed = this::removed;

    /**
     * Probe ({@code nvme_probe} → {@code nvme_reset_work}): the admin queue allocated, the
     * controller enabled on it, the admin vector requested, Identify Controller, an
     * Asynchronous Event Request posted. {@code afterReset} runs (admin lock held) after every
     * later controller reset, so the caller can put back what a reset undoes.
     *
     * @throws KernelException ENODEV when the controller reads all ones or does not become
     *         ready within CAP.TO, EIO when it reports a fatal status or refuses Identify
     */
    public NvmeDev(Mm mm, PciFunction fn, String name, Runnable afterReset) {
        this.name = name;
        this.mm = mm;
        this.fn = fn;
        this.afterReset = afterReset;
        this.cap = fn.read64(0, NVME_REG_CAP);
        if (cap == -1L) {
            throw new KernelException(Errno.ENODEV, name + ": controller at " + fn.bdf() + " reads all ones (gone)");
        }
        this.dma = fn.dma();
        lock.lock();
        try {
            this.adminq = new NvmeQueue(lock, new DmaCoherentPages(mm, dma), fn, 0, NVME_AQ_DEPTH, capStride(cap));
        } finally {
            lock.unlock();
        }
        fn.addRemovalListener(removed);
        try {
            lock.lock();
            try {
                configureAdminQueue();
            } finally {
                lock.unlock();
            }
            fn.requestIrq(0, v -> irq());
            this.identity = identifyCtrl();
            lock.lock();
            try {
                submitAsyncEvent();
            } finally {
                lock.unlock();
            }
        } catch (RuntimeException e) {
            shutdown();
            throw e;
        }
    }

    public String name() {
        return name;
    }

    public long cap() {
        return cap;
    }

    public Identity identity() {
        return identity;
    }

    // ------------------------------------------------------------------ bring-up (pci.c, core.c)

    /** {@code nvme_pci_configure_admin_queue}: disable, the admin queue's registers, enable. */
    private void configureAdminQueue() {
        assert lock.isHeldByCurrentThread();
        disableCtrl();
        adminq.init();
        int aqa = (adminq.depth - 1) | ((adminq.depth - 1) << NVME_AQA_ACQS_SHIFT);
        fn.write32(0, NVME_REG_AQA, aqa);
        loHiWriteq(NVME_REG_ASQ, adminq.sqDmaAddr);
        loHiWriteq(NVME_REG_ACQ, adminq.cqDmaAddr);
        enableCtrl();
    }

    private void loHiWriteq(int reg, long v) {
        fn.write32(0, reg, (int) v);
        fn.write32(0, reg + 4, (int) (v >>> 32));
    }

    /** {@code nvme_disable_ctrl(ctrl, false)}: CC.EN 0, then CSTS.RDY 0 within CAP.TO. */
    private void disableCtrl() {
        int cc = fn.read32(0, NVME_REG_CC);
        fn.write32(0, NVME_REG_CC, cc & ~NVME_CC_ENABLE & ~NVME_CC_SHN_MASK);
        waitReady(false);
    }

    /** {@code nvme_enable_ctrl}: NVM command set, 4 KiB pages, round robin, 64/16-byte I/O entries, CC.EN 1; CSTS.RDY 1 within CAP.TO. */
    private void enableCtrl() {
        int mps = 0; // PAGE_SHIFT - 12
        if (mps < capMpsMin(cap) || mps > capMpsMax(cap)) {
            throw new KernelException(Errno.ENODEV, String.format("%s: minimum device page size %d too large for host (4096)", name,
                    1 << (12 + capMpsMin(cap))));
        }
        int cc = NVME_CC_CSS_NVM | (mps << NVME_CC_MPS_SHIFT) | NVME_CC_IOSQES | NVME_CC_IOCQES | NVME_CC_ENABLE;
        fn.write32(0, NVME_REG_CC, cc);
        waitReady(true);
    }

    /**
     * {@code nvme_wait_ready}: polls CSTS.RDY for {@code enabled} within {@code (CAP.TO + 1) * 500 ms}.
     * A fatal status while enabling fails at once (the controller will not get ready).
     */
    private void waitReady(boolean enabled) {
        long deadline = System.nanoTime() + (capTimeout(cap) + 1) * TimeUnit.MILLISECONDS.toNanos(500);
        for (int spins = 0;; spins++) {
            int csts = fn.read32(0, NVME_REG_CSTS);
            if (csts == -1) {
                throw new KernelException(Errno.ENODEV, name + ": controller gone while waiting for CSTS.RDY " + (enabled ? 1 : 0));
            }
            if (((csts & NVME_CSTS_RDY) != 0) == enabled) {
                return;
            }
            if (enabled && (csts & NVME_CSTS_CFS) != 0) {
                throw new KernelException(Errno.EIO, String.format("%s: controller fatal status while enabling (CSTS 0x%x)", name, csts));
            }
            if (System.nanoTime() - deadline > 0) {
                throw new KernelException(Errno.ENODEV, String.format("%s: device not ready; aborting %s, CSTS=0x%x", name,
                        enabled ? "initialisation" : "reset", csts));
            }
            if (spins < 100) {
                Thread.onSpinWait();
            } else {
                LockSupport.parkNanos(TimeUnit.MICROSECONDS.toNanos(100)); // usleep_range(1000, 2000) in the kernel
            }
        }
    }

    /** {@code nvme_identify_ctrl}: Identify CNS 01h into a DMA page of the driver's. */
    private Identity identifyCtrl() {
        long pfn = mm.allocPages(0);
        long iova = -1;
        try {
            iova = dma.dmaMapPage(pfn, DmaDirection.FROM_DEVICE);
            long at = iova;
            AdminResult r = submitSync(c -> {
                c.set(ValueLayout.JAVA_BYTE, SQE_OPCODE, (byte) nvme_admin_identify);
                c.set(LE64, SQE_PRP1, at);
                c.set(LE32, SQE_CDW10, NVME_ID_CNS_CTRL);
            });
            if (!r.ok()) {
                throw new KernelException(Errno.EIO, name + ": Identify Controller failed: " + statusName(r.status()));
            }
            MemorySegment id = mm.pageAddress(pfn, 0);
            return new Identity(id.get(LE16, ID_CTRL_VID) & 0xffff, text(id, ID_CTRL_MN, ID_CTRL_MN_LEN), text(id, ID_CTRL_SN, ID_CTRL_SN_LEN),
                    text(id, ID_CTRL_FR, ID_CTRL_FR_LEN), id.get(LE32, ID_CTRL_VER));
        } finally {
            if (iova != -1) {
                dma.dmaUnmap(iova, 1);
            }
            mm.freePages(pfn, 0);
        }
    }

    private static String text(MemorySegment id, int off, int len) {
        byte[] b = id.asSlice(off, len).toArray(ValueLayout.JAVA_BYTE);
        return new String(b, StandardCharsets.US_ASCII).strip();
    }

    // ------------------------------------------------------------------ admin commands

    /**
     * {@code __nvme_submit_sync_cmd}: {@code fill} writes the 64-byte command (cleared; the
     * driver sets the command id), the doorbell rings, the completion is awaited. A controller
     * that failed under the command (CSTS.CFS, not ready, no answer within the admin timeout) is
     * reset and the command tried once more.
     *
     * @throws KernelException ENODEV when the controller is gone or shut down, EIO when it fails again after a reset
     */
    public AdminResult submitSync(Consumer<MemorySegment> fill) {
        lock.lock();
        try {
            for (int attempt = 0;; attempt++) {
                if (dead) {
                    throw new KernelException(Errno.ENODEV, name + ": the controller is gone");
                }
                if (!running()) {
                    resetLocked("controller not running before an admin command");
                }
                if (adminq.full()) { // only one command at a time is waited for: the controller consumes nothing
                    if (attempt == 1) {
                        throw new KernelException(Errno.EIO, name + ": admin queue still full after a controller reset");
                    }
                    resetLocked("admin queue full: the controller consumed none of it");
                    attempt++;
                }
                int cid = allocCid();
                cmd.fill((byte) 0);
                fill.accept(cmd);
                cmd.set(LE16, SQE_CID, (short) cid);
                adminq.submit(cmd);
                Completion c = await(cid);
                if (c != null) {
                    return new AdminResult(c.status() & (NVME_SCT_MASK | NVME_SC_MASK), c.result());
                }
                if (attempt == 1) {
                    throw new KernelException(Errno.EIO, name + ": admin command failed twice, the controller failed under it ("
                            + lastReset + ")");
                }
                resetLocked("the controller failed under an admin command");
            }
        } finally {
            lock.unlock();
        }
    }

    private boolean running() {
        int csts = fn.read32(0, NVME_REG_CSTS);
        return csts != -1 && (csts & (NVME_CSTS_RDY | NVME_CSTS_CFS)) == NVME_CSTS_RDY;
    }

    private int allocCid() {
        int cid = cids.nextClearBit(nextCid);
        if (cid > 0xffff) {
            cid = cids.nextClearBit(0);
        }
        cids.set(cid);
        nextCid = (cid + 1) & 0xffff;
        return cid;
    }

    /** The completion of {@code cid}, or null when the controller failed first (it forgot the command). */
    private Completion await(int cid) {
        long deadline = System.nanoTime() + adminTimeoutNanos;
        try {
            for (;;) {
                processCqLocked();
                Completion c = done.remove(cid);
                if (c != null) {
                    return c;
                }
                if (dead || !fn.present()) {
                    throw new KernelException(Errno.ENODEV, name + ": the controller went away during an admin command");
                }
                if (!running()) {
                    return null;
                }
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    return null; // nvme_timeout: reset
                }
                completed.awaitNanos(Math.min(left, TimeUnit.MILLISECONDS.toNanos(10)));
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new KernelException(Errno.EINTR, name + ": interrupted waiting for an admin command");
        } finally {
            cids.clear(cid);
        }
    }

    /** {@code nvme_process_cq} on the admin queue, then the Asynchronous Event Request posted again if one completed. */
    private void processCqLocked() {
        assert lock.isHeldByCurrentThread();
        if (dead) {
            return; // the queue's pages are freed (shutdown, surprise removal)
        }
        for (;;) {
            int n = adminq.processCq(this::complete);
            if (n > 0) {
                completed.signalAll();
            }
            if (resubmitAer && !dead && running()) {
                resubmitAer = false;
                submitAsyncEvent();
                continue; // the controller may have had an event waiting
            }
            resubmitAer = false;
            return;
        }
    }

    private void complete(Completion c) {
        if (c.cid() == aerCid) {
            cids.clear(aerCid);
            aerCid = -1;
            if ((c.status() & (NVME_SCT_MASK | NVME_SC_MASK)) == NVME_SC_SUCCESS) {
                nvmeCompleteAsyncEvent(c.result());
                resubmitAer = true;
            }
        } else if (cids.get(c.cid())) {
            done.put(c.cid(), c);
        }
        // else: a completion for a command nobody waits for (abandoned before a reset): dropped
    }

    /** {@code nvme_complete_async_event}: remembered, counted, logged as the kernel's dev_warn. */
    private void nvmeCompleteAsyncEvent(int result) {
        aens++;
        events.addLast(result);
        if (events.size() > EVENTS_KEPT) {
            events.removeFirst();
        }
        System.getLogger("org.peerdirect.ssd").log(System.Logger.Level.DEBUG, String.format("%s: async event result %08x", name, result));
    }

    /** {@code nvme_submit_async_event}: an Asynchronous Event Request left outstanding (no waiting). */
    private void submitAsyncEvent() {
        assert lock.isHeldByCurrentThread();
        if (aerCid != -1 || adminq.full()) {
            return;
        }
        aerCid = allocCid();
        cmd.fill((byte) 0);
        setHeader(cmd, nvme_admin_async_event, aerCid, 0);
        adminq.submit(cmd);
    }

    /** {@code nvme_irq}: the admin vector drains the completion queue. */
    private void irq() {
        lock.lock();
        try {
            if (!dead) {
                processCqLocked();
            }
        } finally {
            lock.unlock();
        }
    }

    // ------------------------------------------------------------------ reset, shutdown

    /** {@code nvme_reset_ctrl} ({@code reset_controller} in sysfs): the controller disabled and brought up again. */
    public void reset() {
        lock.lock();
        try {
            if (dead) {
                throw new KernelException(Errno.ENODEV, name + ": the controller is gone");
            }
            resetLocked("requested");
        } finally {
            lock.unlock();
        }
    }

    /** {@code nvme_reset_work}: commands in flight are forgotten, the admin queue set up again, the AER posted again. */
    private void resetLocked(String why) {
        assert lock.isHeldByCurrentThread();
        resets++;
        lastReset = why;
        done.clear();
        cids.clear();
        aerCid = -1;
        resubmitAer = false;
        configureAdminQueue();
        afterReset.run();
        submitAsyncEvent();
    }

    /**
     * {@code nvme_dev_disable(dev, true)} and {@code nvme_free_queues}: the admin vector freed,
     * CC.SHN normal and CSTS.SHST awaited, the controller disabled (it forgets the queue), the
     * queue's pages unmapped and freed. Returns what went wrong, in words; idempotent.
     */
    public List<String> shutdown() {
        fn.freeIrq(0); // not under the lock: a running handler takes it
        List<String> left = new ArrayList<>();
        lock.lock();
        try {
            if (dead) {
                return left;
            }
            dead = true;
            if (fn.present()) {
                int cc = fn.read32(0, NVME_REG_CC);
                fn.write32(0, NVME_REG_CC, (cc & ~NVME_CC_SHN_MASK) | NVME_CC_SHN_NORMAL);
                int csts = waitShutdown();
                if ((csts & NVME_CSTS_SHST_MASK) != NVME_CSTS_SHST_CMPLT || (csts & NVME_CSTS_CFS) != 0) {
                    left.add(String.format("%s: shutdown not complete (CSTS 0x%x): posted PMR writes may be lost", name, csts));
                }
                try {
                    fn.write32(0, NVME_REG_CC, 0);
                    waitReady(false);
                } catch (KernelException e) {
                    left.add(e.getMessage());
                }
            }
            adminq.free();
            completed.signalAll();
        } finally {
            lock.unlock();
            fn.removeRemovalListener(removed);
        }
        return left;
    }

    /** CSTS once SHST says complete, the controller failed, or the shutdown timeout passed. */
    private int waitShutdown() {
        long deadline = System.nanoTime() + SHUTDOWN_TIMEOUT_NANOS;
        for (int spins = 0;; spins++) {
            int csts = fn.read32(0, NVME_REG_CSTS);
            if (csts == -1 || (csts & NVME_CSTS_SHST_MASK) == NVME_CSTS_SHST_CMPLT || (csts & NVME_CSTS_CFS) != 0
                    || System.nanoTime() - deadline > 0) {
                return csts;
            }
            if (spins < 100) {
                Thread.onSpinWait();
            } else {
                LockSupport.parkNanos(TimeUnit.MICROSECONDS.toNanos(100));
            }
        }
    }

    /** Surprise removal: the device can no longer DMA; the queue's memory goes back at once. */
    private void removed() {
        lock.lock();
        try {
            dead = true;
            adminq.free();
            completed.signalAll();
        } finally {
            lock.unlock();
        }
    }

    // ------------------------------------------------------------------ the driver's view

    /**
     * Controller resets since probe, asynchronous events received, the last events' DW0 (oldest
     * first), the last reset's reason, the DMA pages the driver holds mapped (the admin queue's).
     */
    public record Stats(long resets, long aens, List<Integer> events, String lastReset, int dmaPages) {
    }

    public Stats stats() {
        lock.lock();
        try {
            return new Stats(resets, aens, List.copyOf(events), lastReset, adminq.dmaPages());
        } finally {
            lock.unlock();
        }
    }
}

package org.peerdirect.ssd.model;

import static org.peerdirect.ssd.regs.NvmeCommand.*;
import static org.peerdirect.ssd.regs.NvmeRegs.*;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.concurrent.locks.ReentrantLock;

import org.peerdirect.kernel.pci.PciFunction;

/**
 * The SSD's NVMe controller as the host sees it ({@code hw/nvme/ctrl.c} in QEMU): the register
 * file in BAR0 with the semantics of the NVMe 1.4/2.0 base specification, and the admin queue
 * pair in host memory (64-byte commands fetched from {@code ASQ}, 16-byte completions with the
 * phase tag posted to {@code ACQ}, doorbells at {@code 0x1000 + (2y) * (4 << CAP.DSTRD)}, MSI-X
 * vector 0 after each completion).
 *
 * <h2>What the host can do wrong, and the answer</h2>
 * <ul>
 * <li>A write to a read-only or reserved register has no effect: the register reads back its
 * value (reserved ones 0). The write landed in BAR memory before the model heard of it; the model
 * writes the true value back at once.</li>
 * <li>{@code CC.EN} 0→1 with a configuration the controller cannot run (page size outside
 * {@code CAP.MPSMIN..MPSMAX}, a command set or arbitration it lacks, a zero or unaligned
 * {@code ASQ}/{@code ACQ}, an admin queue of one entry): {@code CSTS.CFS}, {@code CSTS.RDY}
 * stays 0, as QEMU's {@code nvme_start_ctrl}. A command or completion the controller cannot move
 * (its DMA faults: a bad queue address) is also {@code CSTS.CFS}: no completion queue could carry
 * the error. A controller reset ({@code CC.EN} 1→0) clears it.</li>
 * <li>A doorbell of a queue that does not exist, or a value outside the queue (a tail past the
 * end, a completion head past what was posted), changes nothing and is reported as the spec says:
 * an asynchronous event of type Error status ("Write to Invalid Doorbell Register", "Invalid
 * Doorbell Write Value") completing an outstanding Asynchronous Event Request, retained (up to
 * eight) until one is outstanding.</li>
 * <li>A malformed admin command is completed with its status: Invalid Command Opcode, Invalid
 * Field in Command (FUSE or PSDT set, an unknown CNS or feature), PRP Offset Invalid, Invalid
 * Namespace, Data Transfer Error (its data pointer faults), Command ID Conflict, Asynchronous
 * Event Request Limit Exceeded.</li>
 * </ul>
 * The model runs an admin command when its doorbell is written, on the writer's thread, before
 * the write returns (a real controller does it moments later); it never blocks and never loops
 * past one pass over the queue, so no host write can hang it. A command stays in the submission
 * queue while the completion queue is full and runs once the host frees a slot.
 *
 * <p>The admin command set is the part the PMR driver needs: Identify (controller, namespace,
 * active namespace list; the controller has no namespaces), Get/Set Features (Asynchronous Event
 * Configuration), Asynchronous Event Request and Abort. The rest, I/O queues among them (the
 * model has no namespaces to do I/O to), is Invalid Command Opcode.
 *
 * <p>Lock: {@link #lock} guards every field below; register writes, the PMRSTS read barrier and
 * power-off take it. The media barrier ({@link Media#barrier}) is called with it held, never the
 * other way round.
 */
final class NvmeCtrl {

    /** What the controller asks of the SSD around it. */
    interface Media {
        /** The PMR write barrier: posted writes to the media; false when the media failed. */
        boolean barrier();

        /** {@code PMRCTL.EN} changed. */
        void pmrEnabled(boolean en);
    }

    /** MQES 1023 (0's based), CQR, TO 10 s (20 x 500 ms), DSTRD 0, CSS NVM, MPSMIN = MPSMAX = 4 KiB, PMRS. */
    static final long CAP = 0x3ffL | NVME_CAP_CQR | (20L << 24) | NVME_CAP_CSS_NVM | NVME_CAP_PMRS;
    static final int VS = 0x00010400; // 1.4.0
    /** Asynchronous Event Request Limit (0's based): four outstanding. */
    static final int AERL = 3;
    static final int MAX_RETAINED_EVENTS = 8;
    private static final int PAGE = 4096;

    private final String model;
    private final String serial;
    private final int pmrcap;
    private final int pmrebs;
    private final Media media;
    final ReentrantLock lock = new ReentrantLock();

    private PciFunction fn;
    private MemorySegment regs;
    private boolean dead;
    private int cc;
    private int csts;
    private int aqa;
    private long asq;
    private long acq;
    private int pmrctl;
    private int pmrErr;
    /** CC.EN 0→1 succeeded and no fatal error since: the admin queue runs. */
    private boolean running;
    /** ASQ and ACQ as CC.EN 0→1 found them: later writes to the registers do not move a running queue. */
    private long sqBase;
    private long cqBase;
    private int sqSize;
    private int cqSize;
    private int sqHead;
    private int sqTail;
    private int cqHead;
    private int cqTail;
    private boolean phase;
    private int aecfg;
    private final ArrayDeque<Integer> aerCids = new ArrayDeque<>();
    private final ArrayDeque<Integer> events = new ArrayDeque<>();
    /** Scratch for one entry (a 64-byte command, a 16-byte completion, a 4 KiB identify page). */
    private final MemorySegment sqe = Arena.ofAuto().allocate(SQE_SIZE, 8);
    private final MemorySegment cqe = Arena.ofAuto().allocate(CQE_SIZE, 8);

    /** Counters (guarded by lock): what the lab may ask. */
    private long commands;
    private long ignoredWrites;
    private long invalidDoorbells;
    private long droppedEvents;
    private long fatalErrors;
    private String lastFatal = "";

    NvmeCtrl(String model, String serial, int pmrcap, int pmrebs, Media media) {
        this.model = model;
        this.serial = serial;
        this.pmrcap = pmrcap;
        this.pmrebs = pmrebs;
        this.media = media;
    }

    /** Power-on reset: the registers as the spec gives them, the admin queue forgotten. */
    void powerOn(PciFunction f) {
        lock.lock();
        try {
            fn = f;
            regs = f.barMemory(0);
            regs.fill((byte) 0);
            cc = 0;
            aqa = 0;
            asq = 0;
            acq = 0;
            pmrctl = 0;
            pmrErr = 0;
            controllerReset();
            publishAll();
        } finally {
            lock.unlock();
        }
    }

    /** The card is pulled: no register write or DMA from now on. */
    void powerOff() {
        lock.lock();
        try {
            dead = true;
            running = false;
        } finally {
            lock.unlock();
        }
    }

    // ------------------------------------------------------------------ the register file

    /** A driver write to BAR0 (landed already); 64-bit writes are two dwords, low first. */
    void written(long offset, int width, long value) {
        lock.lock();
        try {
            if (dead || fn == null) {
                return;
            }
            dword(offset, (int) value);
            if (width == 8) {
                dword(offset + 4, (int) (value >>> 32));
            }
        } finally {
            lock.unlock();
        }
    }

    private void dword(long off, int v) {
        assert lock.isHeldByCurrentThread();
        if (off >= NVME_REG_DBS) {
            doorbell(off, v);
            regs.set(LE32, NVME_REG_CSTS, csts); // a queue the controller could not reach: CSTS.CFS
            return;
        }
        switch ((int) off) {
            case NVME_REG_CC -> cc(v & NVME_CC_DEFINED);
            case NVME_REG_AQA -> aqa = v & NVME_AQA_DEFINED;
            case NVME_REG_ASQ -> asq = (asq & 0xffff_ffff_0000_0000L) | (v & 0xffff_f000L);
            case NVME_REG_ASQ + 4 -> asq = (asq & 0xffff_ffffL) | ((long) v << 32);
            case NVME_REG_ACQ -> acq = (acq & 0xffff_ffff_0000_0000L) | (v & 0xffff_f000L);
            case NVME_REG_ACQ + 4 -> acq = (acq & 0xffff_ffffL) | ((long) v << 32);
            case NVME_REG_PMRCTL -> pmrctl(v & PMRCTL_EN);
            default -> ignoredWrites++; // read-only or reserved: no effect
        }
        regs.set(LE32, off, registerValue(off));
        regs.set(LE32, NVME_REG_CSTS, csts);
        regs.set(LE32, NVME_REG_PMRSTS, pmrsts());
    }

    /** The value a read of the dword at {@code off} (below the doorbells) returns. */
    private int registerValue(long off) {
        return switch ((int) off) {
            case NVME_REG_CAP -> (int) CAP;
            case NVME_REG_CAP + 4 -> (int) (CAP >>> 32);
            case NVME_REG_VS -> VS;
            case NVME_REG_CC -> cc;
            case NVME_REG_CSTS -> csts;
            case NVME_REG_AQA -> aqa;
            case NVME_REG_ASQ -> (int) asq;
            case NVME_REG_ASQ + 4 -> (int) (asq >>> 32);
            case NVME_REG_ACQ -> (int) acq;
            case NVME_REG_ACQ + 4 -> (int) (acq >>> 32);
            case NVME_REG_PMRCAP -> pmrcap;
            case NVME_REG_PMRCTL -> pmrctl;
            case NVME_REG_PMRSTS -> pmrsts();
            case NVME_REG_PMREBS -> pmrebs;
            // 8 GiB/s sustained write throughput, as a PCIe 4.0 x4 link carries
            case NVME_REG_PMRSWTP -> PMRSWTP_PMRSWTU_GIBS | (8 << PMRSWTP_PMRSWTV_SHIFT);
            default -> 0; // INTMS/INTMC (MSI-X), NSSR, CMB, PMRMSC (no CMSS), reserved
        };
    }

    private void publishAll() {
        for (long off = 0; off < NVME_REG_DBS; off += 4) {
            regs.set(LE32, off, registerValue(off));
        }
    }

    private int pmrsts() {
        return pmrErr | ((pmrctl & PMRCTL_EN) != 0 ? 0 : PMRSTS_NRDY);
    }

    private void cc(int v) {
        assert lock.isHeldByCurrentThread();
        int old = cc;
        cc = v;
        if ((old & NVME_CC_ENABLE) != 0 && (v & NVME_CC_ENABLE) == 0) {
            controllerReset();
        } else if ((old & NVME_CC_ENABLE) == 0 && (v & NVME_CC_ENABLE) != 0) {
            start();
        }
        if ((v & NVME_CC_SHN_MASK) != 0 && (old & NVME_CC_SHN_MASK) == 0) {
            // shutdown notification: the write buffer goes to the media before SHST says complete
            boolean ok = media.barrier();
            csts = (csts & ~NVME_CSTS_SHST_MASK) | NVME_CSTS_SHST_CMPLT | (ok ? 0 : NVME_CSTS_CFS);
        } else if ((v & NVME_CC_SHN_MASK) == 0 && (old & NVME_CC_SHN_MASK) != 0) {
            csts &= ~NVME_CSTS_SHST_MASK;
        }
    }

    /** Controller reset ({@code CC.EN} 1→0): queues forgotten, outstanding events dropped, CSTS cleared. */
    private void controllerReset() {
        running = false;
        csts = 0;
        sqSize = 0;
        cqSize = 0;
        sqHead = sqTail = cqHead = cqTail = 0;
        aerCids.clear();
        events.clear();
        aecfg = 0;
    }

    /** {@code CC.EN} 0→1: the admin queue from AQA/ASQ/ACQ, or CSTS.CFS naming what was wrong. */
    private void start() {
        int mps = (cc & NVME_CC_MPS_MASK) >>> NVME_CC_MPS_SHIFT;
        int asqs = (aqa & NVME_AQA_ASQS_MASK) + 1;
        int acqs = ((aqa >>> NVME_AQA_ACQS_SHIFT) & NVME_AQA_ASQS_MASK) + 1;
        String bad = null;
        if (mps < capMpsMin(CAP) || mps > capMpsMax(CAP)) {
            bad = "CC.MPS " + mps + " outside CAP.MPSMIN..MPSMAX";
        } else if ((cc & NVME_CC_CSS_MASK) != NVME_CC_CSS_NVM) {
            bad = "CC.CSS " + ((cc & NVME_CC_CSS_MASK) >>> NVME_CC_CSS_SHIFT) + " is no command set of this controller";
        } else if ((cc & NVME_CC_AMS_MASK) != 0) {
            bad = "CC.AMS: only round robin arbitration";
        } else if (asq == 0 || acq == 0) {
            bad = String.format("ASQ 0x%x / ACQ 0x%x: an admin queue at bus address 0", asq, acq);
        } else if (asqs < 2 || acqs < 2) {
            bad = "AQA 0x" + Integer.toHexString(aqa) + ": an admin queue needs two entries at least";
        }
        if (bad != null) {
            fatal("enable refused: " + bad);
            return;
        }
        sqBase = asq;
        cqBase = acq;
        sqSize = asqs;
        cqSize = acqs;
        sqHead = sqTail = cqHead = cqTail = 0;
        phase = true;
        running = true;
        csts = (csts & ~NVME_CSTS_CFS) | NVME_CSTS_RDY;
    }

    private void fatal(String why) {
        assert lock.isHeldByCurrentThread();
        running = false;
        csts |= NVME_CSTS_CFS;
        fatalErrors++;
        lastFatal = why;
    }

    private void pmrctl(int v) {
        boolean en = (v & PMRCTL_EN) != 0;
        if (!en && (pmrctl & PMRCTL_EN) != 0) {
            media.barrier(); // disabling the PMR does not lose what was posted to it
        }
        pmrctl = v;
        media.pmrEnabled(en);
    }

    /** A read of PMRSTS with the PMR on: the PMRWBM bit 1 barrier, its outcome in PMRSTS.ERR. */
    void pmrstsRead() {
        lock.lock();
        try {
            if (dead || fn == null || (pmrctl & PMRCTL_EN) == 0) {
                return;
            }
            pmrErr = media.barrier() ? 0 : 1;
            regs.set(LE32, NVME_REG_PMRSTS, pmrsts());
        } finally {
            lock.unlock();
        }
    }

    // ------------------------------------------------------------------ doorbells and the admin queue

    private void doorbell(long off, int v) {
        assert lock.isHeldByCurrentThread();
        if (!running) {
            ignoredWrites++; // no queue exists before CSTS.RDY (nor after a fatal error)
            return;
        }
        long idx = (off - NVME_REG_DBS) / (4L << capStride(CAP));
        if (idx > 1) {
            event(NVME_AER_ERROR_INVALID_DB_REG);
        } else if (idx == 0) {
            if (v < 0 || v >= sqSize) {
                event(NVME_AER_ERROR_INVALID_DB_VALUE);
                return;
            }
            sqTail = v;
            processSq();
        } else {
            int posted = Math.floorMod(cqTail - cqHead, cqSize);
            if (v < 0 || v >= cqSize || Math.floorMod(v - cqHead, cqSize) > posted) {
                event(NVME_AER_ERROR_INVALID_DB_VALUE);
                return;
            }
            cqHead = v;
            processSq(); // room in the completion queue: held commands and events go on
        }
    }

    private boolean cqFull() {
        return (cqTail + 1) % cqSize == cqHead;
    }

    /** Fetches and runs what the host queued, one pass, while the completion queue has room. */
    private void processSq() {
        assert lock.isHeldByCurrentThread();
        while (running && sqHead != sqTail && !cqFull()) {
            long at = sqBase + (long) sqHead * SQE_SIZE;
            try {
                fn.dmaPort().read(at, sqe, 0, SQE_SIZE);
            } catch (RuntimeException e) {
                fatal(String.format("admin SQ entry %d at bus address 0x%x: %s", sqHead, at, e.getMessage()));
                return;
            }
            sqHead = (sqHead + 1) % sqSize;
            commands++;
            long r = execute();
            if (r != DEFERRED) {
                post(cid(sqe), (int) (r >>> 32), (int) r);
            }
        }
        deliverEvents();
    }

    private void post(int cid, int status, int result) {
        assert lock.isHeldByCurrentThread();
        cqe.fill((byte) 0);
        cqe.set(LE32, CQE_RESULT, result);
        cqe.set(LE16, CQE_SQ_HEAD, (short) sqHead);
        cqe.set(LE16, CQE_CID, (short) cid);
        cqe.set(LE16, CQE_STATUS, (short) ((status << 1) | (phase ? 1 : 0)));
        long at = cqBase + (long) cqTail * CQE_SIZE;
        try {
            fn.dmaPort().writeDescriptor(at, cqe, 0, CQE_SIZE);
        } catch (RuntimeException e) {
            fatal(String.format("admin CQ entry %d at bus address 0x%x: %s", cqTail, at, e.getMessage()));
            return;
        }
        if (++cqTail == cqSize) {
            cqTail = 0;
            phase = !phase;
        }
        fn.raiseMsix(0);
    }

    private void event(int info) {
        invalidDoorbells++;
        if (events.size() < MAX_RETAINED_EVENTS) {
            events.add(aerResult(NVME_AER_ERROR, info, NVME_LOG_ERROR));
        } else {
            droppedEvents++;
        }
        deliverEvents();
    }

    private void deliverEvents() {
        while (running && !events.isEmpty() && !aerCids.isEmpty() && !cqFull()) {
            post(aerCids.poll(), NVME_SC_SUCCESS, events.poll());
        }
    }

    /** No completion now: an Asynchronous Event Request waits for an event. */
    private static final long DEFERRED = Long.MIN_VALUE;

    private static long done(int status, int result) {
        return ((long) status << 32) | (result & 0xffff_ffffL);
    }

    private long execute() {
        if ((flags(sqe) & (FLAGS_FUSE_MASK | FLAGS_PSDT_MASK)) != 0) {
            return done(NVME_SC_INVALID_FIELD | NVME_SC_DNR, 0); // no fused admin commands, no SGLs
        }
        if (aerCids.contains(cid(sqe))) {
            return done(NVME_SC_CMDID_CONFLICT | NVME_SC_DNR, 0);
        }
        return switch (opcode(sqe)) {
            case nvme_admin_identify -> identify();
            case nvme_admin_get_features -> (cdw10(sqe) & 0xff) == NVME_FEAT_ASYNC_EVENT ? done(0, aecfg)
                    : done(NVME_SC_INVALID_FIELD | NVME_SC_DNR, 0);
            case nvme_admin_set_features -> {
                if ((cdw10(sqe) & 0xff) != NVME_FEAT_ASYNC_EVENT) {
                    yield done(NVME_SC_INVALID_FIELD | NVME_SC_DNR, 0);
                }
                aecfg = cdw11(sqe);
                yield done(0, 0);
            }
            case nvme_admin_async_event -> {
                if (aerCids.size() > AERL) {
                    yield done(NVME_SC_ASYNC_LIMIT | NVME_SC_DNR, 0);
                }
                aerCids.add(cid(sqe));
                deliverEvents(); // an event retained while none was outstanding completes it at once
                yield DEFERRED;
            }
            case nvme_admin_abort_cmd -> done(0, 1); // DW0 bit 0: the command was not aborted
            default -> done(NVME_SC_INVALID_OPCODE | NVME_SC_DNR, 0);
        };
    }

    private long identify() {
        int cns = cdw10(sqe) & 0xff;
        int nsid = nsid(sqe);
        MemorySegment data;
        switch (cns) {
            case NVME_ID_CNS_CTRL -> data = idCtrl();
            case NVME_ID_CNS_NS -> {
                return done(NVME_SC_INVALID_NS | NVME_SC_DNR, 0); // no namespace exists (NN 0)
            }
            case NVME_ID_CNS_NS_ACTIVE_LIST -> {
                if (nsid == 0xffff_fffe || nsid == 0xffff_ffff) {
                    return done(NVME_SC_INVALID_NS | NVME_SC_DNR, 0);
                }
                data = Arena.ofAuto().allocate(NVME_IDENTIFY_DATA_SIZE); // empty: no active namespace
            }
            default -> {
                return done(NVME_SC_INVALID_FIELD | NVME_SC_DNR, 0);
            }
        }
        return done(dmaOut(prp1(sqe), prp2(sqe), data), 0);
    }

    /** Writes 4 KiB of data through PRP1 (and PRP2 when PRP1 starts inside its page); the status. */
    private int dmaOut(long prp1, long prp2, MemorySegment data) {
        int first = PAGE - (int) (prp1 & (PAGE - 1));
        if ((prp1 & 3) != 0 || (first < PAGE && (prp2 & (PAGE - 1)) != 0)) {
            return NVME_SC_PRP_INVALID_OFFSET | NVME_SC_DNR;
        }
        try {
            fn.dmaPort().write(prp1, data, 0, first);
            if (first < PAGE) {
                fn.dmaPort().write(prp2, data, first, PAGE - first);
            }
        } catch (RuntimeException e) {
            return NVME_SC_DATA_XFER_ERROR; // the data pointer does not reach host memory the controller may write
        }
        return NVME_SC_SUCCESS;
    }

    private MemorySegment idCtrl() {
        MemorySegment d = Arena.ofAuto().allocate(NVME_IDENTIFY_DATA_SIZE);
        d.set(LE16, ID_CTRL_VID, (short) NvmeSsd.VENDOR_SAMSUNG);
        d.set(LE16, ID_CTRL_SSVID, (short) NvmeSsd.VENDOR_SAMSUNG);
        ascii(d, ID_CTRL_SN, ID_CTRL_SN_LEN, serial);
        ascii(d, ID_CTRL_MN, ID_CTRL_MN_LEN, model);
        ascii(d, ID_CTRL_FR, ID_CTRL_FR_LEN, "PD1.4");
        d.set(ValueLayout.JAVA_BYTE, ID_CTRL_MDTS, (byte) 0);
        d.set(LE32, ID_CTRL_VER, VS);
        d.set(ValueLayout.JAVA_BYTE, ID_CTRL_ACL, (byte) 3);
        d.set(ValueLayout.JAVA_BYTE, ID_CTRL_AERL, (byte) AERL);
        d.set(ValueLayout.JAVA_BYTE, ID_CTRL_SQES, (byte) 0x66);
        d.set(ValueLayout.JAVA_BYTE, ID_CTRL_CQES, (byte) 0x44);
        d.set(LE32, ID_CTRL_NN, 0);
        return d;
    }

    /** An identify string: ASCII, space-padded, cut at {@code len}. */
    private static void ascii(MemorySegment d, int off, int len, String s) {
        byte[] b = s.getBytes(StandardCharsets.US_ASCII);
        for (int i = 0; i < len; i++) {
            d.set(ValueLayout.JAVA_BYTE, off + i, i < b.length ? b[i] : (byte) ' ');
        }
    }

    // ------------------------------------------------------------------ the lab's view

    /** What the controller counted since power-on (no driver can read this through the registers). */
    NvmeSsd.ControllerCounters counters() {
        lock.lock();
        try {
            return new NvmeSsd.ControllerCounters(commands, ignoredWrites, invalidDoorbells, droppedEvents, fatalErrors, lastFatal);
        } finally {
            lock.unlock();
        }
    }
}

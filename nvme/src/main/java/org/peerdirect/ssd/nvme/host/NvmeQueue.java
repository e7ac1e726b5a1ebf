package org.peerdirect.ssd.nvme.host;

import static org.peerdirect.ssd.regs.NvmeCommand.CQE_CID;
import static org.peerdirect.ssd.regs.NvmeCommand.CQE_RESULT;
import static org.peerdirect.ssd.regs.NvmeCommand.CQE_SIZE;
import static org.peerdirect.ssd.regs.NvmeCommand.CQE_SQ_HEAD;
import static org.peerdirect.ssd.regs.NvmeCommand.CQE_STATUS;
import static org.peerdirect.ssd.regs.NvmeCommand.SQE_SIZE;
import static org.peerdirect.ssd.regs.NvmeRegs.LE16;
import static org.peerdirect.ssd.regs.NvmeRegs.LE32;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;

import org.peerdirect.kernel.dma.coherent.DmaCoherentPages;
import org.peerdirect.kernel.pci.PciFunction;
import org.peerdirect.ssd.regs.NvmeRegs;

/**
 * One queue pair in host memory ({@code struct nvme_queue} of {@code drivers/nvme/host/pci.c}):
 * the submission queue and the completion queue each in a DMA-coherent page
 * ({@code dma_alloc_coherent}, {@link DmaCoherentPages}: mapped through the function's IOMMU
 * domain), the SQ tail and CQ head the driver writes to the doorbells, and the phase tag that
 * tells a new completion from an old one.
 *
 * <p>Lock: every method but {@link #free} runs under the owner's admin lock ({@link NvmeDev}),
 * asserted; {@link #free} too, and the queue is never touched after it.
 */
final class NvmeQueue {

    private static final VarHandle BYTE = ValueLayout.JAVA_BYTE.varHandle();

    /** One completion as the driver read it: command id, status (SC, SCT, DNR: {@code status >> 1}), DW0, SQ head. */
    record Completion(int cid, int status, int result, int sqHead) {
    }

    private final ReentrantLock lock;
    private final PciFunction fn;
    private final DmaCoherentPages coherent;
    final int qid;
    final int depth;
    private final long sqDb;
    private final long cqDb;
    private final DmaCoherentPages.Page sq;
    private final DmaCoherentPages.Page cq;
    /** The bus addresses the controller is given (ASQ, ACQ). */
    final long sqDmaAddr;
    final long cqDmaAddr;
    private final MemorySegment sqCmds;
    private final MemorySegment cqes;
    private int sqTail;
    /** The controller's SQ head as the last completion reported it: the slot after the tail is free while it differs. */
    private int sqHead;
    private int cqHead;
    private boolean cqPhase;
    private boolean freed;

    /** {@code nvme_alloc_queue}: both rings in one coherent page each ({@code dma_alloc_coherent}, as pci.c). */
    NvmeQueue(ReentrantLock lock, DmaCoherentPages coherent, PciFunction fn, int qid, int depth, int dstrd) {
        if (depth < 2 || depth * SQE_SIZE > 4096) {
            throw new IllegalArgumentException("queue depth " + depth + ": 2 to 64 entries (one page of commands)");
        }
        this.lock = lock;
        this.fn = fn;
        this.coherent = coherent;
        this.qid = qid;
        this.depth = depth;
        this.sqDb = NvmeRegs.doorbell(qid, false, dstrd);
        this.cqDb = NvmeRegs.doorbell(qid, true, dstrd);
        this.sq = coherent.alloc();
        try {
            this.cq = coherent.alloc();
        } catch (RuntimeException e) {
            coherent.free(sq);
            throw e;
        }
        this.sqDmaAddr = sq.iova();
        this.cqDmaAddr = cq.iova();
        this.sqCmds = sq.mem();
        this.cqes = cq.mem();
    }

    /** {@code nvme_init_queue}: empty rings, phase 1, before the controller is told of them. */
    void init() {
        assert lock.isHeldByCurrentThread();
        sqCmds.fill((byte) 0);
        cqes.fill((byte) 0);
        sqTail = 0;
        sqHead = 0;
        cqHead = 0;
        cqPhase = true;
    }

    /** True when no slot is free for a command (the controller has not consumed enough yet). */
    boolean full() {
        assert lock.isHeldByCurrentThread();
        return (sqTail + 1) % depth == sqHead;
    }

    /** {@code nvme_sq_copy_cmd} + {@code nvme_write_sq_db}: the 64-byte command at the tail, then the tail doorbell. */
    void submit(MemorySegment cmd) {
        assert lock.isHeldByCurrentThread();
        MemorySegment.copy(cmd, 0, sqCmds, (long) sqTail * SQE_SIZE, SQE_SIZE);
        sqTail = (sqTail + 1) % depth;
        VarHandle.releaseFence(); // the command is in memory before the controller hears of it (wmb)
        fn.write32(0, sqDb, sqTail);
    }

    /**
     * {@code nvme_process_cq}: hands every new completion (phase tag = ours) to {@code sink} in
     * order, then writes the CQ head doorbell once. Returns how many it found.
     */
    int processCq(Consumer<Completion> sink) {
        assert lock.isHeldByCurrentThread();
        int found = 0;
        for (;;) {
            long at = (long) cqHead * CQE_SIZE;
            int st = (byte) BYTE.getAcquire(cqes, at + CQE_STATUS) & 0xff; // the phase tag's byte, read first
            if (((st & 1) != 0) != cqPhase) {
                break;
            }
            int status = (cqes.get(LE16, at + CQE_STATUS) & 0xffff) >>> 1;
            Completion c = new Completion(cqes.get(LE16, at + CQE_CID) & 0xffff, status, cqes.get(LE32, at + CQE_RESULT),
                    cqes.get(LE16, at + CQE_SQ_HEAD) & 0xffff);
            if (++cqHead == depth) {
                cqHead = 0;
                cqPhase = !cqPhase;
            }
            sqHead = c.sqHead() % depth;
            found++;
            sink.accept(c);
        }
        if (found > 0) {
            fn.write32(0, cqDb, cqHead);
        }
        return found;
    }

    /** DMA pages this queue holds mapped: its two rings until freed. */
    int dmaPages() {
        assert lock.isHeldByCurrentThread();
        return freed ? 0 : sq.pages() + cq.pages();
    }

    /** {@code nvme_free_queue}: the rings unmapped and freed; only once the controller forgot them (disabled or gone). */
    void free() {
        assert lock.isHeldByCurrentThread();
        if (freed) {
            return;
        }
        freed = true;
        try {
            coherent.free(sq);
        } finally {
            coherent.free(cq);
        }
    }
}

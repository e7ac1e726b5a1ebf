package org.peerdirect.doca.dpa;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;

import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.dpa.dev.DocaDpaDev;
import org.peerdirect.doca.dpa.dev.DocaDpaDevKernel;
import org.peerdirect.flexio.FlexioEventHandler;
import org.peerdirect.flexio.FlexioProcess;

/**
 * The pool slots of doca-dpa-dev's kernel runtime for one {@link KernelDispatcher}: each a control
 * block in the heap ({@link DocaDpaDevKernel}) with its rank blocks and rank threads, made by
 * firmware command only when no free slot has enough ranks, reused after, gone with the process
 * at stop. A slot holds one launch from its queueing until the host sees its finished count move
 * (the last rank advances it before it moves the completion event).
 *
 * <p>Lock: every method runs under the dispatcher's lock ({@code lock}, asserted); it calls FlexIO
 * (copies, commands), never the DPA context or a sync event.
 */
final class KernelSlots {

    /** A pool slot; {@code launch} is the launch it holds (null: free), {@code gateOpen} whether the host's look let it go. */
    static final class Slot {
        final long ctl;
        final long blocks;
        final int capacity;
        final List<FlexioEventHandler> ranks = new ArrayList<>();
        long finished;
        KernelDispatcher.Launch launch;
        boolean gateOpen;

        Slot(long ctl, long blocks, int capacity) {
            this.ctl = ctl;
            this.blocks = blocks;
            this.capacity = capacity;
        }
    }

    private final DocaDpa dpa;
    private final FlexioProcess process;
    private final ReentrantLock lock;
    private final List<Slot> slots = new ArrayList<>();

    KernelSlots(DocaDpa dpa, FlexioProcess process, ReentrantLock lock) {
        this.dpa = dpa;
        this.process = process;
        this.lock = lock;
    }

    /** Slots holding a launch (a copy). */
    List<Slot> busy() {
        assert lock.isHeldByCurrentThread();
        List<Slot> l = new ArrayList<>();
        for (Slot s : slots) {
            if (s.launch != null) {
                l.add(s);
            }
        }
        return l;
    }

    /**
     * The smallest free slot with at least the launch's ranks, or a new one of exactly that many.
     * Busy slots are looked at first when none is free: a launch whose completion event was seen
     * has its finished count moved already (the rank runtime's order), so a host launching again
     * on that event reuses the slot rather than making rank threads.
     */
    Slot take(KernelDispatcher.Launch l, Consumer<KernelDispatcher.Launch> ended) {
        assert lock.isHeldByCurrentThread();
        Slot best = fits(l);
        if (best == null) {
            endFinished(ended);
            best = fits(l);
        }
        return best != null ? best : newSlot(l);
    }

    private Slot fits(KernelDispatcher.Launch l) {
        Slot best = null;
        for (Slot s : slots) {
            if (s.launch == null && s.capacity >= l.nthreads() && (best == null || s.capacity < best.capacity)) {
                best = s;
            }
        }
        return best;
    }

    /** Busy slots whose finished count moved (every rank ended): each launch to {@code ended}, the slot free again. */
    void endFinished(Consumer<KernelDispatcher.Launch> ended) {
        assert lock.isHeldByCurrentThread();
        for (Slot s : slots) {
            if (s.launch == null) {
                continue;
            }
            long finished = read(s.ctl + DocaDpaDevKernel.C_FINISHED);
            if (finished != s.finished) {
                s.finished = finished;
                KernelDispatcher.Launch l = s.launch;
                s.launch = null;
                ended.accept(l);
            }
        }
    }

    long read(long daddr) {
        return ByteBuffer.wrap(process.dev2hostMemcpy(daddr, 8)).order(ByteOrder.LITTLE_ENDIAN).getLong();
    }

    /**
     * A new slot: control block and rank blocks (rank, log stream, trace, window; the start writes
     * the count) in the heap, one runtime rank thread per rank, run. Firmware commands, once per slot.
     */
    private Slot newSlot(KernelDispatcher.Launch l) {
        int n = l.nthreads();
        long ctl = process.bufDevAlloc(DocaDpaDevKernel.controlSize(n));
        long blocks = ctl == 0 ? 0 : process.bufDevAlloc((long) n * DocaDpaDev.RANK_BLOCK_SIZE);
        if (blocks == 0) {
            if (ctl != 0) {
                process.bufDevFree(ctl);
            }
            throw new DocaException(DocaError.DOCA_ERROR_NO_MEMORY, l.call() + ": no DPA heap for " + n + " ranks' blocks");
        }
        Slot s = new Slot(ctl, blocks, n);
        try {
            ByteBuffer b = ByteBuffer.allocate(n * DocaDpaDev.RANK_BLOCK_SIZE).order(ByteOrder.LITTLE_ENDIAN);
            for (int rank = 0; rank < n; rank++) {
                b.putInt(rank * DocaDpaDev.RANK_BLOCK_SIZE + DocaDpaDev.OFF_RANK, rank);
                b.putLong(rank * DocaDpaDev.RANK_BLOCK_SIZE + DocaDpaDev.OFF_LOG_STREAM, dpa.logStream());
                b.putLong(rank * DocaDpaDev.RANK_BLOCK_SIZE + DocaDpaDev.OFF_TRACE, dpa.traceArea());
                b.putInt(rank * DocaDpaDev.RANK_BLOCK_SIZE + DocaDpaDev.OFF_WINDOW, dpa.windowId());
            }
            process.host2devMemcpy(b.array(), blocks);
            ByteBuffer c = ByteBuffer.allocate(DocaDpaDevKernel.controlSize(n)).order(ByteOrder.LITTLE_ENDIAN);
            c.putLong(DocaDpaDevKernel.C_RANK_BLOCKS, blocks);
            for (int rank = 0; rank < n; rank++) {
                FlexioEventHandler h = FlexioEventHandler.createRuntime(process, DocaDpaDevKernel.RANK_SYMBOL, ctl,
                        blocks + (long) rank * DocaDpaDev.RANK_BLOCK_SIZE);
                s.ranks.add(h);
                h.run();
                c.putLong(DocaDpaDevKernel.C_THREADS + 8 * rank, h.id());
            }
            process.host2devMemcpy(c.array(), ctl);
        } catch (RuntimeException e) { // nothing ran yet: the slot leaves nothing behind
            s.ranks.forEach(FlexioEventHandler::destroy);
            process.bufDevFree(blocks);
            process.bufDevFree(ctl);
            throw new DocaException(DocaError.DOCA_ERROR_DRIVER, l.call() + ": " + n + " rank threads of the kernel runtime: "
                    + e.getMessage(), e);
        }
        slots.add(s);
        return s;
    }
}

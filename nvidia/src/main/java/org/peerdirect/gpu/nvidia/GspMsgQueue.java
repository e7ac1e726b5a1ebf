package org.peerdirect.gpu.nvidia;

import static org.peerdirect.gpu.ifc.GpuRegs.*;
import static org.peerdirect.gpu.ifc.GspMsgq.*;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;

import org.peerdirect.gpu.ifc.GpuRpc;
import org.peerdirect.kernel.dma.coherent.DmaCoherentPages;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.kernel.mm.KernelException.Errno;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * The driver's side of the GPU's command and message queues ({@code message_queue_cpu.c} of
 * open-gpu-kernel-modules; nouveau's {@code r535_gsp_cmdq_push}/{@code r535_gsp_msgq_recv}): two
 * backing stores in coherent DMA memory ({@link DmaCoherentPages}; nouveau's {@code nvkm_gsp_mem_ctor}
 * is a {@code dma_alloc_coherent} too), the model's BAR0 block told where they
 * are ({@link org.peerdirect.gpu.ifc.GpuRegs}), RPCs written as elements with a checksum, the
 * doorbell, and the answers read back in order, woken by MSI-X. Plus the staging buffer the copy
 * engine reaches host memory through (CUDA copies pageable memory through a pinned staging buffer
 * too): the host side of every copy is a bus address in the GPU's IOMMU domain.
 *
 * <p>Every RPC is synchronous for its caller ({@link #submit} returns the answers); a batch of up
 * to {@code MSG_COUNT - 1} commands goes with one doorbell. When the GPU records a queue error
 * around a doorbell, or an answer is malformed or missing, the queues are set up again from zero
 * (so the driver stays usable after a device that misbehaved) and the call fails with EIO naming
 * the error; a GPU that is gone fails with ENODEV.
 *
 * <p>Lock: {@link #lock} serialises the queues and the staging buffer for a whole exchange; it is
 * the innermost lock of the driver (taken under the RM's monitor, never the other way). The MSI-X
 * handler takes only its own monitor.
 */
final class GspMsgQueue {

    /** One command: its function and what writes its parameters (at offset 0 of the segment given). */
    record Rpc(int function, int paramBytes, Consumer<MemorySegment> params) {
    }

    /** One answer: the function, {@code rpc_result}, {@code rpc_result_private} and the reply parameters (a copy). */
    record Reply(int function, int result, int detail, MemorySegment params) {
        boolean ok() {
            return result == GpuRpc.RESULT_OK;
        }
    }

    static final int MSG_SIZE = 256;
    static final int MSG_COUNT = 16;
    /** Each store: the header page and one page of 16 elements (an order-1 block). */
    private static final int STORE_ORDER = 1;
    private static final int STORE_BYTES = 4096 << STORE_ORDER;
    private static final long ENTRY_OFF = 0x1000;
    private static final long RX_HDR_OFF = TX_HDR_SIZE;
    /** The staging buffer: 64 KiB, one GPU page (an order-4 block). */
    static final int STAGING_ORDER = 4;
    static final int STAGING_BYTES = 4096 << STAGING_ORDER;
    private static final long TIMEOUT_NANOS = TimeUnit.SECONDS.toNanos(10);
    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED;
    private static final VarHandle PTR = ValueLayout.JAVA_INT.varHandle();

    private final String name;
    private final PciFunction fn;
    /** The queues' and the staging buffer's memory, and only theirs: {@link #release} frees it all. */
    private final DmaCoherentPages coherent;
    private final DmaCoherentPages.Page cmd;
    private final DmaCoherentPages.Page msg;
    private final DmaCoherentPages.Page stagingBuf;
    private final MemorySegment cmdStore;
    private final MemorySegment msgStore;
    /** The kernel's view of the staging buffer. */
    final MemorySegment staging;
    /** Held for a whole exchange (and while the staging buffer is in use), waits included. */
    final ReentrantLock lock = new ReentrantLock();
    /** The MSI-X handler's count of interrupts, guarded by its own monitor (the handler never takes {@link #lock}). */
    private final Object irq = new Object();
    private long irqs;
    // ---- guarded by lock
    private int cmdWrite;
    private int msgRead;
    private int sequence;
    private boolean closed;

    /**
     * Allocates and maps the queues and the staging buffer, requests the MSI-X vector and starts
     * the queues.
     *
     * @throws KernelException ENODEV when the function does not speak this interface, EIO when it refuses its queues
     */
    GspMsgQueue(String name, Mm mm, PciFunction fn) {
        this.name = name;
        this.fn = fn;
        int rev = fn.read32(BAR0, IF_REV);
        if (rev != IF_REV_1) {
            throw new KernelException(Errno.ENODEV, String.format("%s (%s): queue interface revision %d, this driver speaks %d", name, fn.bdf(), rev,
                    IF_REV_1));
        }
        this.coherent = new DmaCoherentPages(mm, fn.dma());
        try {
            cmd = coherent.alloc(STORE_ORDER);
            msg = coherent.alloc(STORE_ORDER);
            stagingBuf = coherent.alloc(STAGING_ORDER);
        } catch (RuntimeException e) {
            coherent.freeAll();
            throw e;
        }
        cmdStore = cmd.mem();
        msgStore = msg.mem();
        staging = stagingBuf.mem();
        try {
            fn.requestIrq(MSIX_MSGQ, v -> wake());
        } catch (RuntimeException e) { // the vector is someone else's: leave it to them
            closed = true;
            release();
            throw e;
        }
        try {
            lock.lock();
            try {
                start();
            } finally {
                lock.unlock();
            }
            submit(List.of(new Rpc(GpuRpc.NOP, 0, p -> { })), false); // the queues answer
        } catch (RuntimeException e) {
            close();
            throw e;
        }
    }

    /** Pages of the driver's own mapped for the GPU's DMA: both queue stores and the staging buffer; 0 once closed. */
    int dmaPages() {
        lock.lock();
        try {
            return closed ? 0 : coherent.live();
        } finally {
            lock.unlock();
        }
    }

    /** The bus address of the staging buffer's byte {@code off}. */
    long stagingAddress(int off) {
        return stagingBuf.iova() + off;
    }

    /** The MSI-X handler: answers arrived. */
    private void wake() {
        synchronized (irq) {
            irqs++;
            irq.notifyAll();
        }
    }

    private long irqs() {
        synchronized (irq) {
            return irqs;
        }
    }

    /** Writes both queue headers, tells the GPU where they are and switches the queues on. */
    private void start() {
        assert lock.isHeldByCurrentThread();
        for (MemorySegment s : List.of(cmdStore, msgStore)) {
            s.fill((byte) 0);
            s.set(INT, TX_VERSION, VERSION);
            s.set(INT, TX_SIZE, STORE_BYTES);
            s.set(INT, TX_MSG_SIZE, MSG_SIZE);
            s.set(INT, TX_MSG_COUNT, MSG_COUNT);
            s.set(INT, TX_RX_HDR_OFF, (int) RX_HDR_OFF);
            s.set(INT, TX_ENTRY_OFF, (int) ENTRY_OFF);
        }
        cmdWrite = 0;
        msgRead = 0;
        fn.write32(BAR0, CTRL, CTRL_RESET);
        fn.write32(BAR0, CMDQ_BASE_LO, (int) cmd.iova());
        fn.write32(BAR0, CMDQ_BASE_HI, (int) (cmd.iova() >>> 32));
        fn.write32(BAR0, MSGQ_BASE_LO, (int) msg.iova());
        fn.write32(BAR0, MSGQ_BASE_HI, (int) (msg.iova() >>> 32));
        fn.write32(BAR0, CTRL, CTRL_ENABLE);
        int status = fn.read32(BAR0, STATUS);
        if (status == -1 || !fn.present()) {
            throw new KernelException(Errno.ENODEV, name + " (" + fn.bdf() + "): the GPU is gone");
        }
        if ((status & STATUS_RUNNING) == 0) {
            throw new KernelException(Errno.EIO, String.format("%s (%s): the GPU refused its queues: %s (info 0x%x)", name, fn.bdf(),
                    errName(fn.read32(BAR0, ERR_CODE)), fn.read32(BAR0, ERR_INFO)));
        }
    }

    /**
     * Sends the commands in order and returns their answers in order. With {@code quietIfGone}
     * a driver that was closed or a GPU that is gone returns an empty list (the teardown of what
     * the card held: nothing to tell a card that is not there).
     *
     * @throws KernelException ENODEV when the GPU is gone (or the driver closed), EIO when the queues failed
     */
    List<Reply> submit(List<Rpc> rpcs, boolean quietIfGone) {
        lock.lock();
        try {
            if (closed || !fn.present()) {
                if (quietIfGone) {
                    return List.of();
                }
                throw new KernelException(Errno.ENODEV, name + " (" + fn.bdf() + "): " + (closed ? "the driver let go of the GPU" : "the GPU is gone"));
            }
            List<Reply> out = new ArrayList<>(rpcs.size());
            for (int i = 0; i < rpcs.size(); i += MSG_COUNT - 1) {
                List<Rpc> batch = rpcs.subList(i, Math.min(rpcs.size(), i + MSG_COUNT - 1));
                int errBefore = fn.read32(BAR0, ERR_COUNT);
                int first = sequence;
                for (Rpc r : batch) {
                    push(r);
                }
                PTR.setRelease(cmdStore, TX_WRITE_PTR, cmdWrite); // the elements are whole before the pointer moves
                fn.write32(BAR0, CMDQ_HEAD, cmdWrite);
                for (int k = 0; k < batch.size(); k++) {
                    out.add(receive(first + k, batch.get(k).function(), errBefore));
                }
            }
            return out;
        } finally {
            lock.unlock();
        }
    }

    /** Writes one element into the next command slot ({@code r535_gsp_cmdq_push}). */
    private void push(Rpc r) {
        MemorySegment e = cmdStore.asSlice(ENTRY_OFF + (long) cmdWrite * MSG_SIZE, MSG_SIZE);
        e.fill((byte) 0);
        e.set(INT, ELEM_SEQUENCE, sequence);
        e.set(INT, ELEM_COUNT, 1);
        long rpc = ELEM_HDR_SIZE;
        e.set(INT, rpc + RPC_HEADER_VERSION, RPC_HEADER_VERSION_3);
        e.set(INT, rpc + RPC_SIGNATURE, RPC_SIGNATURE_VRPC);
        e.set(INT, rpc + RPC_LENGTH, RPC_HDR_SIZE + r.paramBytes());
        e.set(INT, rpc + RPC_FUNCTION, r.function());
        e.set(INT, rpc + RPC_SEQUENCE, sequence);
        r.params().accept(e.asSlice(PARAMS, r.paramBytes()));
        e.set(INT, ELEM_CHECKSUM, checksum(e, 0, MSG_SIZE));
        sequence++;
        cmdWrite = (cmdWrite + 1) % MSG_COUNT;
    }

    /** The next answer, which must be the one to command {@code seq} ({@code r535_gsp_msgq_recv}). */
    private Reply receive(int seq, int function, int errBefore) {
        long deadline = System.nanoTime() + TIMEOUT_NANOS;
        for (long seen = irqs(); (int) PTR.getAcquire(msgStore, TX_WRITE_PTR) == msgRead; seen = irqs()) {
            if (!fn.present()) {
                throw new KernelException(Errno.ENODEV, name + " (" + fn.bdf() + "): the GPU is gone");
            }
            int err = fn.read32(BAR0, ERR_COUNT);
            if (err != errBefore) {
                throw failed(String.format("%s (info 0x%x)", errName(fn.read32(BAR0, ERR_CODE)), fn.read32(BAR0, ERR_INFO)));
            }
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                throw failed("no answer to " + GpuRpc.functionName(function) + " within " + TimeUnit.NANOSECONDS.toSeconds(TIMEOUT_NANOS) + " s");
            }
            try {
                synchronized (irq) {
                    if (irqs == seen) { // an interrupt since the check: look again at once
                        TimeUnit.NANOSECONDS.timedWait(irq, Math.min(left, TimeUnit.MILLISECONDS.toNanos(10))); // MSI-X wakes it
                    }
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new KernelException(Errno.EINTR, name + ": interrupted waiting for the GPU");
            }
        }
        int wp = (int) PTR.getAcquire(msgStore, TX_WRITE_PTR);
        if (wp < 0 || wp >= MSG_COUNT) {
            throw failed("message writePtr " + wp + " past the queue");
        }
        MemorySegment e = msgStore.asSlice(ENTRY_OFF + (long) msgRead * MSG_SIZE, MSG_SIZE);
        long rpc = ELEM_HDR_SIZE;
        int len = e.get(INT, rpc + RPC_LENGTH);
        if (checksum(e, 0, MSG_SIZE) != 0 || e.get(INT, rpc + RPC_SIGNATURE) != RPC_SIGNATURE_VRPC || e.get(INT, rpc + RPC_SEQUENCE) != seq
                || e.get(INT, rpc + RPC_FUNCTION) != function || len < RPC_HDR_SIZE || len > MSG_SIZE - ELEM_HDR_SIZE) {
            throw failed(String.format("a malformed answer to %s (sequence %d, function 0x%x, length %d)", GpuRpc.functionName(function),
                    e.get(INT, rpc + RPC_SEQUENCE), e.get(INT, rpc + RPC_FUNCTION), len));
        }
        MemorySegment params = MemorySegment.ofArray(new byte[len - RPC_HDR_SIZE]);
        MemorySegment.copy(e, PARAMS, params, 0, params.byteSize());
        Reply r = new Reply(function, e.get(INT, rpc + RPC_RESULT), e.get(INT, rpc + RPC_RESULT_PRIVATE), params);
        msgRead = (msgRead + 1) % MSG_COUNT;
        PTR.setRelease(cmdStore, RX_HDR_OFF + RX_READ_PTR, msgRead);
        return r;
    }

    /** The queues failed: they are set up again from zero, and the call fails naming why. */
    private KernelException failed(String why) {
        KernelException e = new KernelException(Errno.EIO, name + " (" + fn.bdf() + "): GPU queues: " + why + "; queues reset");
        try {
            start();
        } catch (KernelException again) {
            e.addSuppressed(again);
        }
        return e;
    }

    /** One command's answer, or EIO (ENODEV for a GPU whose memory is gone) naming what was refused. */
    static void check(String what, Reply r) {
        if (!r.ok()) {
            throw new KernelException(r.result() == GpuRpc.RESULT_GPU_GONE ? Errno.ENODEV : Errno.EIO, String.format("%s: %s refused: %s (0x%x)",
                    what, GpuRpc.functionName(r.function()), GpuRpc.resultName(r.result()), r.detail()));
        }
    }

    /**
     * Switches the queues off, frees the MSI-X vector and unmaps and frees the memory. Idempotent;
     * {@link #submit} fails (or returns nothing, when quiet) from now on.
     */
    void close() {
        lock.lock();
        try {
            if (closed) {
                return;
            }
            closed = true;
            fn.write32(BAR0, CTRL, CTRL_RESET); // no DMA of the GPU reaches these pages any more
        } finally {
            lock.unlock();
        }
        fn.freeIrq(MSIX_MSGQ);
        release();
    }

    /** Unmaps and frees the queues and the staging buffer (the GPU no longer uses them). */
    private void release() {
        coherent.freeAll();
    }
}

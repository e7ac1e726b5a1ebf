package org.peerdirect.gpu.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.peerdirect.gpu.ifc.GpuRegs.*;
import static org.peerdirect.gpu.ifc.GspMsgq.*;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.peerdirect.gpu.ifc.GpuRpc;
import org.peerdirect.kernel.dma.DmaDirection;
import org.peerdirect.kernel.dma.DmaMapper;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.iommu.IommuAudit;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.pci.PciFunction;
import org.peerdirect.kernel.pci.StandalonePciBus;

/**
 * A driver for the GPU model's queues as a test drives them, from the driver's side only: MMIO on
 * BAR0, the two queue stores and a 64 KiB host buffer in kernel pages mapped through the
 * function's IOMMU domain, elements written as bytes. It keeps no state of the model's: what it
 * knows it reads back from registers and memory.
 */
final class GpuQueueHarness implements AutoCloseable {

    static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED;
    static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED;
    /** No IOVA of this machine reaches this: DMA there is an IOMMU fault. */
    static final long UNMAPPED = 0x7_0000_0000L;
    static final long VRAM = 4L << 20;
    static final long BAR1_BYTES = 1L << 20;
    static final int PAGES = (int) (VRAM >> 16);
    static final int SLOTS = (int) (BAR1_BYTES >> 16);
    static final int HOST_BYTES = 64 << 10;
    private static final long BOUND_NANOS = TimeUnit.SECONDS.toNanos(10);

    /** One answer as read from the message queue. */
    record Answer(int function, int result, int detail, int sequence, MemorySegment params) {
    }

    final Mm mm;
    final Iommu iommu;
    final StandalonePciBus bus;
    final GpuBoard board;
    final PciFunction fn;
    final DmaMapper dma;
    final long cmdPfn;
    final long msgPfn;
    final long hostPfn;
    long cmdIova;
    long msgIova;
    final long hostIova;
    final MemorySegment cmdS;
    final MemorySegment msgS;
    final MemorySegment host;
    // geometry of this start: element size and count of each queue
    int cmdSize = 256;
    int cmdCount = 16;
    int msgSize = 256;
    int msgCount = 16;
    int cmdWrite;
    int msgRead;
    int sequence;

    GpuQueueHarness(Path tmp) {
        mm = new Mm(16L << 20, true, tmp.resolve("swap"), 1 << 20);
        iommu = new Iommu(mm);
        bus = new StandalonePciBus(iommu);
        board = new GpuBoard("NVIDIA A100-PCIE-40GB", VRAM, BAR1_BYTES);
        fn = bus.register(board.spec());
        dma = fn.dma();
        cmdPfn = mm.allocPages(1);
        msgPfn = mm.allocPages(1);
        hostPfn = mm.allocPages(4);
        cmdIova = map(cmdPfn, 2);
        msgIova = map(msgPfn, 2);
        hostIova = map(hostPfn, 16);
        cmdS = mm.pageAddress(cmdPfn, 1);
        msgS = mm.pageAddress(msgPfn, 1);
        host = mm.pageAddress(hostPfn, 4);
    }

    long map(long pfn, int n) {
        long[] pfns = new long[n];
        for (int i = 0; i < n; i++) {
            pfns[i] = pfn + i;
        }
        return dma.dmaMapSg(pfns, DmaDirection.BIDIRECTIONAL);
    }

    int reg(long off) {
        return fn.read32(BAR0, off);
    }

    void write(long off, int v) {
        fn.write32(BAR0, off, v);
    }

    /** A valid header for a store of {@code size}-byte elements, {@code count} of them. */
    static void header(MemorySegment s, int size, int count) {
        s.fill((byte) 0);
        s.set(INT, TX_VERSION, VERSION);
        s.set(INT, TX_SIZE, 0x1000 + size * count);
        s.set(INT, TX_MSG_SIZE, size);
        s.set(INT, TX_MSG_COUNT, count);
        s.set(INT, TX_RX_HDR_OFF, TX_HDR_SIZE);
        s.set(INT, TX_ENTRY_OFF, 0x1000);
    }

    /** Reset, both headers, the bases, ENABLE; the queues must run. */
    void start(int cmdSize, int cmdCount, int msgSize, int msgCount) {
        this.cmdSize = cmdSize;
        this.cmdCount = cmdCount;
        this.msgSize = msgSize;
        this.msgCount = msgCount;
        write(CTRL, CTRL_RESET);
        header(cmdS, cmdSize, cmdCount);
        header(msgS, msgSize, msgCount);
        bases(cmdIova, msgIova);
        write(CTRL, CTRL_ENABLE);
        cmdWrite = 0;
        msgRead = 0;
        assertEquals(STATUS_RUNNING, reg(STATUS), () -> "the queues run: " + errName(reg(ERR_CODE)) + String.format(" 0x%x", reg(ERR_INFO)));
    }

    void bases(long cmd, long msg) {
        write(CMDQ_BASE_LO, (int) cmd);
        write(CMDQ_BASE_HI, (int) (cmd >>> 32));
        write(MSGQ_BASE_LO, (int) msg);
        write(MSGQ_BASE_HI, (int) (msg >>> 32));
    }

    /** The command slot {@code cmdWrite}'s bytes. */
    MemorySegment slot() {
        return cmdS.asSlice(0x1000 + (long) cmdWrite * cmdSize, cmdSize);
    }

    /** A well-formed element for {@code function} with {@code params} (its RPC length covering them), checksum last. */
    MemorySegment element(int function, byte[] params, int length) {
        MemorySegment e = MemorySegment.ofArray(new byte[cmdSize]);
        e.set(INT, ELEM_SEQUENCE, sequence);
        e.set(INT, ELEM_COUNT, 1);
        e.set(INT, ELEM_HDR_SIZE + RPC_HEADER_VERSION, RPC_HEADER_VERSION_3);
        e.set(INT, ELEM_HDR_SIZE + RPC_SIGNATURE, RPC_SIGNATURE_VRPC);
        e.set(INT, ELEM_HDR_SIZE + RPC_LENGTH, length);
        e.set(INT, ELEM_HDR_SIZE + RPC_FUNCTION, function);
        e.set(INT, ELEM_HDR_SIZE + RPC_SEQUENCE, sequence);
        MemorySegment.copy(params, 0, e, ValueLayout.JAVA_BYTE, PARAMS, Math.min(params.length, (int) (cmdSize - PARAMS)));
        seal(e);
        return e;
    }

    static void seal(MemorySegment e) {
        e.set(INT, ELEM_CHECKSUM, 0);
        e.set(INT, ELEM_CHECKSUM, checksum(e, 0, (int) e.byteSize()));
    }

    /** Copies {@code e} into the next command slot (not yet published). */
    void put(MemorySegment e) {
        MemorySegment.copy(e, 0, slot(), 0, cmdSize);
        sequence++;
        cmdWrite = (cmdWrite + 1) % cmdCount;
    }

    /** Publishes writePtr and rings. */
    void ring() {
        cmdS.set(INT, TX_WRITE_PTR, cmdWrite);
        write(CMDQ_HEAD, cmdWrite);
    }

    /** Answers waiting in the message queue now. */
    int waiting() {
        return Math.floorMod(msgS.get(INT, TX_WRITE_PTR) - msgRead, msgCount);
    }

    /** The next answer, within the bound (the model answers on the doorbell's thread, so at once). */
    Answer next() {
        long deadline = System.nanoTime() + BOUND_NANOS;
        while (msgS.get(INT, TX_WRITE_PTR) == msgRead) {
            assertTrue(System.nanoTime() < deadline, "an answer within 10 s");
            Thread.onSpinWait();
        }
        int wp = msgS.get(INT, TX_WRITE_PTR);
        assertTrue(wp >= 0 && wp < msgCount, "the model's writePtr " + wp + " is inside its queue of " + msgCount);
        MemorySegment e = msgS.asSlice(0x1000 + (long) msgRead * msgSize, msgSize);
        assertEquals(0, checksum(e, 0, msgSize), "the answer's checksum folds to zero");
        assertEquals(1, e.get(INT, ELEM_COUNT));
        assertEquals(RPC_HEADER_VERSION_3, e.get(INT, ELEM_HDR_SIZE + RPC_HEADER_VERSION));
        assertEquals(RPC_SIGNATURE_VRPC, e.get(INT, ELEM_HDR_SIZE + RPC_SIGNATURE));
        int len = e.get(INT, ELEM_HDR_SIZE + RPC_LENGTH);
        assertTrue(len >= RPC_HDR_SIZE && len <= msgSize - ELEM_HDR_SIZE, "answer length " + len);
        MemorySegment params = MemorySegment.ofArray(new byte[len - RPC_HDR_SIZE]);
        MemorySegment.copy(e, PARAMS, params, 0, params.byteSize());
        Answer a = new Answer(e.get(INT, ELEM_HDR_SIZE + RPC_FUNCTION), e.get(INT, ELEM_HDR_SIZE + RPC_RESULT),
                e.get(INT, ELEM_HDR_SIZE + RPC_RESULT_PRIVATE), e.get(INT, ELEM_HDR_SIZE + RPC_SEQUENCE), params);
        msgRead = (msgRead + 1) % msgCount;
        cmdS.set(INT, TX_HDR_SIZE + RX_READ_PTR, msgRead); // the driver's readPtr (rxHdrOff is right after the TX header)
        return a;
    }

    /** Sends the elements with one doorbell and returns their answers. */
    List<Answer> send(List<MemorySegment> elems) {
        for (MemorySegment e : elems) {
            put(e);
        }
        ring();
        List<Answer> out = new ArrayList<>();
        for (int i = 0; i < elems.size(); i++) {
            out.add(next());
        }
        assertEquals(0, waiting(), "one answer per command, no more");
        return out;
    }

    Answer nop() {
        Answer a = send(List.of(element(GpuRpc.NOP, new byte[0], RPC_HDR_SIZE))).get(0);
        assertEquals(GpuRpc.RESULT_OK, a.result(), "NOP");
        return a;
    }

    /**
     * Switches the queues off, unmaps and frees the memory, pulls the card; returns the audit
     * (faults are expected; violations and leftovers are not).
     */
    @Override
    public void close() {
        try {
            write(CTRL, CTRL_RESET);
            dma.dmaUnmap(cmdIova, 2);
            dma.dmaUnmap(msgIova, 2);
            dma.dmaUnmap(hostIova, 16);
        } finally {
            mm.freePages(cmdPfn, 1);
            mm.freePages(msgPfn, 1);
            mm.freePages(hostPfn, 4);
            fn.remove();
            board.close();
            bus.close();
        }
    }

    /** After {@link #close}: no bus warning (the model never threw), no violation, nothing mapped, every frame free. */
    void assertClean() {
        assertEquals(List.of(), bus.warnings(), "the bus warned (a handler threw?)");
        IommuAudit a = iommu.audit();
        assertTrue(a.violationFree() && a.liveMappings() == 0, a.toString());
        assertEquals(mm.totalFrames(), mm.freeFrames(), "every frame free");
        mm.close();
    }
}

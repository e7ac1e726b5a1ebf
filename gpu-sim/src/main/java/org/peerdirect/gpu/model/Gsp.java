package org.peerdirect.gpu.model;

import static org.peerdirect.gpu.ifc.GpuRegs.*;
import static org.peerdirect.gpu.ifc.GspMsgq.*;
import static org.peerdirect.gpu.ifc.GpuRpc.*;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.locks.ReentrantLock;

import org.peerdirect.kernel.dma.DmaPort;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * The GPU's firmware side of its queues: BAR0's own register block ({@link org.peerdirect.gpu.ifc.GpuRegs}),
 * the command and message queues in the driver's memory ({@link org.peerdirect.gpu.ifc.GspMsgq}),
 * the functions ({@link org.peerdirect.gpu.ifc.GpuRpc}) executed on {@link VideoMemory}. It sees
 * only MMIO on its function, DMA through its IOMMU domain, and raises MSI-X.
 *
 * <p>The doorbell is served on the thread that wrote it (the bus calls the write handler
 * synchronously): every command between the model's read pointer and the driver's
 * {@code writePtr} is executed and answered, as far as the message queue has room; then MSI-X
 * vector {@link org.peerdirect.gpu.ifc.GpuRegs#MSIX_MSGQ} is raised. Nothing here waits, so no
 * input can hang the device: a bad register write, queue address, pointer or element is answered
 * with an error register ({@code ERR_*}) or an RPC result, and the queues stay usable (a queue whose
 * memory faults is switched off; the driver switches it on again).
 *
 * <p>Lock: {@link #lock} serialises register writes and doorbells (and so every change of the
 * video-memory allocation and the BAR1 page table); it is never held while waiting for anything.
 */
final class Gsp {

    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED;

    private final PciFunction fn;
    private final VideoMemory mem;
    private final MemorySegment regs;
    private final DmaPort dma;
    private final ReentrantLock lock = new ReentrantLock();
    // ---- guarded by lock
    private final MemorySegment scratch;
    private final MemorySegment cmd;
    private final MemorySegment reply;
    private boolean running;
    private long cmdqBase;
    private long msgqBase;
    /** Geometry of each queue as accepted at enable: {msgSize, msgCount, rxHdrOff, entryOff}. */
    private final int[] cmdq = new int[4];
    private final int[] msgq = new int[4];
    /** The next command the model consumes. */
    private int cmdRead;
    /** The next message slot the model fills. */
    private int msgWrite;
    private int elemSequence;
    private int errCount;
    private int lastErr;
    private int lastInfo;
    private int undefWrites;
    /** The board was closed: the scratch buffers are going, MMIO is ignored. */
    private boolean closed;

    Gsp(PciFunction fn, VideoMemory mem, Arena arena) {
        this.fn = fn;
        this.mem = mem;
        this.regs = fn.barMemory(BAR0);
        this.dma = fn.dmaPort();
        this.scratch = arena.allocate(TX_HDR_SIZE, 8);
        this.cmd = arena.allocate(MAX_MSG_SIZE, 8);
        this.reply = arena.allocate(MAX_MSG_SIZE, 8);
        regs.set(INT, NV_PMC_BOOT_0, NV_PMC_BOOT_0_GA100);
        regs.set(INT, IF_REV, IF_REV_1);
    }

    /** BAR0's write handler: a 64-bit write is the two 32-bit registers it covers. */
    void written(int bar, long offset, int width, long value) {
        if (bar != BAR0) {
            return;
        }
        lock.lock();
        try {
            if (closed) {
                return;
            }
            write32(offset, (int) value);
            if (width == 8) {
                write32(offset + 4, (int) (value >>> 32));
            }
        } finally {
            lock.unlock();
        }
    }

    private void write32(long off, int v) {
        assert lock.isHeldByCurrentThread();
        if (off == CTRL) {
            control(v);
        } else if (off == CMDQ_BASE_LO || off == CMDQ_BASE_HI || off == MSGQ_BASE_LO || off == MSGQ_BASE_HI) {
            if (running) { // the queues' places are fixed while they run: put the register back
                regs.set(INT, off, (int) ((off < MSGQ_BASE_LO ? cmdqBase : msgqBase) >>> ((off & 4) == 0 ? 0 : 32)));
                error(ERR_BASE_WHILE_RUNNING, (int) off);
            }
        } else if (off == CMDQ_HEAD) {
            regs.set(INT, CMDQ_HEAD, 0);
            doorbell();
        } else {
            undefined(off);
        }
    }

    /** A write to a read-only or undefined register: it keeps its value, the write is counted. */
    private void undefined(long off) {
        regs.set(INT, UNDEF_WRITES, ++undefWrites);
        regs.set(INT, UNDEF_LAST, (int) off);
        if (off != UNDEF_WRITES && off != UNDEF_LAST) {
            regs.set(INT, off, readOnlyValue(off));
        }
    }

    /** What a read-only register holds; 0 for an undefined one. */
    private int readOnlyValue(long off) {
        return off == NV_PMC_BOOT_0 ? NV_PMC_BOOT_0_GA100
                : off == IF_REV ? IF_REV_1
                : off == STATUS ? (running ? STATUS_RUNNING : 0)
                : off == ERR_CODE ? lastErr
                : off == ERR_INFO ? lastInfo
                : off == ERR_COUNT ? errCount : 0;
    }

    private void error(int code, int info) {
        lastErr = code;
        lastInfo = info;
        regs.set(INT, ERR_CODE, code);
        regs.set(INT, ERR_INFO, info);
        regs.set(INT, ERR_COUNT, ++errCount);
    }

    private void setRunning(boolean on) {
        running = on;
        regs.set(INT, STATUS, on ? STATUS_RUNNING : 0);
        regs.set(INT, CTRL, on ? CTRL_ENABLE : 0);
    }

    /** CTRL: RESET (off, pointers and the last error forgotten), ENABLE (on, headers checked), 0 (off). */
    private void control(int v) {
        if ((v & CTRL_RESET) != 0) {
            setRunning(false);
            lastErr = ERR_NONE;
            lastInfo = 0;
            regs.set(INT, ERR_CODE, 0);
            regs.set(INT, ERR_INFO, 0);
        } else if ((v & CTRL_ENABLE) == 0) {
            setRunning(false);
        } else if (!running) {
            enable();
        } else {
            regs.set(INT, CTRL, CTRL_ENABLE);
        }
    }

    private void enable() {
        cmdqBase = base(CMDQ_BASE_LO);
        msgqBase = base(MSGQ_BASE_LO);
        setRunning(false);
        if (!header(cmdqBase, cmdq, 0) || !header(msgqBase, msgq, 0x1000)) {
            return;
        }
        cmdRead = 0;
        msgWrite = 0;
        try {
            dma.atomicWrite(msgqBase + TX_WRITE_PTR, 0);
            dma.write(msgqBase + msgq[2], zeroInt(), 0, 4);
        } catch (RuntimeException fault) {
            error(ERR_BAD_QUEUE_ADDRESS, 1);
            return;
        }
        setRunning(true);
    }

    private MemorySegment zeroInt() {
        scratch.set(INT, 0, 0);
        return scratch;
    }

    private long base(long lo) {
        return (regs.get(INT, lo + 4) & 0xffff_ffffL) << 32 | regs.get(INT, lo) & 0xffff_ffffL;
    }

    /** Reads and checks a queue header into {msgSize, msgCount, rxHdrOff, entryOff}; false (error recorded) if it is bad. */
    private boolean header(long base, int[] geo, int which) {
        if ((base & 0xfff) != 0) {
            error(ERR_BAD_QUEUE_ADDRESS, (int) base & 0xfff | which);
            return false;
        }
        try {
            dma.read(base, scratch, 0, TX_HDR_SIZE);
        } catch (RuntimeException fault) {
            error(ERR_BAD_QUEUE_ADDRESS, which);
            return false;
        }
        int size = scratch.get(INT, TX_SIZE);
        int msgSize = scratch.get(INT, TX_MSG_SIZE);
        int msgCount = scratch.get(INT, TX_MSG_COUNT);
        int rxHdrOff = scratch.get(INT, TX_RX_HDR_OFF);
        int entryOff = scratch.get(INT, TX_ENTRY_OFF);
        long bad = scratch.get(INT, TX_VERSION) != VERSION ? TX_VERSION
                : msgSize < MIN_MSG_SIZE || msgSize > MAX_MSG_SIZE || Integer.bitCount(msgSize) != 1 ? TX_MSG_SIZE
                : msgCount < MIN_MSG_COUNT || msgCount > MAX_MSG_COUNT ? TX_MSG_COUNT
                : entryOff <= 0 || (entryOff & 0xfff) != 0 || entryOff > (1 << 20) ? TX_ENTRY_OFF
                : rxHdrOff < TX_HDR_SIZE || (rxHdrOff & 3) != 0 || rxHdrOff > entryOff - 4 ? TX_RX_HDR_OFF
                : size != entryOff + (long) msgSize * msgCount ? TX_SIZE : -1;
        if (bad >= 0) {
            error(ERR_BAD_QUEUE_HEADER, (int) bad | which);
            return false;
        }
        geo[0] = msgSize;
        geo[1] = msgCount;
        geo[2] = rxHdrOff;
        geo[3] = entryOff;
        return true;
    }

    private int readInt(long iova) {
        dma.read(iova, scratch, 0, 4);
        return scratch.get(INT, 0);
    }

    /**
     * The command doorbell: consumes what the driver queued, answering each command in the
     * message queue, as far as it has room; a queue memory fault switches the queues off.
     */
    private void doorbell() {
        if (!running) {
            error(ERR_DOORBELL_NOT_RUNNING, 0);
            return;
        }
        int answered = 0;
        try {
            int wp = readInt(cmdqBase + TX_WRITE_PTR);
            if (wp < 0 || wp >= cmdq[1]) {
                error(ERR_WRITE_PTR_PAST_QUEUE, wp);
                return;
            }
            while (cmdRead != wp) {
                int rp = readInt(cmdqBase + cmdq[2]);
                if (rp < 0 || rp >= msgq[1]) {
                    error(ERR_READ_PTR_PAST_QUEUE, rp);
                    break;
                }
                if ((msgWrite + 1) % msgq[1] == rp) {
                    error(ERR_MSGQ_FULL, Math.floorMod(wp - cmdRead, cmdq[1]));
                    break;
                }
                dma.read(cmdqBase + cmdq[3] + (long) cmdRead * cmdq[0], cmd, 0, cmdq[0]);
                execute();
                dma.write(msgqBase + msgq[3] + (long) msgWrite * msgq[0], reply, 0, msgq[0]);
                msgWrite = (msgWrite + 1) % msgq[1];
                cmdRead = (cmdRead + 1) % cmdq[1];
                dma.atomicWrite(msgqBase + TX_WRITE_PTR, msgWrite); // flags 0: the message is whole before this
                scratch.set(INT, 0, cmdRead);
                dma.write(msgqBase + msgq[2], scratch, 0, 4);
                answered++;
            }
        } catch (RuntimeException fault) {
            error(ERR_QUEUE_DMA_FAULT, cmdRead);
            setRunning(false);
        }
        if (answered > 0) {
            fn.raiseMsix(MSIX_MSGQ);
        }
    }

    /** Executes the command element in {@link #cmd} and builds its answer in {@link #reply}. */
    private void execute() {
        int cmdSize = cmdq[0];
        reply.asSlice(0, msgq[0]).fill((byte) 0);
        long rpc = ELEM_HDR_SIZE;
        int function = cmd.get(INT, rpc + RPC_FUNCTION);
        int length = cmd.get(INT, rpc + RPC_LENGTH);
        long r;
        int replyLen = 0;
        if (cmd.get(INT, ELEM_COUNT) != 1) {
            r = VideoMemory.result(RESULT_BAD_HEADER, ELEM_COUNT);
        } else if (checksum(cmd, 0, cmdSize) != 0) {
            r = RESULT_BAD_CHECKSUM;
        } else if (cmd.get(INT, rpc + RPC_HEADER_VERSION) != RPC_HEADER_VERSION_3) {
            r = VideoMemory.result(RESULT_BAD_HEADER, rpc + RPC_HEADER_VERSION);
        } else if (cmd.get(INT, rpc + RPC_SIGNATURE) != RPC_SIGNATURE_VRPC) {
            r = VideoMemory.result(RESULT_BAD_HEADER, rpc + RPC_SIGNATURE);
        } else if (length < RPC_HDR_SIZE || length > cmdSize - ELEM_HDR_SIZE) {
            r = VideoMemory.result(RESULT_BAD_HEADER, rpc + RPC_LENGTH);
        } else {
            int params = length - RPC_HDR_SIZE;
            r = switch (function) {
                case NOP -> RESULT_OK;
                case GET_INFO -> {
                    reply.set(INT, PARAMS + INFO_VRAM_PAGES, mem.pages());
                    reply.set(INT, PARAMS + INFO_BAR1_SLOTS, mem.slots());
                    reply.set(INT, PARAMS + INFO_PAGE_SHIFT, PAGE_SHIFT);
                    replyLen = INFO_LEN;
                    yield RESULT_OK;
                }
                case GET_STATS -> {
                    reply.set(INT, PARAMS + STATS_BAR1_MAPPED, mem.bar1Mapped());
                    reply.set(INT, PARAMS + STATS_ALLOCATED_PAGES, mem.allocatedPages());
                    reply.set(ValueLayout.JAVA_LONG_UNALIGNED, PARAMS + STATS_COMMITTED_BYTES, mem.committedBytes());
                    reply.set(ValueLayout.JAVA_LONG_UNALIGNED, PARAMS + STATS_COPIED_BYTES, mem.copiedBytes());
                    replyLen = STATS_LEN;
                    yield RESULT_OK;
                }
                case VRAM_ALLOC, VRAM_FREE, BAR1_UNMAP -> params < P_LEN ? shortParams() : pages(function, arg(P_PAGE), arg(P_COUNT));
                case BAR1_MAP -> params < MAP_LEN ? shortParams() : mem.map(arg(MAP_SLOT), arg(MAP_PAGE), arg(MAP_COUNT));
                case CE_COPY_H2D, CE_COPY_D2H -> params < CE_LEN ? shortParams()
                        : mem.copyHost(dma, arg(CE_PAGE), arg(CE_OFFSET), arg(CE_LENGTH),
                                cmd.get(ValueLayout.JAVA_LONG_UNALIGNED, PARAMS + CE_HOST_ADDR), function == CE_COPY_H2D);
                case CE_COPY_D2D -> params < D2D_LEN ? shortParams()
                        : mem.copyDevice(arg(D2D_SRC_PAGE), arg(D2D_SRC_OFFSET), arg(D2D_DST_PAGE), arg(D2D_DST_OFFSET), arg(D2D_LENGTH));
                default -> VideoMemory.result(RESULT_BAD_FUNCTION, function);
            };
        }
        reply.set(INT, ELEM_SEQUENCE, elemSequence++);
        reply.set(INT, ELEM_COUNT, 1);
        reply.set(INT, rpc + RPC_HEADER_VERSION, RPC_HEADER_VERSION_3);
        reply.set(INT, rpc + RPC_SIGNATURE, RPC_SIGNATURE_VRPC);
        reply.set(INT, rpc + RPC_LENGTH, RPC_HDR_SIZE + replyLen);
        reply.set(INT, rpc + RPC_FUNCTION, function);
        reply.set(INT, rpc + RPC_RESULT, (int) r);
        reply.set(INT, rpc + RPC_RESULT_PRIVATE, (int) (r >>> 32));
        reply.set(INT, rpc + RPC_SEQUENCE, cmd.get(INT, rpc + RPC_SEQUENCE));
        reply.set(INT, ELEM_CHECKSUM, checksum(reply, 0, msgq[0]));
    }

    private int arg(long off) {
        return cmd.get(INT, PARAMS + off);
    }

    private static long shortParams() {
        return VideoMemory.result(RESULT_BAD_HEADER, ELEM_HDR_SIZE + RPC_LENGTH);
    }

    private long pages(int function, int first, int count) {
        return switch (function) {
            case VRAM_ALLOC -> mem.alloc(first, count);
            case VRAM_FREE -> mem.free(first, count);
            default -> mem.unmap(first, count);
        };
    }

    /** The board goes: waits for a doorbell being served; from now on MMIO is ignored. */
    void close() {
        lock.lock();
        try {
            closed = true;
            running = false;
        } finally {
            lock.unlock();
        }
    }
}

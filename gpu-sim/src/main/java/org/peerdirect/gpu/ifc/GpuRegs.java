package org.peerdirect.gpu.ifc;

/**
 * BAR0 of the GPU model, 32-bit little-endian registers ({@code readl}/{@code writel}).
 *
 * <p>{@link #NV_PMC_BOOT_0} is NVIDIA's (architecture, implementation, revision). Everything from
 * {@link #BLOCK} on is <b>the model's own</b> register block, not NVIDIA's: it tells the model where
 * the driver put the command queue and the message queue ({@link GspMsgq}), switches them on and
 * off, takes the command doorbell, and reports what went wrong. A write to any other offset of BAR0,
 * or to a read-only register, changes nothing: the model puts the register back, counts the write in
 * {@link #UNDEF_WRITES} and keeps its offset in {@link #UNDEF_LAST}.
 *
 * <p>Bring-up: the driver writes the two queue bases (bus addresses in the GPU's IOMMU domain,
 * 4 KiB aligned) while the queues are off, sets {@link #CTRL_ENABLE}, and reads {@link #STATUS}: on
 * {@link #STATUS_RUNNING} the model read and accepted both queue headers, otherwise
 * {@link #ERR_CODE} says why. Then it writes commands into the command queue, advances the queue's
 * {@code writePtr} and writes {@link #CMDQ_HEAD} (any value: the model reads {@code writePtr}
 * from memory). The model answers every command it consumes with one message in the message
 * queue and raises MSI-X vector {@link #MSIX_MSGQ}.
 *
 * <p>BAR2 ({@link #CPU_WINDOW_BAR}) is also the model's own: all of video memory, offset for
 * offset, as a CPU on a coherent link would see it (a PCIe x86 CPU cannot reach
 * {@code cudaMalloc} memory; its driver maps the window without access rights only so that the
 * range is a device mapping in the process).
 */
public final class GpuRegs {

    private GpuRegs() {
    }

    /** The register BAR. */
    public static final int BAR0 = 0;
    /** The BAR1 aperture: 64 KiB slots the GPU maps onto video-memory pages. */
    public static final int BAR1 = 1;
    /** The model's own: a window onto all of video memory (see the class comment). */
    public static final int CPU_WINDOW_BAR = 2;

    /** {@code NV_PMC_BOOT_0} (NVIDIA's): architecture, implementation and revision; read-only. */
    public static final long NV_PMC_BOOT_0 = 0x0;
    /** GA100 revision a1. */
    public static final int NV_PMC_BOOT_0_GA100 = 0x170000a1;

    /** Start of the model's own block. */
    public static final long BLOCK = 0xff_0000;
    /** Read-only: the interface revision, {@link #IF_REV_1}. */
    public static final long IF_REV = BLOCK;
    /** bit 0 {@link #CTRL_ENABLE}, bit 1 {@link #CTRL_RESET}; reads back the enable bit. */
    public static final long CTRL = BLOCK + 0x04;
    /** Read-only: bit 0 {@link #STATUS_RUNNING}. */
    public static final long STATUS = BLOCK + 0x08;
    /** The command queue's backing store, bus address bits 31:0 (4 KiB aligned); writable while off. */
    public static final long CMDQ_BASE_LO = BLOCK + 0x10;
    public static final long CMDQ_BASE_HI = BLOCK + 0x14;
    /** The message queue's backing store, bus address bits 31:0 (4 KiB aligned); writable while off. */
    public static final long MSGQ_BASE_LO = BLOCK + 0x18;
    public static final long MSGQ_BASE_HI = BLOCK + 0x1c;
    /** Write: the command doorbell. Reads back 0. */
    public static final long CMDQ_HEAD = BLOCK + 0x20;
    /** Read-only: the last error ({@code ERR_*}), 0 after a reset. */
    public static final long ERR_CODE = BLOCK + 0x30;
    /** Read-only: what the last error was about (an offset, a pointer, a count). */
    public static final long ERR_INFO = BLOCK + 0x34;
    /** Read-only: errors since power-on (a driver compares it around a doorbell). */
    public static final long ERR_COUNT = BLOCK + 0x38;
    /** Read-only: writes to undefined or read-only registers since power-on. */
    public static final long UNDEF_WRITES = BLOCK + 0x3c;
    /** Read-only: the offset of the last such write. */
    public static final long UNDEF_LAST = BLOCK + 0x40;
    /** End of the block (exclusive). */
    public static final long BLOCK_END = BLOCK + 0x44;

    public static final int IF_REV_1 = 1;
    /** {@link #CTRL}: switch the queues on (the model reads and checks both headers). */
    public static final int CTRL_ENABLE = 1;
    /** {@link #CTRL}: switch the queues off and forget their pointers (the bases stay). */
    public static final int CTRL_RESET = 1 << 1;
    /** {@link #STATUS}: the queues are on. */
    public static final int STATUS_RUNNING = 1;
    /** MSI-X vector raised after the model wrote messages. */
    public static final int MSIX_MSGQ = 0;
    /** MSI-X vectors of the function. */
    public static final int MSIX_VECTORS = 1;

    // ---- ERR_CODE values
    public static final int ERR_NONE = 0;
    /** A base register written while the queues are on (ERR_INFO: the register offset). */
    public static final int ERR_BASE_WHILE_RUNNING = 1;
    /** A queue base not 4 KiB aligned, or its header not readable by DMA (ERR_INFO: low address bits). */
    public static final int ERR_BAD_QUEUE_ADDRESS = 2;
    /** A queue header with an impossible field (ERR_INFO: the header field's offset, +0x1000 for the message queue). */
    public static final int ERR_BAD_QUEUE_HEADER = 3;
    /** A doorbell while the queues are off. */
    public static final int ERR_DOORBELL_NOT_RUNNING = 4;
    /** The command queue's writePtr is past the queue (ERR_INFO: the pointer). */
    public static final int ERR_WRITE_PTR_PAST_QUEUE = 5;
    /** The driver's message-queue readPtr is past the queue (ERR_INFO: the pointer). */
    public static final int ERR_READ_PTR_PAST_QUEUE = 6;
    /** The message queue is full: commands wait for the driver to read messages (ERR_INFO: commands left). */
    public static final int ERR_MSGQ_FULL = 7;
    /** A queue's memory stopped being reachable by DMA (ERR_INFO: the element index); the queues are switched off. */
    public static final int ERR_QUEUE_DMA_FAULT = 8;

    /** The name of an {@code ERR_*} value, for messages. */
    public static String errName(int code) {
        return switch (code) {
            case ERR_NONE -> "none";
            case ERR_BASE_WHILE_RUNNING -> "queue base written while running";
            case ERR_BAD_QUEUE_ADDRESS -> "bad queue address";
            case ERR_BAD_QUEUE_HEADER -> "bad queue header";
            case ERR_DOORBELL_NOT_RUNNING -> "doorbell while the queues are off";
            case ERR_WRITE_PTR_PAST_QUEUE -> "command writePtr past the queue";
            case ERR_READ_PTR_PAST_QUEUE -> "message readPtr past the queue";
            case ERR_MSGQ_FULL -> "message queue full";
            case ERR_QUEUE_DMA_FAULT -> "queue memory unreachable by DMA";
            default -> "error " + code;
        };
    }
}

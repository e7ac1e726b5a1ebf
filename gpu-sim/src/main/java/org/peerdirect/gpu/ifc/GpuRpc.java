package org.peerdirect.gpu.ifc;

/**
 * The model's own RPC functions, their parameters and results (not NVIDIA's numbers), carried in
 * the RPC header of a {@link GspMsgq} element. Parameters start at {@link GspMsgq#PARAMS};
 * 32-bit fields unless marked 64; a command's RPC {@code length} must cover the header and the
 * parameters its function names ({@code *_LEN}). Every command is executed whole or not at all.
 *
 * <p>Video memory is 64 KiB pages; a page must be allocated ({@link #VRAM_ALLOC}) before it is
 * mapped or copied, and may be freed only when no BAR1 slot maps it. Host memory is reached by
 * DMA through the GPU's IOMMU domain at the bus addresses the driver passes.
 */
public final class GpuRpc {

    private GpuRpc() {
    }

    /** Answers OK; no parameters. */
    public static final int NOP = 0x000;
    /** Reply: {@link #INFO_VRAM_PAGES}, {@link #INFO_BAR1_SLOTS}, {@link #INFO_PAGE_SHIFT}. */
    public static final int GET_INFO = 0x001;
    /** Reply: {@link #STATS_BAR1_MAPPED}, {@link #STATS_ALLOCATED_PAGES}, {@link #STATS_COMMITTED_BYTES}, {@link #STATS_COPIED_BYTES}. */
    public static final int GET_STATS = 0x002;
    /** Pages [{@link #P_PAGE}, +{@link #P_COUNT}) become allocated; none may be. */
    public static final int VRAM_ALLOC = 0x010;
    /** Pages [{@link #P_PAGE}, +{@link #P_COUNT}) become free; each must be allocated and unmapped. */
    public static final int VRAM_FREE = 0x011;
    /** BAR1 slots [{@link #MAP_SLOT}, +{@link #MAP_COUNT}) map pages [{@link #MAP_PAGE}, +count); the slots must be free. */
    public static final int BAR1_MAP = 0x020;
    /** BAR1 slots [{@link #P_PAGE} (the first slot), +{@link #P_COUNT}) map nothing from now on; each must map a page. */
    public static final int BAR1_UNMAP = 0x021;
    /** Copy engine: {@link #CE_LENGTH} bytes from host bus address {@link #CE_HOST_ADDR} into page {@link #CE_PAGE} at {@link #CE_OFFSET}. */
    public static final int CE_COPY_H2D = 0x030;
    /** Copy engine: page {@link #CE_PAGE} at {@link #CE_OFFSET} to host bus address {@link #CE_HOST_ADDR}. */
    public static final int CE_COPY_D2H = 0x031;
    /** Copy engine, device to device: within one page on each side. */
    public static final int CE_COPY_D2D = 0x032;

    // ---- parameters (offsets from GspMsgq.PARAMS)
    /** VRAM_ALLOC, VRAM_FREE, BAR1_UNMAP: the first page (slot). */
    public static final long P_PAGE = 0x00;
    public static final long P_COUNT = 0x04;
    public static final int P_LEN = 8;
    public static final long MAP_SLOT = 0x00;
    public static final long MAP_PAGE = 0x04;
    public static final long MAP_COUNT = 0x08;
    public static final int MAP_LEN = 12;
    public static final long CE_PAGE = 0x00;
    public static final long CE_OFFSET = 0x04;
    public static final long CE_LENGTH = 0x08;
    /** 64-bit, 8-byte aligned. */
    public static final long CE_HOST_ADDR = 0x10;
    public static final int CE_LEN = 0x18;
    public static final long D2D_SRC_PAGE = 0x00;
    public static final long D2D_SRC_OFFSET = 0x04;
    public static final long D2D_DST_PAGE = 0x08;
    public static final long D2D_DST_OFFSET = 0x0c;
    public static final long D2D_LENGTH = 0x10;
    public static final int D2D_LEN = 0x14;
    // ---- reply parameters
    public static final long INFO_VRAM_PAGES = 0x00;
    public static final long INFO_BAR1_SLOTS = 0x04;
    /** log2 of the page size: 16. */
    public static final long INFO_PAGE_SHIFT = 0x08;
    public static final int INFO_LEN = 12;
    public static final long STATS_BAR1_MAPPED = 0x00;
    public static final long STATS_ALLOCATED_PAGES = 0x04;
    /** 64-bit: video memory touched so far, in 2 MiB chunks (what the host had to commit). */
    public static final long STATS_COMMITTED_BYTES = 0x08;
    /** 64-bit: bytes the copy engine moved. */
    public static final long STATS_COPIED_BYTES = 0x10;
    public static final int STATS_LEN = 0x18;

    /** The GPU page: 64 KiB ({@code GPU_PAGE_SHIFT} 16 in nvidia-peermem). */
    public static final int PAGE_SHIFT = 16;
    public static final long PAGE_SIZE = 1L << PAGE_SHIFT;

    // ---- rpc_result values
    public static final int RESULT_OK = 0;
    /** A function the model does not have. */
    public static final int RESULT_BAD_FUNCTION = 1;
    /** The element or RPC header is malformed: version, signature, length, element count (private: the field's offset). */
    public static final int RESULT_BAD_HEADER = 2;
    /** The element's checksum does not fold to zero. */
    public static final int RESULT_BAD_CHECKSUM = 3;
    /** A page, slot, offset or length outside the GPU or the page (private: the value). */
    public static final int RESULT_BAD_ARGUMENT = 4;
    /** A page not allocated, allocated already or still mapped; a slot busy or free (private: the page or slot). */
    public static final int RESULT_BAD_STATE = 5;
    /** The host side of a copy faulted in the GPU's IOMMU domain; nothing was copied. */
    public static final int RESULT_HOST_DMA_FAULT = 6;
    /** The video memory is gone (the card is being removed). */
    public static final int RESULT_GPU_GONE = 7;

    /** The name of a {@code RESULT_*} value, for messages. */
    public static String resultName(int result) {
        return switch (result) {
            case RESULT_OK -> "OK";
            case RESULT_BAD_FUNCTION -> "BAD_FUNCTION";
            case RESULT_BAD_HEADER -> "BAD_HEADER";
            case RESULT_BAD_CHECKSUM -> "BAD_CHECKSUM";
            case RESULT_BAD_ARGUMENT -> "BAD_ARGUMENT";
            case RESULT_BAD_STATE -> "BAD_STATE";
            case RESULT_HOST_DMA_FAULT -> "HOST_DMA_FAULT";
            case RESULT_GPU_GONE -> "GPU_GONE";
            default -> "result " + result;
        };
    }

    /** The name of a function, for messages. */
    public static String functionName(int function) {
        return switch (function) {
            case NOP -> "NOP";
            case GET_INFO -> "GET_INFO";
            case GET_STATS -> "GET_STATS";
            case VRAM_ALLOC -> "VRAM_ALLOC";
            case VRAM_FREE -> "VRAM_FREE";
            case BAR1_MAP -> "BAR1_MAP";
            case BAR1_UNMAP -> "BAR1_UNMAP";
            case CE_COPY_H2D -> "CE_COPY_H2D";
            case CE_COPY_D2H -> "CE_COPY_D2H";
            case CE_COPY_D2D -> "CE_COPY_D2D";
            default -> String.format("function 0x%x", function);
        };
    }
}

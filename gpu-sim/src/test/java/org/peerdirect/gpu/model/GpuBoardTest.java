package org.peerdirect.gpu.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.peerdirect.gpu.ifc.GpuRegs.*;
import static org.peerdirect.gpu.ifc.GpuRpc.*;
import static org.peerdirect.gpu.ifc.GspMsgq.RPC_HDR_SIZE;
import static org.peerdirect.gpu.model.GpuQueueHarness.INT;
import static org.peerdirect.gpu.model.GpuQueueHarness.LONG;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.gpu.model.GpuQueueHarness.Answer;

/**
 * The GPU model's interface on one example, as a driver uses it: the identity in BAR0, the
 * queues set up, GET_INFO, pages allocated, host bytes copied in by DMA and out again, a page
 * shown in BAR1 and taken back (the aperture then maps nothing), the CPU window (BAR2), a page
 * that is mapped cannot be freed, the counters.
 */
class GpuBoardTest {

    @TempDir
    Path tmp;

    private static byte[] params(int... words) {
        MemorySegment p = MemorySegment.ofArray(new byte[words.length * 4]);
        for (int i = 0; i < words.length; i++) {
            p.set(INT, 4L * i, words[i]);
        }
        return p.toArray(ValueLayout.JAVA_BYTE);
    }

    private static Answer call(GpuQueueHarness h, int function, byte[] params) {
        return h.send(List.of(h.element(function, params, RPC_HDR_SIZE + params.length))).get(0);
    }

    private static byte[] copy(int page, int off, int len, long host) {
        MemorySegment p = MemorySegment.ofArray(new byte[CE_LEN]);
        p.set(INT, CE_PAGE, page);
        p.set(INT, CE_OFFSET, off);
        p.set(INT, CE_LENGTH, len);
        p.set(LONG, CE_HOST_ADDR, host);
        return p.toArray(ValueLayout.JAVA_BYTE);
    }

    @Test
    void aDriversDayThroughRegistersQueuesAndDma() {
        GpuQueueHarness h = new GpuQueueHarness(tmp);
        try {
            assertEquals(NV_PMC_BOOT_0_GA100, h.reg(NV_PMC_BOOT_0));
            assertEquals(IF_REV_1, h.reg(IF_REV));
            assertEquals(0, h.reg(STATUS), "the queues are off at power-on");
            h.start(256, 16, 256, 16);
            Answer info = call(h, GET_INFO, new byte[0]);
            assertEquals(RESULT_OK, info.result());
            assertEquals(GpuQueueHarness.PAGES, info.params().get(INT, INFO_VRAM_PAGES));
            assertEquals(GpuQueueHarness.SLOTS, info.params().get(INT, INFO_BAR1_SLOTS));

            assertEquals(RESULT_BAD_STATE, call(h, CE_COPY_H2D, copy(3, 0, 16, h.hostIova)).result(), "a page must be allocated first");
            assertEquals(RESULT_OK, call(h, VRAM_ALLOC, params(3, 2)).result());
            assertEquals(RESULT_BAD_STATE, call(h, VRAM_ALLOC, params(4, 1)).result(), "page 4 is allocated already");
            byte[] data = new byte[8192];
            new java.util.Random(5).nextBytes(data);
            MemorySegment.copy(data, 0, h.host, ValueLayout.JAVA_BYTE, 0, data.length);
            assertEquals(RESULT_OK, call(h, CE_COPY_H2D, copy(4, 100, data.length, h.hostIova)).result());
            h.host.fill((byte) 0);
            assertEquals(RESULT_OK, call(h, CE_COPY_D2H, copy(4, 100, data.length, h.hostIova + 4096)).result());
            assertArrayEquals(data, h.host.asSlice(4096, data.length).toArray(ValueLayout.JAVA_BYTE), "the bytes came back by DMA");
            assertEquals(RESULT_HOST_DMA_FAULT, call(h, CE_COPY_D2H, copy(4, 0, 64, GpuQueueHarness.UNMAPPED)).result(),
                    "a host address the IOMMU does not map");

            var bar1 = h.fn.barAperture(BAR1);
            assertNull(bar1.page(5L << 16), "slot 5 maps nothing yet");
            assertEquals(RESULT_OK, call(h, BAR1_MAP, params(5, 4, 1)).result());
            assertArrayEquals(data, bar1.page(5L << 16).asSlice(100, data.length).toArray(ValueLayout.JAVA_BYTE), "BAR1 slot 5 shows page 4");
            assertEquals(RESULT_BAD_STATE, call(h, VRAM_FREE, params(3, 2)).result(), "a page BAR1 shows cannot be freed");
            Answer stats = call(h, GET_STATS, new byte[0]);
            assertEquals(1, stats.params().get(INT, STATS_BAR1_MAPPED));
            assertEquals(2, stats.params().get(INT, STATS_ALLOCATED_PAGES));
            assertEquals(2L * data.length, stats.params().get(LONG, STATS_COPIED_BYTES));
            assertEquals(2L << 20, stats.params().get(LONG, STATS_COMMITTED_BYTES), "one 2 MiB chunk touched");
            assertEquals(RESULT_OK, call(h, BAR1_UNMAP, params(5, 1)).result());
            assertNull(bar1.page(5L << 16), "taken back: a peer reaching it now is a stray access");
            assertEquals(RESULT_OK, call(h, VRAM_FREE, params(3, 2)).result());

            MemorySegment window = h.fn.barAperture(CPU_WINDOW_BAR).page(4L << 16);
            assertNotNull(window, "BAR2 shows all of video memory");
            assertArrayEquals(data, window.asSlice(100, data.length).toArray(ValueLayout.JAVA_BYTE));
            assertEquals(RESULT_BAD_FUNCTION, call(h, 0x7777, new byte[0]).result());
            assertEquals(0, h.reg(ERR_COUNT), "nothing went wrong with the queues");
        } finally {
            h.close();
        }
        h.assertClean();
    }
}

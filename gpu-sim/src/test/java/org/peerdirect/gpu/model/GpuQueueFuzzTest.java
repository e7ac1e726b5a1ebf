package org.peerdirect.gpu.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.peerdirect.gpu.ifc.GpuRegs.*;
import static org.peerdirect.gpu.ifc.GpuRpc.*;
import static org.peerdirect.gpu.ifc.GspMsgq.*;
import static org.peerdirect.gpu.model.GpuQueueHarness.HOST_BYTES;
import static org.peerdirect.gpu.model.GpuQueueHarness.INT;
import static org.peerdirect.gpu.model.GpuQueueHarness.PAGES;
import static org.peerdirect.gpu.model.GpuQueueHarness.SLOTS;
import static org.peerdirect.gpu.model.GpuQueueHarness.UNMAPPED;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeMap;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.gpu.model.GpuQueueHarness.Answer;

/**
 * Fuzzes the GPU model's register and queue interface from the driver's side only
 * ({@link GpuQueueHarness}: MMIO on BAR0, queue stores and a host buffer mapped through the GPU's
 * IOMMU domain). Each step is one of: a batch of commands (well-formed with random and edge
 * parameters, unknown functions, bad checksums, versions, signatures, element counts, lengths too
 * short or too long, raw random elements, copies to unmapped host addresses); noise on undefined
 * and read-only registers (32- and 64-bit); doorbells with nothing queued; a command writePtr past
 * the queue; the driver's readPtr past the message queue; queue bases written while running; a
 * message queue too small for the batch; bad queue bases (unaligned, unmapped) and bad header
 * fields; queue memory unmapped under the model; a restart with new queue geometry.
 *
 * <p>Every command is answered (within a bound; the model answers on the doorbell) with a
 * well-formed message whose result equals what an independent model of the rules predicts
 * ({@link Oracle}: the header checks in their order, then the function's checks and its effect);
 * copies move exactly the bytes predicted (video memory, the host buffer, what BAR1 shows); every
 * bad register write, pointer or address is recorded in the error registers as predicted, never
 * a hang, and a NOP goes through after it; at the end the bus logged no exception, the IOMMU audit
 * has no violation (faults are expected) and nothing is left mapped or allocated. The run must
 * reach every result and error code.
 *
 * <p>Short in CI ({@value #DEFAULT_STEPS} steps). The long form:
 * <pre>
 * mvn -o -pl gpu-sim verify -Dtest=GpuQueueFuzzTest -Dgpu.fuzz.steps=1000000
 * </pre>
 * A failure names its seed; {@code -Dgpu.fuzz.seed=<seed>} runs exactly that sequence again.
 */
class GpuQueueFuzzTest {

    static final int DEFAULT_STEPS = 5_000;

    @TempDir
    Path tmp;

    /** The rules of the interface, written again from its documentation, with what video memory and the host buffer hold. */
    static final class Oracle {
        final boolean[] allocated = new boolean[PAGES];
        final int[] slotPage = new int[SLOTS];
        final int[] mapCount = new int[PAGES];
        final byte[][] vram = new byte[PAGES][65536];
        final byte[] host = new byte[HOST_BYTES];
        long hostIova;

        Oracle() {
            java.util.Arrays.fill(slotPage, -1);
        }

        static boolean range(long first, long count, int n) {
            return count >= 1 && first >= 0 && first + count <= n;
        }

        int expect(MemorySegment e, int size) {
            long r = ELEM_HDR_SIZE;
            int len = e.get(INT, r + RPC_LENGTH);
            if (e.get(INT, ELEM_COUNT) != 1) {
                return RESULT_BAD_HEADER;
            }
            if (checksum(e, 0, size) != 0) {
                return RESULT_BAD_CHECKSUM;
            }
            if (e.get(INT, r + RPC_HEADER_VERSION) != RPC_HEADER_VERSION_3 || e.get(INT, r + RPC_SIGNATURE) != RPC_SIGNATURE_VRPC
                    || len < RPC_HDR_SIZE || len > size - ELEM_HDR_SIZE) {
                return RESULT_BAD_HEADER;
            }
            int params = len - RPC_HDR_SIZE;
            int f = e.get(INT, r + RPC_FUNCTION);
            int[] a = new int[6];
            for (int i = 0; i < 6 && PARAMS + 4 * i + 4 <= size; i++) {
                a[i] = e.get(INT, PARAMS + 4 * i);
            }
            return switch (f) {
                case NOP, GET_INFO, GET_STATS -> RESULT_OK;
                case VRAM_ALLOC -> params < P_LEN ? RESULT_BAD_HEADER : alloc(a[0], a[1] & 0xffff_ffffL);
                case VRAM_FREE -> params < P_LEN ? RESULT_BAD_HEADER : free(a[0], a[1] & 0xffff_ffffL);
                case BAR1_UNMAP -> params < P_LEN ? RESULT_BAD_HEADER : unmap(a[0], a[1] & 0xffff_ffffL);
                case BAR1_MAP -> params < MAP_LEN ? RESULT_BAD_HEADER : map(a[0], a[1], a[2] & 0xffff_ffffL);
                case CE_COPY_H2D, CE_COPY_D2H -> params < CE_LEN ? RESULT_BAD_HEADER
                        : copyHost(a[0], a[1], a[2], e.get(GpuQueueHarness.LONG, PARAMS + CE_HOST_ADDR), f == CE_COPY_H2D);
                case CE_COPY_D2D -> params < D2D_LEN ? RESULT_BAD_HEADER : copyDevice(a[0], a[1], a[2], a[3], a[4]);
                default -> RESULT_BAD_FUNCTION;
            };
        }

        int alloc(int first, long count) {
            if (!range(first, count, PAGES)) {
                return RESULT_BAD_ARGUMENT;
            }
            for (int p = first; p < first + count; p++) {
                if (allocated[p]) {
                    return RESULT_BAD_STATE;
                }
            }
            for (int p = first; p < first + count; p++) {
                allocated[p] = true;
            }
            return RESULT_OK;
        }

        int free(int first, long count) {
            if (!range(first, count, PAGES)) {
                return RESULT_BAD_ARGUMENT;
            }
            for (int p = first; p < first + count; p++) {
                if (!allocated[p] || mapCount[p] != 0) {
                    return RESULT_BAD_STATE;
                }
            }
            for (int p = first; p < first + count; p++) {
                allocated[p] = false;
            }
            return RESULT_OK;
        }

        int map(int slot, int page, long count) {
            if (!range(slot, count, SLOTS) || !range(page, count, PAGES)) {
                return RESULT_BAD_ARGUMENT;
            }
            for (int i = 0; i < count; i++) {
                if (slotPage[slot + i] >= 0 || !allocated[page + i]) {
                    return RESULT_BAD_STATE;
                }
            }
            for (int i = 0; i < count; i++) {
                slotPage[slot + i] = page + i;
                mapCount[page + i]++;
            }
            return RESULT_OK;
        }

        int unmap(int slot, long count) {
            if (!range(slot, count, SLOTS)) {
                return RESULT_BAD_ARGUMENT;
            }
            for (int i = 0; i < count; i++) {
                if (slotPage[slot + i] < 0) {
                    return RESULT_BAD_STATE;
                }
            }
            for (int i = 0; i < count; i++) {
                mapCount[slotPage[slot + i]]--;
                slotPage[slot + i] = -1;
            }
            return RESULT_OK;
        }

        int page(int p, int off, int len) {
            if (p < 0 || p >= PAGES || off < 0 || len < 0 || (long) off + len > 65536) {
                return RESULT_BAD_ARGUMENT;
            }
            return allocated[p] ? RESULT_OK : RESULT_BAD_STATE;
        }

        int copyHost(int p, int off, int len, long addr, boolean toDevice) {
            int r = page(p, off, len);
            if (r != RESULT_OK || len == 0) {
                return r;
            }
            long at = addr - hostIova;
            if (at < 0 || at + len > HOST_BYTES) { // the harness only aims outside at UNMAPPED
                return RESULT_HOST_DMA_FAULT;
            }
            if (toDevice) {
                System.arraycopy(host, (int) at, vram[p], off, len);
            } else {
                System.arraycopy(vram[p], off, host, (int) at, len);
            }
            return RESULT_OK;
        }

        int copyDevice(int src, int srcOff, int dst, int dstOff, int len) {
            int r = page(src, srcOff, len);
            if (r == RESULT_OK) {
                r = page(dst, dstOff, len);
            }
            if (r == RESULT_OK) {
                System.arraycopy(vram[src], srcOff, vram[dst], dstOff, len);
            }
            return r;
        }
    }

    private SplittableRandom rnd;
    private GpuQueueHarness h;
    private Oracle o;
    private final Map<String, Integer> reached = new TreeMap<>();

    private void count(String what) {
        reached.merge(what, 1, Integer::sum);
    }

    @Test
    void everyRegisterWriteDoorbellAndCommandIsAnsweredAndTheQueuesStayUsable() {
        int steps = Integer.getInteger("gpu.fuzz.steps", DEFAULT_STEPS);
        String given = System.getProperty("gpu.fuzz.seed", "");
        long seed = given.isBlank() ? new SplittableRandom().nextLong() : Long.parseLong(given.strip());
        rnd = new SplittableRandom(seed);
        h = new GpuQueueHarness(tmp);
        o = new Oracle();
        o.hostIova = h.hostIova;
        int step = 0;
        try {
            restart();
            for (; step < steps; step++) {
                step();
                if (step % 8 == 0) {
                    check(step % 256 == 0);
                }
            }
            check(true);
            cleanUp();
        } catch (AssertionError | RuntimeException e) {
            throw new AssertionError("seed " + seed + " (again: -Dgpu.fuzz.seed=" + seed + "), step " + step + ": " + e.getMessage(), e);
        } finally {
            h.close();
        }
        h.assertClean();
        System.out.println("GpuQueueFuzzTest: " + steps + " steps, seed " + seed + ", reached " + reached);
        if (steps >= 2000) {
            for (int r = RESULT_OK; r <= RESULT_HOST_DMA_FAULT; r++) {
                assertTrue(reached.containsKey("result " + resultName(r)), "the fuzz reached " + resultName(r) + ": " + reached);
            }
            for (int e = ERR_BASE_WHILE_RUNNING; e <= ERR_QUEUE_DMA_FAULT; e++) {
                assertTrue(reached.containsKey("err " + errName(e)), "the fuzz reached " + errName(e) + ": " + reached);
            }
            assertTrue(reached.getOrDefault("undefined writes", 0) > 0, reached.toString());
        }
    }

    private void step() {
        int k = rnd.nextInt(100);
        if (k < 60) {
            commands();
        } else if (k < 70) {
            registerNoise();
        } else if (k < 74) {
            int before = h.reg(ERR_COUNT);
            h.write(CMDQ_HEAD, rnd.nextInt());
            assertEquals(0, h.waiting(), "a doorbell with nothing queued answers nothing");
            assertEquals(before, h.reg(ERR_COUNT));
            count("empty doorbell");
        } else if (k < 78) {
            writePtrPastTheQueue();
        } else if (k < 81) {
            readPtrPastTheQueue();
        } else if (k < 84) {
            baseWhileRunning();
        } else if (k < 88) {
            messageQueueFull();
        } else if (k < 92) {
            badQueueSetup();
        } else if (k < 95) {
            queueMemoryUnmapped();
        } else {
            restart();
        }
    }

    /** A new geometry: element sizes 128..4096, counts so that the elements fit one page. */
    private void restart() {
        int cs = 128 << rnd.nextInt(3);
        int ms = 128 << rnd.nextInt(3);
        h.start(cs, 2 + rnd.nextInt(4096 / cs - 1), ms, 2 + rnd.nextInt(4096 / ms - 1));
        h.nop();
        count("restart");
    }

    private int expectError(int code, int before) {
        assertEquals(before + 1, h.reg(ERR_COUNT), () -> "one error recorded, " + errName(code) + " expected, ERR_CODE " + errName(h.reg(ERR_CODE)));
        assertEquals(code, h.reg(ERR_CODE), () -> errName(code) + " expected, not " + errName(h.reg(ERR_CODE)));
        count("err " + errName(code));
        return h.reg(ERR_INFO);
    }

    // ------------------------------------------------------------------ commands

    private int page() {
        int k = rnd.nextInt(10);
        return k < 8 ? rnd.nextInt(PAGES) : k == 8 ? PAGES - 1 + rnd.nextInt(3) : rnd.nextInt();
    }

    private int slot() {
        int k = rnd.nextInt(10);
        return k < 8 ? rnd.nextInt(SLOTS) : k == 8 ? SLOTS - 1 + rnd.nextInt(3) : rnd.nextInt();
    }

    private int count() {
        int k = rnd.nextInt(10);
        return k < 8 ? 1 + rnd.nextInt(4) : k == 8 ? 0 : rnd.nextInt();
    }

    private int offset() {
        int k = rnd.nextInt(10);
        return k < 7 ? rnd.nextInt(65536) : k < 9 ? 0 : rnd.nextInt();
    }

    private int length(int off) {
        int k = rnd.nextInt(10);
        int room = off >= 0 && off <= 65536 ? 65536 - off : 0;
        return k < 7 ? rnd.nextInt(room + 1) : k < 9 ? room + 1 + rnd.nextInt(16) : rnd.nextInt();
    }

    private long hostAddress(int len) {
        if (rnd.nextInt(8) == 0 || len < 0 || len > HOST_BYTES) {
            return UNMAPPED + rnd.nextInt(1 << 20);
        }
        return h.hostIova + rnd.nextInt(HOST_BYTES - len + 1);
    }

    /** A command with fields as the function names them (often in range), its length covering them. */
    private MemorySegment wellFormed() {
        int[] fns = {NOP, GET_INFO, GET_STATS, VRAM_ALLOC, VRAM_FREE, BAR1_MAP, BAR1_UNMAP, CE_COPY_H2D, CE_COPY_D2H, CE_COPY_D2D};
        int f = fns[rnd.nextInt(fns.length)];
        MemorySegment p = MemorySegment.ofArray(new byte[32]);
        int len = switch (f) {
            case VRAM_ALLOC, VRAM_FREE -> {
                p.set(INT, P_PAGE, page());
                p.set(INT, P_COUNT, count());
                yield P_LEN;
            }
            case BAR1_UNMAP -> {
                p.set(INT, P_PAGE, slot());
                p.set(INT, P_COUNT, count());
                yield P_LEN;
            }
            case BAR1_MAP -> {
                p.set(INT, MAP_SLOT, slot());
                p.set(INT, MAP_PAGE, page());
                p.set(INT, MAP_COUNT, count());
                yield MAP_LEN;
            }
            case CE_COPY_H2D, CE_COPY_D2H -> {
                int off = offset();
                int n = length(off);
                p.set(INT, CE_PAGE, page());
                p.set(INT, CE_OFFSET, off);
                p.set(INT, CE_LENGTH, n);
                p.set(GpuQueueHarness.LONG, CE_HOST_ADDR, hostAddress(n));
                yield CE_LEN;
            }
            case CE_COPY_D2D -> {
                int so = offset();
                int n = length(so);
                p.set(INT, D2D_SRC_PAGE, page());
                p.set(INT, D2D_SRC_OFFSET, so);
                p.set(INT, D2D_DST_PAGE, page());
                p.set(INT, D2D_DST_OFFSET, rnd.nextBoolean() ? so : offset());
                p.set(INT, D2D_LENGTH, n);
                yield D2D_LEN;
            }
            default -> 0;
        };
        if (rnd.nextInt(20) == 0) { // a length too short for the function, or padded
            len = rnd.nextBoolean() ? rnd.nextInt(len + 1) : len + rnd.nextInt(16);
        }
        return h.element(f, p.toArray(ValueLayout.JAVA_BYTE), RPC_HDR_SIZE + len);
    }

    /** A command spoiled one way after it was sealed (some re-sealed so the header check is reached). */
    private MemorySegment malformed() {
        MemorySegment e = wellFormed();
        long r = ELEM_HDR_SIZE;
        switch (rnd.nextInt(8)) {
            case 0 -> e.set(ValueLayout.JAVA_BYTE, rnd.nextInt((int) e.byteSize()), (byte) (1 + rnd.nextInt(255))); // a bit flipped: checksum
            case 1 -> e.set(INT, ELEM_COUNT, rnd.nextInt(4) == 0 ? 0 : 2 + rnd.nextInt(100));
            case 2 -> e.set(INT, r + RPC_HEADER_VERSION, rnd.nextInt());
            case 3 -> e.set(INT, r + RPC_SIGNATURE, rnd.nextInt());
            case 4 -> e.set(INT, r + RPC_LENGTH, rnd.nextBoolean() ? rnd.nextInt(RPC_HDR_SIZE) : h.cmdSize - ELEM_HDR_SIZE + 1 + rnd.nextInt(1000));
            case 5 -> e.set(INT, r + RPC_LENGTH, rnd.nextInt());
            case 6 -> e.set(INT, r + RPC_FUNCTION, rnd.nextInt()); // unknown functions mostly
            default -> {
                byte[] raw = new byte[(int) e.byteSize()]; // raw random bytes
                rnd.nextBytes(raw);
                MemorySegment.copy(raw, 0, e, ValueLayout.JAVA_BYTE, 0, raw.length);
            }
        }
        if (rnd.nextBoolean()) {
            GpuQueueHarness.seal(e);
        }
        return e;
    }

    private void commands() {
        int room = Math.min(h.cmdCount - 1, h.msgCount - 1);
        int n = 1 + rnd.nextInt(room);
        if (rnd.nextInt(10) == 0) { // new bytes in the host buffer for the copies to take
            byte[] b = new byte[HOST_BYTES];
            rnd.nextBytes(b);
            MemorySegment.copy(b, 0, h.host, ValueLayout.JAVA_BYTE, 0, b.length);
            System.arraycopy(b, 0, o.host, 0, b.length);
        }
        List<MemorySegment> elems = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            elems.add(rnd.nextInt(4) == 0 ? malformed() : wellFormed());
        }
        int errBefore = h.reg(ERR_COUNT);
        int seq0 = h.sequence;
        List<Answer> answers = h.send(elems);
        for (int i = 0; i < n; i++) {
            MemorySegment e = elems.get(i);
            int expected = o.expect(e, h.cmdSize);
            Answer a = answers.get(i);
            int function = e.get(INT, ELEM_HDR_SIZE + RPC_FUNCTION);
            assertEquals(e.get(INT, ELEM_HDR_SIZE + RPC_SEQUENCE), a.sequence(), "the answer carries the command's sequence");
            assertEquals(function, a.function());
            int at = i;
            assertEquals(expected, a.result(), () -> String.format("command %d of %d (sequence %d, %s): %s expected, %s (0x%x) answered", at, n,
                    seq0 + at, functionName(function), resultName(expected), resultName(a.result()), a.detail()));
            count("result " + resultName(a.result()));
            if (a.result() == RESULT_OK && function == GET_INFO) {
                assertEquals(PAGES, a.params().get(INT, INFO_VRAM_PAGES));
                assertEquals(SLOTS, a.params().get(INT, INFO_BAR1_SLOTS));
                assertEquals(PAGE_SHIFT, a.params().get(INT, INFO_PAGE_SHIFT));
            }
            if (a.result() == RESULT_OK && function == GET_STATS) {
                stats(a);
            }
        }
        assertEquals(errBefore, h.reg(ERR_COUNT), "commands answered by results record no queue error");
        if (elems.stream().anyMatch(e -> e.get(INT, ELEM_HDR_SIZE + RPC_FUNCTION) == CE_COPY_D2H)) {
            assertArrayEquals(o.host, h.host.toArray(ValueLayout.JAVA_BYTE), "the host buffer holds what the copies to it wrote");
        }
    }

    private void stats(Answer a) {
        int allocated = 0;
        int mapped = 0;
        for (int p = 0; p < PAGES; p++) {
            allocated += o.allocated[p] ? 1 : 0;
        }
        for (int s = 0; s < SLOTS; s++) {
            mapped += o.slotPage[s] >= 0 ? 1 : 0;
        }
        assertEquals(allocated, a.params().get(INT, STATS_ALLOCATED_PAGES), "allocated pages");
        assertEquals(mapped, a.params().get(INT, STATS_BAR1_MAPPED), "mapped slots");
        assertTrue(a.params().get(GpuQueueHarness.LONG, STATS_COMMITTED_BYTES) <= GpuQueueHarness.VRAM);
    }

    /**
     * Running, a NOP goes through; BAR1 shows what the oracle says each slot maps: its first 256
     * bytes, or ({@code whole}) every byte.
     */
    private void check(boolean whole) {
        assertEquals(STATUS_RUNNING, h.reg(STATUS));
        h.nop();
        var bar1 = h.fn.barAperture(BAR1);
        for (int s = 0; s < SLOTS; s++) {
            MemorySegment page = bar1.page((long) s << 16);
            if (o.slotPage[s] < 0) {
                assertNull(page, "slot " + s + " maps nothing");
            } else {
                assertNotNull(page, "slot " + s + " maps page " + o.slotPage[s]);
                int n = whole ? 65536 : 256;
                assertArrayEquals(java.util.Arrays.copyOf(o.vram[o.slotPage[s]], n), page.asSlice(0, n).toArray(ValueLayout.JAVA_BYTE),
                        "slot " + s + " shows its page");
            }
        }
        assertEquals(h.board.bar1Mapped(), java.util.Arrays.stream(o.slotPage).filter(p -> p >= 0).count());
    }

    // ------------------------------------------------------------------ registers and pointers

    private static final long[] WRITABLE = {CTRL, CMDQ_BASE_LO, CMDQ_BASE_HI, MSGQ_BASE_LO, MSGQ_BASE_HI, CMDQ_HEAD};
    private static final long[] READ_ONLY = {NV_PMC_BOOT_0, IF_REV, STATUS, ERR_CODE, ERR_INFO, ERR_COUNT, UNDEF_WRITES, UNDEF_LAST};

    private static boolean writable(long off) {
        return java.util.Arrays.stream(WRITABLE).anyMatch(w -> w == off);
    }

    /** Writes to undefined and read-only registers: counted, the last one's offset kept, nothing changed. */
    private void registerNoise() {
        boolean wide = rnd.nextBoolean();
        long off;
        do {
            off = switch (rnd.nextInt(3)) {
                case 0 -> READ_ONLY[rnd.nextInt(READ_ONLY.length)];
                case 1 -> BLOCK + 4L * rnd.nextInt(64); // the model's block and beyond its end
                default -> 4L * rnd.nextInt((int) (GpuBoard.BAR0_SIZE / 4));
            };
            off &= wide ? ~7L : ~3L;
        } while (writable(off) || wide && writable(off + 4));
        int undef = h.reg(UNDEF_WRITES);
        int errs = h.reg(ERR_COUNT);
        int code = h.reg(ERR_CODE);
        if (wide) {
            h.fn.write64(BAR0, off, rnd.nextLong());
        } else {
            h.write(off, rnd.nextInt());
        }
        assertEquals(undef + (wide ? 2 : 1), h.reg(UNDEF_WRITES), String.format("the write at 0x%x was counted", off));
        assertEquals((int) (wide ? off + 4 : off), h.reg(UNDEF_LAST));
        assertEquals(NV_PMC_BOOT_0_GA100, h.reg(NV_PMC_BOOT_0));
        assertEquals(IF_REV_1, h.reg(IF_REV));
        assertEquals(STATUS_RUNNING, h.reg(STATUS));
        assertEquals(errs, h.reg(ERR_COUNT));
        assertEquals(code, h.reg(ERR_CODE));
        for (long half = off; half < off + (wide ? 8 : 4); half += 4) {
            long at = half;
            if (java.util.Arrays.stream(READ_ONLY).noneMatch(r -> r == at)) {
                assertEquals(0, h.reg(half), String.format("undefined 0x%x reads back 0", half));
            }
        }
        count("undefined writes");
    }

    private void writePtrPastTheQueue() {
        int bad = rnd.nextBoolean() ? h.cmdCount + rnd.nextInt(1000) : -1 - rnd.nextInt(1000);
        int before = h.reg(ERR_COUNT);
        h.cmdS.set(INT, TX_WRITE_PTR, bad);
        h.write(CMDQ_HEAD, bad);
        assertEquals(bad, expectError(ERR_WRITE_PTR_PAST_QUEUE, before));
        assertEquals(0, h.waiting());
        h.cmdS.set(INT, TX_WRITE_PTR, h.cmdWrite); // back to the truth; the queue goes on
    }

    private void readPtrPastTheQueue() {
        int bad = rnd.nextBoolean() ? h.msgCount + rnd.nextInt(1000) : -1 - rnd.nextInt(1000);
        int before = h.reg(ERR_COUNT);
        h.cmdS.set(INT, TX_HDR_SIZE + RX_READ_PTR, bad);
        h.put(h.element(NOP, new byte[0], RPC_HDR_SIZE));
        h.ring();
        assertEquals(bad, expectError(ERR_READ_PTR_PAST_QUEUE, before));
        assertEquals(0, h.waiting(), "no answer while the readPtr is bad");
        h.cmdS.set(INT, TX_HDR_SIZE + RX_READ_PTR, h.msgRead);
        h.ring(); // the NOP waited in the queue
        assertEquals(RESULT_OK, h.next().result());
    }

    private void baseWhileRunning() {
        long reg = WRITABLE[1 + rnd.nextInt(4)];
        int was = h.reg(reg);
        int before = h.reg(ERR_COUNT);
        h.write(reg, rnd.nextInt());
        assertEquals((int) reg, expectError(ERR_BASE_WHILE_RUNNING, before));
        assertEquals(was, h.reg(reg), "the base is fixed while the queues run");
    }

    /** More commands than the message queue has room for: answered as far as room goes, the rest after the driver read. */
    private void messageQueueFull() {
        int room = h.msgCount - 1;
        if (h.cmdCount - 1 <= room) {
            return; // this geometry cannot overflow the message queue
        }
        int n = room + 1 + rnd.nextInt(h.cmdCount - 1 - room);
        for (int i = 0; i < n; i++) {
            h.put(h.element(rnd.nextBoolean() ? NOP : GET_INFO, new byte[0], RPC_HDR_SIZE));
        }
        int before = h.reg(ERR_COUNT);
        h.ring();
        assertEquals(n - room, expectError(ERR_MSGQ_FULL, before), "the commands left");
        assertEquals(room, h.waiting());
        int answered = 0;
        while (answered < n) {
            while (h.waiting() > 0) {
                assertEquals(RESULT_OK, h.next().result());
                answered++;
            }
            if (answered < n) {
                h.write(CMDQ_HEAD, 0); // room again: the rest
            }
        }
    }

    /** Bad queue bases or headers: ENABLE refuses naming the field; a doorbell then is an error; a good setup works. */
    private void badQueueSetup() {
        h.write(CTRL, CTRL_RESET);
        assertEquals(0, h.reg(STATUS));
        boolean msg = rnd.nextBoolean();
        int which = msg ? 0x1000 : 0;
        GpuQueueHarness.header(h.cmdS, h.cmdSize, h.cmdCount);
        GpuQueueHarness.header(h.msgS, h.msgSize, h.msgCount);
        int before = h.reg(ERR_COUNT);
        int k = rnd.nextInt(3);
        if (k < 2) {
            long bad = k == 0 ? (msg ? h.msgIova : h.cmdIova) + 4 * (1 + rnd.nextInt(1023)) : UNMAPPED + ((long) rnd.nextInt(256) << 12);
            h.bases(msg ? h.cmdIova : bad, msg ? bad : h.msgIova);
            h.write(CTRL, CTRL_ENABLE);
            int info = expectError(ERR_BAD_QUEUE_ADDRESS, before);
            assertEquals(k == 0 ? (int) (bad & 0xfff) | which : which, info);
        } else {
            MemorySegment s = msg ? h.msgS : h.cmdS;
            long[] fields = {TX_VERSION, TX_MSG_SIZE, TX_MSG_COUNT, TX_ENTRY_OFF, TX_RX_HDR_OFF, TX_SIZE};
            long f = fields[rnd.nextInt(fields.length)];
            int v = s.get(INT, f);
            int entry = s.get(INT, TX_ENTRY_OFF);
            int[] bads = f == TX_VERSION ? new int[] {1 + rnd.nextInt(1000)}
                    : f == TX_MSG_SIZE ? new int[] {0, 64, 100, 129, 8192, -256}
                    : f == TX_MSG_COUNT ? new int[] {0, 1, MAX_MSG_COUNT + 1, -1}
                    : f == TX_ENTRY_OFF ? new int[] {0, 0x800, 0x1001, -4096, 2 << 20}
                    : f == TX_RX_HDR_OFF ? new int[] {0, 0x1c, 0x22, entry - 2, entry}
                    : new int[] {v + 4096, v - 1};
            s.set(INT, f, bads[rnd.nextInt(bads.length)]);
            h.bases(h.cmdIova, h.msgIova);
            h.write(CTRL, CTRL_ENABLE);
            assertEquals((int) f | which, expectError(ERR_BAD_QUEUE_HEADER, before), "the field named");
        }
        assertEquals(0, h.reg(STATUS), "the queues stay off");
        h.write(CMDQ_HEAD, 1);
        expectError(ERR_DOORBELL_NOT_RUNNING, before + 1);
        restart();
    }

    /** A queue store unmapped under the running model: the queues go off with a DMA-fault error; set up again they work. */
    private void queueMemoryUnmapped() {
        boolean msg = rnd.nextBoolean();
        h.dma.dmaUnmap(msg ? h.msgIova : h.cmdIova, 2);
        int before = h.reg(ERR_COUNT);
        h.put(h.element(NOP, new byte[0], RPC_HDR_SIZE)); // no effect, whether or not it ran
        h.ring();
        expectError(ERR_QUEUE_DMA_FAULT, before);
        assertEquals(0, h.reg(STATUS), "the queues are off");
        if (msg) {
            h.msgIova = h.map(h.msgPfn, 2);
        } else {
            h.cmdIova = h.map(h.cmdPfn, 2);
        }
        restart();
    }

    /** Unmaps every slot and frees every page through the queue: nothing held at the end. */
    private void cleanUp() {
        List<MemorySegment> elems = new ArrayList<>();
        for (int s = 0; s < SLOTS; s++) {
            if (o.slotPage[s] >= 0) {
                MemorySegment p = MemorySegment.ofArray(new byte[P_LEN]);
                p.set(INT, P_PAGE, s);
                p.set(INT, P_COUNT, 1);
                elems.add(h.element(BAR1_UNMAP, p.toArray(ValueLayout.JAVA_BYTE), RPC_HDR_SIZE + P_LEN));
                o.unmap(s, 1);
            }
        }
        for (int pg = 0; pg < PAGES; pg++) {
            if (o.allocated[pg]) {
                MemorySegment p = MemorySegment.ofArray(new byte[P_LEN]);
                p.set(INT, P_PAGE, pg);
                p.set(INT, P_COUNT, 1);
                elems.add(h.element(VRAM_FREE, p.toArray(ValueLayout.JAVA_BYTE), RPC_HDR_SIZE + P_LEN));
                o.allocated[pg] = false;
            }
        }
        int batch = Math.min(h.cmdCount, h.msgCount) - 1;
        for (int i = 0; i < elems.size(); i += batch) {
            for (Answer a : h.send(elems.subList(i, Math.min(elems.size(), i + batch)))) {
                assertEquals(RESULT_OK, a.result(), functionName(a.function()));
            }
        }
        assertEquals(0, h.board.bar1Mapped());
    }
}

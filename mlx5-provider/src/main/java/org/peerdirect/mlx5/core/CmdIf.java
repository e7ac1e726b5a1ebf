package org.peerdirect.mlx5.core;

import org.peerdirect.kernel.dma.coherent.DmaCoherentPages;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE32;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE64;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Supplier;

import org.peerdirect.hca.cx4.ifc.CmdEntry;
import org.peerdirect.hca.cx4.ifc.CmdMailbox;
import org.peerdirect.hca.cx4.ifc.InitSeg;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * The driver's side of the command interface ({@code cmd.c}): the 4 KiB queue page handed to the
 * firmware through the initialization segment, one command per slot with its mailbox chains,
 * completion by polling the ownership bit until the command EQ exists and by command-completion
 * events after ({@link #useEvents}), and the command log.
 *
 * <p>Slots: the last one is kept for the page allocator's {@code MANAGE_PAGES}, as Linux keeps it
 * ({@code MLX5_CMD_OP_MANAGE_PAGES} on the reserved entry): a firmware may park commands until it
 * gets pages, and the pages must still get through when every other slot is parked.
 *
 * <p>Lock rules: {@code lock} guards {@code freeSlots} and {@code completed}; nobody holds it
 * while writing an entry, ringing or waiting (the wait releases it through its condition). A slot
 * is written only by the thread that acquired it.
 *
 * @see <a href="https://elixir.bootlin.com/linux/latest/source/drivers/net/ethernet/mellanox/mlx5/core/cmd.c">cmd.c</a>
 */
final class CmdIf {

    private static final VarHandle BYTE = ValueLayout.JAVA_BYTE.varHandle();
    /** Mailbox blocks per 4 KiB page (each 1024-byte aligned). */
    private static final int BLOCKS_PER_PAGE = 4;

    /** One mailbox block: its bus address and bytes. */
    private record Block(long iova, MemorySegment mem) {
    }

    private final String name;
    private final PciFunction fn;
    private final DmaCoherentPages dma;
    /** The command timeout; changed in place by {@link #timeout(long)} (Configuration Admin), read once per command. */
    private volatile long timeoutNanos;
    /** Why commands cannot be sent (the device is dead or gone), or null. */
    private final Supplier<String> unusable;
    private final CmdLog log;
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition done = lock.newCondition();
    private final ConcurrentLinkedDeque<Block> blocks = new ConcurrentLinkedDeque<>();
    private DmaCoherentPages.Page queue;
    private int slots;
    // guarded by lock
    /** One bit per free slot, the reserved last one included. */
    private int freeSlots;
    private int completed;
    private byte token;
    private volatile boolean events;
    /** Commands between their first check and their end; {@link #drain} waits for none. */
    private final java.util.concurrent.atomic.AtomicInteger inFlight = new java.util.concurrent.atomic.AtomicInteger();

    CmdIf(String name, PciFunction fn, DmaCoherentPages dma, long timeoutNanos, Supplier<String> unusable) {
        this.name = name;
        this.log = new CmdLog(256, name);
        this.fn = fn;
        this.dma = dma;
        this.timeoutNanos = timeoutNanos;
        this.unusable = unusable;
    }

    CmdLog log() {
        return log;
    }

    /** A new command timeout: commands that start from now on wait this long. */
    void timeout(long nanos) {
        timeoutNanos = nanos;
    }

    /**
     * {@code mlx5_cmd_init} and {@code wait_fw_init}: waits for the firmware's initializing bit to
     * clear, checks the interface revision and the queue geometry, allocates the queue page and
     * hands its address to the firmware (high word first; the low word's size bits are read-only).
     */
    void enable() {
        long deadline = System.nanoTime() + timeoutNanos;
        while ((fn.read32be(0, InitSeg.INITIALIZING) & InitSeg.INITIALIZING_BIT) != 0) {
            if (!fn.present() || System.nanoTime() > deadline) {
                throw new IllegalStateException(name + ": firmware over pre-init timeout, initializing bit still set"
                        + (fn.present() ? "" : " (the function is gone)"));
            }
            LockSupport.parkNanos(100_000);
        }
        int rev = fn.read32be(0, InitSeg.CMDIF_REV_FW_SUB) >>> 16;
        if (rev != InitSeg.CMD_IF_REV) {
            throw new IllegalStateException(String.format("%s: driver cmdif rev(%d) differs from firmware's(%d)", name, InitSeg.CMD_IF_REV, rev));
        }
        int sz = fn.read32be(0, InitSeg.CMDQ_ADDR_L_SZ);
        int logSize = sz >> 4 & 0xf;
        int logStride = sz & 0xf;
        if (logStride < 6 || (1 << logSize) * (1 << logStride) > 4096) {
            throw new IllegalStateException(String.format("%s: firmware reports a command queue of 2^%d entries of 2^%d bytes; the driver takes "
                    + "at least 64-byte entries in one 4 KiB page", name, logSize, logStride));
        }
        slots = 1 << logSize;
        freeSlots = (int) ((1L << slots) - 1);
        queue = dma.alloc();
        fn.write32be(0, InitSeg.CMDQ_ADDR_H, (int) (queue.iova() >>> 32));
        fn.write32be(0, InitSeg.CMDQ_ADDR_L_SZ, (int) queue.iova());
    }

    /** Completion by events from now on (the command EQ exists) or by polling again (before it goes). */
    void useEvents(boolean on) {
        events = on;
    }

    boolean eventsMode() {
        return events;
    }

    /** {@code mlx5_cmd_comp_handler}: the command EQ reported these slots complete. */
    void complete(int vector) {
        lock.lock();
        try {
            completed |= vector;
            done.signalAll();
        } finally {
            lock.unlock();
        }
    }

    /** A command input of {@code len} bytes with its header: {@code opcode << 16} in dw0, {@code op_mod} in dw1. */
    static MemorySegment input(int opcode, int opMod, int len) {
        MemorySegment in = MemorySegment.ofArray(new byte[len]);
        in.set(BE32, 0, opcode << 16);
        in.set(BE32, 4, opMod & 0xffff);
        return in;
    }

    /** Runs a command on a regular slot; returns its output ({@code outlen} bytes, status 0). */
    MemorySegment exec(MemorySegment in, int outlen) {
        return exec(in, outlen, false);
    }

    /** Runs a {@code MANAGE_PAGES} on the reserved slot. */
    MemorySegment execPages(MemorySegment in, int outlen) {
        return exec(in, outlen, true);
    }

    private MemorySegment exec(MemorySegment in, int outlen, boolean pages) {
        inFlight.incrementAndGet();
        try {
            return execCounted(in, outlen, pages);
        } finally {
            if (inFlight.decrementAndGet() == 0) {
                lock.lock();
                try {
                    done.signalAll();
                } finally {
                    lock.unlock();
                }
            }
        }
    }

    /** Commands between their start and their end (a waiter that gave up has ended). */
    int inFlight() {
        return inFlight.get();
    }

    /**
     * Waits until no command is in flight ({@code mlx5_cmd_flush}'s purpose): a teardown frees the
     * queue page and mailboxes only after every waiter has given up on them. Bounded: a waiter
     * ends within the command timeout, at once when the device is gone or dead.
     */
    void drain() {
        long deadline = System.nanoTime() + timeoutNanos + TimeUnit.SECONDS.toNanos(1);
        lock.lock();
        try {
            while (inFlight.get() > 0 && System.nanoTime() < deadline) {
                done.awaitNanos(TimeUnit.MILLISECONDS.toNanos(5));
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            lock.unlock();
        }
    }

    /**
     * {@code mlx5_cmd_invoke}: a slot and token ({@link #allocSlot}), the input copied into the
     * entry and its mailboxes, the doorbell, the wait ({@link #await}), the output copied back
     * ({@link #copyOut}); every outcome logged. The slot goes back to the free set unless the
     * firmware may still own it (a timeout or a gone device: lost, as in Linux).
     */
    private MemorySegment execCounted(MemorySegment in, int outlen, boolean pages) {
        int opcode = in.get(BE32, 0) >>> 16;
        int opMod = in.get(BE32, 4) & 0xffff;
        String why = queue == null ? "the command interface is not enabled" : unusable.get();
        if (why != null) {
            log.add(opcode, opMod, events, 0, -1, 0, 0, why);
            throw new Mlx5CmdException(Mlx5CmdException.Kind.DEVICE_GONE, opcode, opMod, 0, 0, why);
        }
        int slotTok = allocSlot(pages, opcode, opMod);
        int slot = slotTok >>> 8;
        byte tok = (byte) slotTok;
        boolean release = true;
        List<Block> inBoxes = chain((int) in.byteSize(), tok);
        List<Block> outBoxes = chain(outlen, tok);
        boolean ev = events;
        try {
            MemorySegment e = queue.mem().asSlice((long) slot * CmdEntry.SIZE, CmdEntry.SIZE);
            copyIn(in, e, inBoxes, outBoxes, outlen, tok);
            long start = System.nanoTime();
            fn.write32be(0, InitSeg.CMD_DBELL, 1 << slot);
            String failure = await(e, slot, ev, start);
            long latency = System.nanoTime() - start;
            if (failure != null) {
                release = false; // the firmware may still own the entry and write its mailboxes: the slot is lost, as in Linux
                log.add(opcode, opMod, ev, 0, -1, 0, latency, failure);
                throw new Mlx5CmdException(fn.present() && unusable.get() == null ? Mlx5CmdException.Kind.TIMEOUT : Mlx5CmdException.Kind.DEVICE_GONE,
                        opcode, opMod, 0, 0, failure);
            }
            int delivery = ((byte) BYTE.getVolatile(e, CmdEntry.STATUS_OWN) & 0xff) >>> 1;
            if (delivery != CmdEntry.DELIVERY_OK) {
                log.add(opcode, opMod, ev, delivery, -1, 0, latency, null);
                throw new Mlx5CmdException(Mlx5CmdException.Kind.DELIVERY, opcode, opMod, delivery, 0, null);
            }
            MemorySegment out = copyOut(e, outBoxes, outlen);
            int status = out.get(ValueLayout.JAVA_BYTE, 0) & 0xff;
            int syndrome = out.get(BE32, 4);
            log.add(opcode, opMod, ev, delivery, status, syndrome, latency, null);
            if (status != 0) {
                throw new Mlx5CmdException(Mlx5CmdException.Kind.STATUS, opcode, opMod, status, syndrome, null);
            }
            return out;
        } finally {
            if (release) {
                blocks.addAll(inBoxes);
                blocks.addAll(outBoxes);
                lock.lock();
                try {
                    freeSlots |= 1 << slot;
                    done.signalAll();
                } finally {
                    lock.unlock();
                }
            }
        }
    }

    /**
     * {@code cmd_alloc_index} and the token of {@code alloc_token}: a free slot ({@code MANAGE_PAGES}
     * on the reserved one, the rest on the others), waited for within the command timeout.
     *
     * @return the slot in bits 8 and up, the token (never 0) in the low byte
     */
    private int allocSlot(boolean pages, int opcode, int opMod) {
        int reservedSlot = 1 << slots - 1;
        int eligible = pages ? reservedSlot : ~reservedSlot;
        lock.lock();
        try {
            long deadline = System.nanoTime() + timeoutNanos;
            while ((freeSlots & eligible) == 0) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    throw new Mlx5CmdException(Mlx5CmdException.Kind.TIMEOUT, opcode, opMod, 0, 0, "no free command slot");
                }
                done.awaitNanos(left);
            }
            int slot = Integer.numberOfTrailingZeros(freeSlots & eligible);
            freeSlots &= ~(1 << slot);
            completed &= ~(1 << slot);
            token = (byte) (token + 1 == 0 ? 1 : token + 1);
            return slot << 8 | token & 0xff;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new Mlx5CmdException(Mlx5CmdException.Kind.TIMEOUT, opcode, opMod, 0, 0, "interrupted waiting for a slot");
        } finally {
            lock.unlock();
        }
    }

    /**
     * {@code mlx5_copy_to_msg} and the entry's fields: the inline input, the rest in the input
     * mailboxes, the lengths, pointers and token; the ownership bit last (a volatile write), so
     * the entry is complete before it is handed over.
     */
    private static void copyIn(MemorySegment in, MemorySegment e, List<Block> inBoxes, List<Block> outBoxes, int outlen, byte tok) {
        for (int i = 0; i < inBoxes.size(); i++) {
            int off = CmdEntry.INLINE + i * CmdMailbox.DATA_SIZE;
            MemorySegment.copy(in, off, inBoxes.get(i).mem(), CmdMailbox.DATA, Math.min(CmdMailbox.DATA_SIZE, in.byteSize() - off));
        }
        e.fill((byte) 0);
        MemorySegment.copy(in, 0, e, CmdEntry.IN, Math.min(CmdEntry.INLINE, in.byteSize()));
        e.set(ValueLayout.JAVA_BYTE, CmdEntry.TYPE, (byte) CmdEntry.PCI_CMD_XPORT);
        e.set(BE32, CmdEntry.INPUT_LENGTH, (int) in.byteSize());
        e.set(BE64, CmdEntry.IN_PTR, inBoxes.isEmpty() ? 0 : inBoxes.get(0).iova());
        e.set(BE64, CmdEntry.OUT_PTR, outBoxes.isEmpty() ? 0 : outBoxes.get(0).iova());
        e.set(BE32, CmdEntry.OUTPUT_LENGTH, outlen);
        e.set(ValueLayout.JAVA_BYTE, CmdEntry.TOKEN, tok);
        BYTE.setVolatile(e, CmdEntry.STATUS_OWN, (byte) CmdEntry.OWNER_HW);
    }

    /** {@code mlx5_copy_from_msg}: the inline output, then the output mailboxes, into a fresh {@code outlen} bytes. */
    private static MemorySegment copyOut(MemorySegment e, List<Block> outBoxes, int outlen) {
        MemorySegment out = MemorySegment.ofArray(new byte[outlen]);
        MemorySegment.copy(e, CmdEntry.OUT, out, 0, Math.min(CmdEntry.INLINE, outlen));
        for (int i = 0; i < outBoxes.size(); i++) {
            int off = CmdEntry.INLINE + i * CmdMailbox.DATA_SIZE;
            MemorySegment.copy(outBoxes.get(i).mem(), CmdMailbox.DATA, out, off, Math.min(CmdMailbox.DATA_SIZE, outlen - off));
        }
        return out;
    }

    /**
     * Waits until the firmware hands the entry back: by the command-completion event in event
     * mode (the ownership bit is checked too, so a lost event costs only the wait's bound), by
     * polling the ownership bit otherwise. Returns null when done, else why it gave up.
     */
    private String await(MemorySegment e, int slot, boolean ev, long start) {
        long timeout = timeoutNanos; // once: a change applies to the next command
        long deadline = start + timeout;
        int spins = 0;
        while (((byte) BYTE.getVolatile(e, CmdEntry.STATUS_OWN) & CmdEntry.OWNER_HW) != 0) {
            if (!fn.present()) {
                return "the function is gone (surprise removal)";
            }
            String why = unusable.get();
            if (why != null) {
                return why;
            }
            long now = System.nanoTime();
            if (now > deadline) {
                return String.format("%d ms", TimeUnit.NANOSECONDS.toMillis(timeout));
            }
            if (ev) {
                lock.lock();
                try {
                    if ((completed & 1 << slot) == 0) {
                        done.awaitNanos(Math.min(deadline - now, TimeUnit.MILLISECONDS.toNanos(5)));
                    }
                } catch (InterruptedException x) {
                    Thread.currentThread().interrupt();
                    return "interrupted";
                } finally {
                    lock.unlock();
                }
            } else if (++spins < 2_000) {
                Thread.onSpinWait();
            } else {
                LockSupport.parkNanos(20_000);
            }
        }
        // the bit may read clear because the page is no longer what the firmware wrote (the function went away)
        return fn.present() ? null : "the function is gone (surprise removal)";
    }

    /** A mailbox chain for {@code len} command bytes: blocks numbered from 0, linked, with the entry's token. */
    private List<Block> chain(int len, byte tok) {
        int n = CmdMailbox.blocks(len);
        List<Block> out = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            out.add(block());
        }
        for (int i = 0; i < n; i++) {
            MemorySegment b = out.get(i).mem();
            b.fill((byte) 0);
            b.set(BE64, CmdMailbox.NEXT, i + 1 < n ? out.get(i + 1).iova() : 0);
            b.set(BE32, CmdMailbox.BLOCK_NUM, i);
            b.set(ValueLayout.JAVA_BYTE, CmdMailbox.TOKEN, tok);
        }
        return out;
    }

    private Block block() {
        Block b = blocks.pollFirst();
        if (b != null) {
            return b;
        }
        DmaCoherentPages.Page p = dma.alloc(); // freed with every other DMA page at teardown (DmaCoherentPages.freeAll)
        for (int i = 1; i < BLOCKS_PER_PAGE; i++) {
            blocks.add(new Block(p.iova() + i * CmdMailbox.ALIGN, p.mem().asSlice(i * CmdMailbox.ALIGN, CmdMailbox.SIZE)));
        }
        return new Block(p.iova(), p.mem().asSlice(0, CmdMailbox.SIZE));
    }
}

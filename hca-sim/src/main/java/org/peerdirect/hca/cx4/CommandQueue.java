package org.peerdirect.hca.cx4;

import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE32;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE64;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;

import org.peerdirect.hca.cx4.ifc.CmdEntry;
import org.peerdirect.hca.cx4.ifc.CmdMailbox;
import org.peerdirect.kernel.dma.DmaPort;
import org.peerdirect.kernel.iommu.IommuFault;

/**
 * The firmware's command queue processing (what {@code cmd.c} talks to): reads a 64-byte entry
 * by DMA from the queue page, checks its descriptor, gathers the input from the inline part and
 * the mailbox chain, has the command executed, scatters the output back the same way and hands
 * the entry back by clearing its ownership bit with the delivery status. Every malformed entry
 * ends in a delivery status, every malformed command in a command status: the firmware never
 * throws, never hangs and goes on with the next command.
 *
 * <p>Lock rules: one firmware thread calls {@link #execute}; nothing here is shared with other threads.
 */
final class CommandQueue {

    /** Executes one command: input bytes (the header included) to output bytes of {@code outlen}. */
    interface Executor {
        /**
         * Fills {@code out} (its length is the entry's output length, at least 16).
         *
         * @throws Deferred when the command cannot run yet and changed nothing
         */
        void execute(MemorySegment in, MemorySegment out) throws Deferred;
    }

    /** A command parked with its entry still owned by hardware; it is run again later from the start. */
    static final class Deferred extends Exception {
        Deferred() {
            super("command deferred", null, false, false);
        }
    }

    /** What {@link #execute} did with a slot. */
    enum Result {
        /** Software owns the slot or its entry is unreachable: nothing done. */
        IGNORED,
        /** The entry was handed back with its delivery status (and the output when delivered). */
        COMPLETED,
        /** Parked: the entry stays with hardware. */
        DEFERRED
    }

    /** The largest command the model accepts (bytes, inline part included): 1 MiB of mailboxes. */
    static final int MAX_LENGTH = 1 << 20;

    private final DmaPort port;
    private final LongSupplier queueAddress;
    private final Executor executor;
    private final MemorySegment entry = Arena.ofAuto().allocate(CmdEntry.SIZE, 8);
    private final MemorySegment block = Arena.ofAuto().allocate(CmdMailbox.SIZE, 8);
    final AtomicLong executed = new AtomicLong();
    final AtomicLong deliveryErrors = new AtomicLong();

    CommandQueue(DmaPort port, LongSupplier queueAddress, Executor executor) {
        this.port = port;
        this.queueAddress = queueAddress;
        this.executor = executor;
    }

    /** A failed delivery: the status the entry gets back. */
    private static final class Delivery extends Exception {
        final int status;

        Delivery(int status) {
            super(CmdEntry.deliveryName(status), null, false, false);
            this.status = status;
        }
    }

    /** Executes the entry in {@code slot} if hardware owns it. */
    Result execute(int slot) {
        long at = queueAddress.getAsLong() + (long) slot * CmdEntry.SIZE;
        try {
            port.read(at, entry, 0, CmdEntry.SIZE);
        } catch (IommuFault f) {
            return Result.IGNORED; // the entry itself is unreachable (the IOMMU counted the fault): nothing to answer
        }
        if ((entry.get(ValueLayout.JAVA_BYTE, CmdEntry.STATUS_OWN) & CmdEntry.OWNER_HW) == 0) {
            return Result.IGNORED; // a doorbell for a slot software still owns: ignored, as by the hardware
        }
        int status;
        try {
            status = deliver();
        } catch (IommuFault f) {
            status = CmdEntry.DELIVERY_CMD_DESCRIPTOR_ERR; // a mailbox outside the function's mappings
        } catch (Deferred d) {
            return Result.DEFERRED;
        }
        if (status != CmdEntry.DELIVERY_OK) {
            deliveryErrors.incrementAndGet();
        }
        // the output first, the ownership last: software reads the entry once it owns it
        entry.set(ValueLayout.JAVA_BYTE, CmdEntry.STATUS_OWN, (byte) (status << 1));
        try {
            port.write(at, entry, 0, CmdEntry.SIZE);
        } catch (IommuFault f) {
            // the driver unmapped its queue under the command: the IOMMU counted it, no one to tell
        }
        return Result.COMPLETED;
    }

    private int deliver() throws Deferred {
        try {
            if (entry.get(ValueLayout.JAVA_BYTE, CmdEntry.TYPE) != CmdEntry.PCI_CMD_XPORT) {
                throw new Delivery(CmdEntry.DELIVERY_CMD_DESCRIPTOR_ERR);
            }
            int inlen = entry.get(BE32, CmdEntry.INPUT_LENGTH);
            int outlen = entry.get(BE32, CmdEntry.OUTPUT_LENGTH);
            if (inlen < CmdEntry.INLINE || inlen > MAX_LENGTH) {
                throw new Delivery(CmdEntry.DELIVERY_IN_LENGTH_ERR);
            }
            if (outlen < CmdEntry.INLINE || outlen > MAX_LENGTH) {
                throw new Delivery(CmdEntry.DELIVERY_OUT_LENGTH_ERR);
            }
            long inPtr = entry.get(BE64, CmdEntry.IN_PTR);
            long outPtr = entry.get(BE64, CmdEntry.OUT_PTR);
            if (CmdMailbox.blocks(inlen) > 0 && (inPtr & (CmdEntry.PTR_ALIGN - 1)) != 0) {
                throw new Delivery(CmdEntry.DELIVERY_IN_PTR_ALIGN_ERR);
            }
            if (CmdMailbox.blocks(outlen) > 0 && (outPtr & (CmdEntry.PTR_ALIGN - 1)) != 0) {
                throw new Delivery(CmdEntry.DELIVERY_OUT_PTR_ALIGN_ERR);
            }
            byte token = entry.get(ValueLayout.JAVA_BYTE, CmdEntry.TOKEN);
            MemorySegment in = MemorySegment.ofArray(new byte[inlen]);
            MemorySegment.copy(entry, CmdEntry.IN, in, 0, CmdEntry.INLINE);
            walk(inPtr, inlen, token, in, false);
            // check the output chain before executing: a command with nowhere to put its output
            // is not executed (its effects would be lost to the driver)
            MemorySegment out = MemorySegment.ofArray(new byte[outlen]);
            walk(outPtr, outlen, token, null, false);
            executor.execute(in, out);
            executed.incrementAndGet();
            MemorySegment.copy(out, 0, entry, CmdEntry.OUT, CmdEntry.INLINE);
            walk(outPtr, outlen, token, out, true);
            return CmdEntry.DELIVERY_OK;
        } catch (Delivery d) {
            return d.status;
        }
    }

    /**
     * Walks the mailbox chain at {@code ptr} for a command of {@code length} bytes, checking each
     * block's number, token and next pointer; copies the data after the inline part into
     * {@code data} (write false) or from it into the blocks (write true); {@code data} null only checks.
     */
    private void walk(long ptr, int length, byte token, MemorySegment data, boolean write) throws Delivery {
        int n = CmdMailbox.blocks(length);
        long p = ptr;
        for (int i = 0; i < n; i++) {
            if (p == 0 || (p & (CmdMailbox.ALIGN - 1)) != 0 && i > 0) {
                throw new Delivery(CmdEntry.DELIVERY_BAD_BLOCK_NUMBER); // the chain ends early or a next pointer is misaligned
            }
            port.read(p, block, 0, CmdMailbox.SIZE);
            if (block.get(BE32, CmdMailbox.BLOCK_NUM) != i) {
                throw new Delivery(CmdEntry.DELIVERY_BAD_BLOCK_NUMBER); // also what a loop in the chain meets
            }
            if (block.get(ValueLayout.JAVA_BYTE, CmdMailbox.TOKEN) != token) {
                throw new Delivery(CmdEntry.DELIVERY_TOKEN_ERR);
            }
            int off = CmdEntry.INLINE + i * CmdMailbox.DATA_SIZE;
            int len = Math.min(CmdMailbox.DATA_SIZE, length - off);
            if (data != null && write) {
                MemorySegment.copy(data, off, block, CmdMailbox.DATA, len);
                port.write(p, block, 0, CmdMailbox.DATA_SIZE);
            } else if (data != null) {
                MemorySegment.copy(block, CmdMailbox.DATA, data, off, len);
            }
            p = block.get(BE64, CmdMailbox.NEXT) & ~(CmdMailbox.ALIGN - 1);
        }
    }

    /** Status and syndrome into an output header. */
    static void status(MemorySegment out, int status, int syndrome) {
        out.set(ValueLayout.JAVA_BYTE, 0, (byte) status);
        out.set(BE32, 4, syndrome);
    }

    static int opcode(MemorySegment in) {
        return in.get(BE32, 0) >>> 16;
    }
}

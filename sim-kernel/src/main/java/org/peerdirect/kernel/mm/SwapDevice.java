package org.peerdirect.kernel.mm;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.BitSet;

import org.peerdirect.kernel.mm.KernelException.Errno;

/**
 * A swap file: 4 KiB slots in a real file, written on swap-out and read on swap-in. The file is
 * unlinked as soon as it is open, so it never outlives the process.
 *
 * <p>Lock: {@code this} guards the slot map; file I/O is positional and needs no lock.
 */
final class SwapDevice implements AutoCloseable {

    private final Path file;
    private final FileChannel channel;
    private final long slots;
    private final BitSet used = new BitSet();
    private long inUse;

    SwapDevice(Path file, long bytes) {
        this.file = file;
        this.slots = bytes / Mm.PAGE_SIZE;
        try {
            Files.createDirectories(file.toAbsolutePath().getParent());
            this.channel = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.READ,
                    StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING);
            // unlinked while open: the space goes with the channel, so even a kill -9 of the
            // container leaves no swap file behind (the kernel keeps a deleted open file's blocks)
            Files.deleteIfExists(file);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot open swap file " + file + ": " + e.getMessage(), e);
        }
    }

    synchronized long allocSlot() {
        int s = used.nextClearBit(0);
        if (s >= slots) {
            return -1;
        }
        used.set(s);
        inUse++;
        return s;
    }

    synchronized void freeSlot(long slot) {
        if (!used.get((int) slot)) {
            throw new KernelException(Errno.EINVAL, "swap slot " + slot + " freed twice");
        }
        used.clear((int) slot);
        inUse--;
    }

    synchronized long slotsInUse() {
        return inUse;
    }

    long totalSlots() {
        return slots;
    }

    void write(long slot, MemorySegment page) {
        try {
            var buf = page.asByteBuffer();
            long pos = slot * Mm.PAGE_SIZE;
            while (buf.hasRemaining()) {
                pos += channel.write(buf, pos);
            }
        } catch (IOException e) {
            throw new UncheckedIOException("swap write of slot " + slot + " failed: " + e.getMessage(), e);
        }
    }

    void read(long slot, MemorySegment page) {
        try {
            var buf = page.asByteBuffer();
            long pos = slot * Mm.PAGE_SIZE;
            while (buf.hasRemaining()) {
                int n = channel.read(buf, pos);
                if (n < 0) {
                    throw new IOException("end of swap file at slot " + slot);
                }
                pos += n;
            }
        } catch (IOException e) {
            throw new UncheckedIOException("swap read of slot " + slot + " failed: " + e.getMessage(), e);
        }
    }

    @Override
    public void close() {
        try {
            channel.close();
            Files.deleteIfExists(file);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}

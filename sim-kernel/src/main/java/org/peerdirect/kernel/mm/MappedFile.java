package org.peerdirect.kernel.mm;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * A file mapped by {@link AddressSpace#mmapFile}: its channel, open while some VMA maps it.
 * Reads past the end of the file are zeroes up to the end of the page; writeback never grows the
 * file (a page wholly past the end cannot be faulted in: SIGBUS).
 */
public final class MappedFile {

    private final Path path;
    private final FileChannel channel;

    MappedFile(Path path, boolean writable) {
        this.path = path;
        try {
            this.channel = writable
                    ? FileChannel.open(path, StandardOpenOption.READ, StandardOpenOption.WRITE)
                    : FileChannel.open(path, StandardOpenOption.READ);
        } catch (IOException e) {
            throw new KernelException(KernelException.Errno.EINVAL, "mmap of " + path + ": " + e.getMessage());
        }
    }

    public Path path() {
        return path;
    }

    long size() {
        try {
            return channel.size();
        } catch (IOException e) {
            throw new UncheckedIOException("size of mapped file " + path + ": " + e.getMessage(), e);
        }
    }

    /** Reads the page at {@code pos} into {@code page}; bytes past the end stay as they are (zero). */
    void readPage(long pos, MemorySegment page) {
        long n = Math.min(page.byteSize(), size() - pos);
        try {
            var buf = page.asSlice(0, n).asByteBuffer();
            while (buf.hasRemaining()) {
                if (channel.read(buf, pos + buf.position()) < 0) {
                    break;
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException("read of " + path + " at " + pos + ": " + e.getMessage(), e);
        }
    }

    /** Writes back the part of the page that lies inside the file. */
    void writePage(long pos, MemorySegment page) {
        long n = Math.min(page.byteSize(), size() - pos);
        if (n <= 0) {
            return;
        }
        try {
            var buf = page.asSlice(0, n).asByteBuffer();
            while (buf.hasRemaining()) {
                channel.write(buf, pos + buf.position());
            }
        } catch (IOException e) {
            throw new UncheckedIOException("writeback of " + path + " at " + pos + ": " + e.getMessage(), e);
        }
    }

    void close() {
        try {
            channel.close();
        } catch (IOException e) {
            throw new UncheckedIOException("close of " + path + ": " + e.getMessage(), e);
        }
    }
}

package org.peerdirect.launcher;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Instant;

/**
 * One container per distribution folder. Two at once wiped each other's framework cache and sysfs
 * mirror; now the second is refused with a message naming the first (its process id, command and
 * start time). The lock is an OS file lock on {@code <home>/.lock}: it goes with the process, so a
 * container killed with {@code kill -9} leaves nothing that blocks the next start, and the next
 * start removes what the killed one left behind (its swap files in {@code java.io.tmpdir}).
 */
final class RunLock implements AutoCloseable {

    private final FileChannel channel;
    private final FileLock lock;

    private RunLock(FileChannel channel, FileLock lock) {
        this.channel = channel;
        this.lock = lock;
    }

    /** The lock of {@code home}, or {@link HeldException} naming the container that holds it. */
    static RunLock acquire(Path home) throws IOException, HeldException {
        Files.createDirectories(home);
        Path file = home.resolve(".lock");
        FileChannel ch = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.READ,
                StandardOpenOption.WRITE);
        FileLock l;
        try {
            l = ch.tryLock();
        } catch (OverlappingFileLockException e) {
            l = null; // held by this JVM (a test running two launchers): as good as another process
        }
        if (l == null) {
            String holder = Files.readString(file, StandardCharsets.UTF_8).trim();
            ch.close();
            throw new HeldException("another peerdirect container is running from " + home
                    + (holder.isEmpty() ? "" : " (" + holder + ")")
                    + ": leave it first (Ctrl-D or 'shutdown'), or give this one its own folder with --home DIR");
        }
        ProcessHandle me = ProcessHandle.current();
        String who = "pid " + me.pid() + ", " + me.info().commandLine().map(RunLock::shorten).orElse("java")
                + ", started " + Instant.now();
        ch.truncate(0);
        ch.write(ByteBuffer.wrap(who.getBytes(StandardCharsets.UTF_8)), 0);
        ch.force(false);
        removeLeftovers();
        return new RunLock(ch, l);
    }

    private static String shorten(String cmd) {
        return cmd.length() > 80 ? cmd.substring(0, 77) + "..." : cmd;
    }

    /**
     * Swap files of containers that were killed before they could delete them (the kernel's
     * swap device unlinks its file once it is open, so only older versions or a kill during the
     * open leave one): {@code peerdirect-swap-<pid>-...} whose process is gone.
     */
    static void removeLeftovers() {
        Path tmp = Path.of(System.getProperty("java.io.tmpdir"));
        try (var files = Files.newDirectoryStream(tmp, "peerdirect-swap-*")) {
            for (Path f : files) {
                String[] parts = f.getFileName().toString().split("-");
                if (parts.length < 3 || !parts[2].matches("\\d+")) {
                    continue;
                }
                long pid = Long.parseLong(parts[2]);
                if (pid != ProcessHandle.current().pid() && ProcessHandle.of(pid).isEmpty()) {
                    Files.deleteIfExists(f);
                }
            }
        } catch (IOException e) {
            // a leftover we cannot remove costs disk, not correctness
        }
    }

    @Override
    public void close() {
        try {
            if (lock.isValid()) {
                lock.release();
            }
            channel.close();
        } catch (IOException e) {
            // the process ends next; the OS releases the lock with it
        }
    }

    /** Another container holds the lock; the message names it. */
    static final class HeldException extends Exception {
        private static final long serialVersionUID = 1L;

        HeldException(String message) {
            super(message);
        }
    }
}

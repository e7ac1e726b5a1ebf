package org.peerdirect.kernel.mm;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

import org.peerdirect.kernel.mm.KernelException.Errno;

/**
 * The files a process holds open ({@code struct files_struct}, fs/file.c): uverbs contexts,
 * which {@link AddressSpace#exit()} closes before the memory goes.
 *
 * <p>Lock: this object's monitor guards {@code open} and {@code exiting}; files are closed
 * outside it (a close may take driver locks and call back into the process).
 */
final class FilesStruct {

    /** The owning process as messages name it: "process pid (name)". */
    private final String owner;
    private final Set<AutoCloseable> open = new LinkedHashSet<>();
    /** The numbered files ({@code fd_install}); each is in {@link #open} too. */
    private final java.util.TreeMap<Integer, AutoCloseable> fds = new java.util.TreeMap<>();
    /** Set when exit starts: no file opens after that. */
    private boolean exiting;

    FilesStruct(String owner) {
        this.owner = owner;
    }

    /** @see AddressSpace#openFile */
    synchronized void install(AutoCloseable file) {
        if (exiting) {
            throw new KernelException(Errno.EFAULT, owner + " is exiting: it opens no file");
        }
        open.add(file);
    }

    /** @see AddressSpace#closeFile */
    synchronized void remove(AutoCloseable file) {
        open.remove(file);
        fds.values().remove(file);
    }

    /** @see AddressSpace#installFd */
    synchronized int installFd(AutoCloseable file) {
        install(file);
        int fd = 3; // 0, 1, 2 are the standard streams
        for (int used : fds.keySet()) {
            if (used != fd) {
                break;
            }
            fd++;
        }
        fds.put(fd, file);
        return fd;
    }

    /** @see AddressSpace#fget */
    synchronized AutoCloseable fget(int fd) {
        AutoCloseable f = fds.get(fd);
        if (f == null) {
            throw new KernelException(Errno.EBADF, owner + ": fd " + fd + " is not open");
        }
        return f;
    }

    /** Removes the descriptor; the caller closes the file outside this lock. @see AddressSpace#close(int) */
    synchronized AutoCloseable removeFd(int fd) {
        AutoCloseable f = fds.remove(fd);
        if (f == null) {
            throw new KernelException(Errno.EBADF, owner + ": fd " + fd + " is not open");
        }
        open.remove(f);
        return f;
    }

    synchronized int count() {
        return open.size();
    }

    /**
     * Closes the files, newest first, and refuses new ones from now on. The kernel's
     * {@code do_exit} tears the mm down before {@code exit_files}; closing first here means an RDMA
     * object never sees its memory vanish under it (pins would keep the frames anyway). A file whose
     * close fails is logged and forgotten: exit never stops half-way.
     *
     * @see "exit_files() in kernel/exit.c"
     */
    void closeAll() {
        List<AutoCloseable> files;
        synchronized (this) {
            exiting = true;
            files = new ArrayList<>(open);
            open.clear();
            fds.clear();
        }
        Collections.reverse(files);
        for (AutoCloseable f : files) {
            try {
                f.close();
            } catch (Exception e) {
                System.getLogger("org.peerdirect.kernel.mm").log(System.Logger.Level.WARNING,
                        owner + ": closing " + f + " at exit failed", e);
            }
        }
    }
}

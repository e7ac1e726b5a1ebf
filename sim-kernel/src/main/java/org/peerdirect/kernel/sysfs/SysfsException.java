package org.peerdirect.kernel.sysfs;

/** A sysfs operation on a path that does not fit: the message names the path and the problem. */
public class SysfsException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** Which errno the kernel would return. */
    public enum Errno {
        /** no such file or directory. */
        ENOENT,
        /** already exists. */
        EEXIST,
        /** permission denied: not writable. */
        EACCES,
        /** a directory where an attribute is expected, or the other way round. */
        EISDIR,
        /** malformed path or value. */
        EINVAL
    }

    private final Errno errno;
    private final String path;

    public SysfsException(Errno errno, String path, String message) {
        super(path + ": " + message);
        this.errno = errno;
        this.path = path;
    }

    public Errno errno() {
        return errno;
    }

    public String path() {
        return path;
    }
}

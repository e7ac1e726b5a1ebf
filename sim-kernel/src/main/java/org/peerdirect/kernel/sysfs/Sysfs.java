package org.peerdirect.kernel.sysfs;

import java.nio.file.Path;
import java.util.List;
import java.util.function.Consumer;
import java.util.function.Supplier;

import org.osgi.annotation.versioning.ProviderType;

/**
 * The sysfs tree ({@code fs/sysfs}). Paths are relative, '/'-separated, without {@code .} or
 * {@code ..} segments, e.g. {@code kernel/infiniband/memory_peers/example_peer/version}.
 *
 * <p>An attribute's {@code show} supplier is called whenever the attribute is read, through
 * {@link #read} or by the mirror that keeps the file under {@link #root()} current; it must be
 * cheap and must not take locks that are held while calling into sysfs. A writable attribute's
 * {@code store} receives what a user writes, through {@link #write} or by writing the mirrored
 * file; a store that rejects the value throws {@link IllegalArgumentException}.
 *
 * <p>Whoever creates an attribute removes it ({@link #remove}) when it goes away, as
 * {@code kobject_del} does; removing a directory removes everything below it.
 */
@ProviderType
public interface Sysfs {

    /** The folder the tree is mirrored into. */
    Path root();

    /** Creates a read-only attribute (and its parent directories). */
    void attribute(String path, Supplier<String> show);

    /**
     * Creates a read-only attribute whose {@code show} asks a device, as a counter's does
     * ({@code hw_stat_port_show} calls the driver's {@code get_hw_stats}, a firmware command): a
     * {@link #read} calls it every time, but the mirror's periodic refresh does not. The mirror
     * writes its file once, then again only on demand: with the value a {@link #read} produced,
     * when a reader has read the file since it was written (its access time; a file system
     * mounted {@code noatime} keeps the last value), and on {@link #sync}. So a tree nobody reads
     * costs the device nothing, and a reader of the file sees a value at most one of its own
     * reads old.
     */
    void attributeOnDemand(String path, Supplier<String> show);

    /** Creates a writable attribute (and its parent directories). */
    void attribute(String path, Supplier<String> show, Consumer<String> store);

    /** Creates a directory (and its parents); an existing directory is fine. */
    void mkdir(String path);

    /** Current value of an attribute, newline-terminated as sysfs shows it. */
    String read(String path);

    /** Writes a value to a writable attribute. */
    void write(String path, String value);

    /** Names of the entries directly below a directory ("" is the root), sorted. */
    List<String> list(String dir);

    /** True when an attribute or directory exists at the path. */
    boolean exists(String path);

    /** True when a directory exists at the path ("" always). */
    boolean isDirectory(String path);

    /** Removes an attribute or a directory with everything below it. */
    void remove(String path);

    /**
     * Brings every mirrored file up to date now, the {@link #attributeOnDemand} ones too (the
     * mirror does this periodically for the others).
     */
    void sync();

    /**
     * Brings the mirror up to date one last time and leaves the files as they are from now on,
     * also when the service goes away: a snapshot to read with {@code cat} after the container
     * exits ({@code ./peerdirect demo} does this at its end). The tree itself keeps working.
     */
    void freezeMirror();
}

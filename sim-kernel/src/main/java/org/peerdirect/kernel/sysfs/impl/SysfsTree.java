package org.peerdirect.kernel.sysfs.impl;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.FileSystems;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.NavigableMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.function.Consumer;
import java.util.function.Supplier;
import java.util.stream.Stream;

import org.peerdirect.kernel.sysfs.Sysfs;
import org.peerdirect.kernel.sysfs.SysfsException;
import org.peerdirect.kernel.sysfs.SysfsException.Errno;

/**
 * The tree and its file mirror, without OSGi (the component wraps it).
 *
 * <p>Locking: structural changes (create, remove) hold {@code this}; reads of the map are lock
 * free. {@code show}/{@code store} callbacks run without any tree lock held, so a publisher may
 * call back into sysfs from them. {@link #sync()} is serialised by {@code mirrorLock} and is the
 * only writer of files under the root.
 *
 * <p>Two refreshes: {@link #sync()} shows every attribute; {@link #refresh()}, the periodic one,
 * shows an {@link #attributeOnDemand} attribute only when a reader read its file since the mirror
 * wrote it (the file's access time, which the mirror sets back after each write so that the
 * first read after it moves it past the modification time, as relatime and strictatime do), and
 * otherwise writes what the last {@link #read} of it showed, if anything.
 */
public class SysfsTree implements Sysfs {

    private sealed interface Entry permits Dir, Attr {
    }

    private record Dir() implements Entry {
    }

    private record Attr(Supplier<String> show, Consumer<String> store, boolean onDemand) implements Entry {
        boolean writable() {
            return store != null;
        }
    }

    private static final Dir DIR = new Dir();
    private static final boolean POSIX = FileSystems.getDefault().supportedFileAttributeViews().contains("posix");

    private final Path root;
    private final Consumer<String> warn;
    /** Full path → entry; "" is the root directory. */
    private final NavigableMap<String, Entry> entries = new ConcurrentSkipListMap<>();
    private final Object mirrorLock = new Object();
    /** Guarded by mirrorLock: the mirror no longer changes (see freezeMirror). */
    private boolean frozen;
    /** Guarded by mirrorLock: what the mirror last wrote to each attribute file. */
    private final Map<String, String> mirrored = new HashMap<>();
    /** Guarded by mirrorLock: directories the mirror created. */
    private final TreeSet<String> mirroredDirs = new TreeSet<>();
    /** What the last {@link #read} of an on-demand attribute showed, for the mirror's next refresh to write. */
    private final Map<String, String> shown = new java.util.concurrent.ConcurrentHashMap<>();

    public SysfsTree(Path root, Consumer<String> warn) {
        this.root = root.toAbsolutePath().normalize();
        this.warn = warn;
        entries.put("", DIR);
        try {
            Files.createDirectories(this.root);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot create the sysfs mirror root " + this.root + ": " + e.getMessage(), e);
        }
        removeSnapshot();
    }

    /** Lists what a frozen mirror left behind, so the next start removes exactly that. */
    private static final String SNAPSHOT = ".peerdirect-sysfs-snapshot";

    /** A new kernel boots: what an earlier run's {@link #freezeMirror} left is removed. */
    private void removeSnapshot() {
        Path marker = root.resolve(SNAPSHOT);
        if (!Files.exists(marker)) {
            return;
        }
        try {
            List<String> lines = Files.readAllLines(marker);
            for (String l : lines) {
                if (l.startsWith("f ")) {
                    deleteQuietly(file(l.substring(2)));
                }
            }
            for (String l : lines.reversed()) {
                if (l.startsWith("d ")) {
                    deleteTree(file(l.substring(2)));
                }
            }
            Files.deleteIfExists(marker);
        } catch (IOException e) {
            warn.accept("sysfs: could not remove the snapshot of an earlier run under " + root + ": " + e.getMessage());
        }
    }

    @Override
    public Path root() {
        return root;
    }

    static String check(String path) {
        if (path == null) {
            throw new SysfsException(Errno.EINVAL, "null", "path is null");
        }
        if (path.isEmpty()) {
            return path;
        }
        if (path.startsWith("/") || path.endsWith("/")) {
            throw new SysfsException(Errno.EINVAL, path, "paths are relative and do not end in '/'");
        }
        for (String seg : path.split("/", -1)) {
            if (seg.isEmpty() || seg.equals(".") || seg.equals("..") || seg.indexOf('\\') >= 0 || seg.indexOf('\0') >= 0) {
                throw new SysfsException(Errno.EINVAL, path, "bad path segment '" + seg + "'");
            }
        }
        return path;
    }

    private static String parent(String path) {
        int i = path.lastIndexOf('/');
        return i < 0 ? "" : path.substring(0, i);
    }

    @Override
    public void attribute(String path, Supplier<String> show) {
        create(path, new Attr(requireShow(path, show), null, false));
    }

    @Override
    public void attributeOnDemand(String path, Supplier<String> show) {
        create(path, new Attr(requireShow(path, show), null, true));
    }

    @Override
    public void attribute(String path, Supplier<String> show, Consumer<String> store) {
        if (store == null) {
            throw new SysfsException(Errno.EINVAL, path, "a writable attribute needs a store function");
        }
        create(path, new Attr(requireShow(path, show), store, false));
    }

    private static Supplier<String> requireShow(String path, Supplier<String> show) {
        if (show == null) {
            throw new SysfsException(Errno.EINVAL, path, "an attribute needs a show function");
        }
        return show;
    }

    @Override
    public void mkdir(String path) {
        create(path, DIR);
    }

    private synchronized void create(String path, Entry e) {
        check(path);
        if (path.isEmpty()) {
            if (e instanceof Attr) {
                throw new SysfsException(Errno.EISDIR, "/", "the root is a directory");
            }
            return;
        }
        Entry existing = entries.get(path);
        if (existing != null) {
            if (existing instanceof Dir && e instanceof Dir) {
                return;
            }
            throw new SysfsException(Errno.EEXIST, path, "already exists");
        }
        // parents: every ancestor must be (or become) a directory
        List<String> missing = new ArrayList<>();
        for (String p = parent(path); ; p = parent(p)) {
            Entry pe = entries.get(p);
            if (pe instanceof Attr) {
                throw new SysfsException(Errno.EEXIST, path, "parent " + p + " is an attribute, not a directory");
            }
            if (pe == null) {
                missing.add(p);
            }
            if (p.isEmpty()) {
                break;
            }
        }
        for (String p : missing) {
            entries.put(p, DIR);
        }
        entries.put(path, e);
    }

    private Attr attr(String path) {
        Entry e = entries.get(check(path));
        if (e == null) {
            throw new SysfsException(Errno.ENOENT, path, "no such attribute");
        }
        if (e instanceof Attr a) {
            return a;
        }
        throw new SysfsException(Errno.EISDIR, path, "is a directory");
    }

    @Override
    public String read(String path) {
        Attr a = attr(path);
        String v = String.valueOf(a.show().get());
        v = v.endsWith("\n") ? v : v + "\n";
        if (a.onDemand()) {
            shown.put(path, v);
        }
        return v;
    }

    @Override
    public void write(String path, String value) {
        Attr a = attr(path);
        if (!a.writable()) {
            throw new SysfsException(Errno.EACCES, path, "attribute is read-only");
        }
        a.store().accept(value == null ? "" : value.strip());
    }

    @Override
    public List<String> list(String dir) {
        Entry e = entries.get(check(dir));
        if (e == null) {
            throw new SysfsException(Errno.ENOENT, dir, "no such directory");
        }
        if (e instanceof Attr) {
            throw new SysfsException(Errno.EINVAL, dir, "is an attribute, not a directory");
        }
        String prefix = dir.isEmpty() ? "" : dir + "/";
        List<String> out = new ArrayList<>();
        for (String k : entries.tailMap(prefix, false).keySet()) {
            if (!k.startsWith(prefix)) {
                break;
            }
            if (!k.isEmpty() && k.indexOf('/', prefix.length()) < 0) {
                out.add(k.substring(prefix.length()));
            }
        }
        return out;
    }

    @Override
    public boolean exists(String path) {
        return entries.containsKey(check(path));
    }

    @Override
    public boolean isDirectory(String path) {
        return entries.get(check(path)) instanceof Dir;
    }

    @Override
    public synchronized void remove(String path) {
        check(path);
        if (path.isEmpty()) {
            throw new SysfsException(Errno.EINVAL, "/", "the root cannot be removed");
        }
        if (entries.remove(path) == null) {
            throw new SysfsException(Errno.ENOENT, path, "no such file or directory");
        }
        entries.subMap(path + "/", true, path + "/\uffff", true).clear();
        shown.keySet().removeIf(k -> k.equals(path) || k.startsWith(path + "/"));
    }

    /** Brings the files under the root in line with the tree; picks up values users wrote into writable files. */
    @Override
    public void sync() {
        mirrorAll(true);
    }

    /**
     * The periodic refresh: as {@link #sync()}, but an on-demand attribute's show is called only
     * when its file was read since the mirror wrote it (or is missing).
     */
    public void refresh() {
        mirrorAll(false);
    }

    private void mirrorAll(boolean full) {
        synchronized (mirrorLock) {
            if (frozen) {
                return;
            }
            TreeSet<String> dirs = new TreeSet<>();
            Map<String, Attr> attrs = new HashMap<>();
            entries.forEach((k, e) -> {
                if (!k.isEmpty()) {
                    if (e instanceof Attr a) {
                        attrs.put(k, a);
                    } else {
                        dirs.add(k);
                    }
                }
            });
            // removed entries first (deepest first), so a name can change kind
            for (String k : new ArrayList<>(mirrored.keySet())) {
                if (!attrs.containsKey(k)) {
                    deleteQuietly(file(k));
                    mirrored.remove(k);
                }
            }
            for (String d : mirroredDirs.descendingSet()) {
                if (!dirs.contains(d)) {
                    deleteTree(file(d));
                }
            }
            mirroredDirs.retainAll(dirs);
            for (String d : dirs) {
                if (mirroredDirs.add(d)) {
                    mkdirs(file(d));
                }
            }
            attrs.forEach((k, a) -> {
                if (a.onDemand()) {
                    mirrorOnDemand(k, a, full);
                } else {
                    mirror(k, a);
                }
            });
        }
    }

    /**
     * An on-demand attribute's file: left alone unless {@code full}, never written, read since
     * written, or a {@link #read} left a value. After a write its access time is set back before
     * its modification time, so the next read by anyone moves it (the mirror's own stat does not).
     */
    private void mirrorOnDemand(String path, Attr a, boolean full) {
        assert Thread.holdsLock(mirrorLock);
        String last = mirrored.get(path);
        Path f = file(path);
        String now = full ? null : shown.remove(path);
        if (now == null) {
            if (!full && last != null && !readSinceWritten(f)) {
                return; // nobody asked: the device is not asked either
            }
            try {
                now = read(path);
            } catch (RuntimeException e) {
                now = "<error: " + e.getMessage() + ">\n";
            }
            shown.remove(path);
        }
        if (!now.equals(last)) {
            writeAtomically(f, now, false);
            mirrored.put(path, now);
        }
        markUnread(f);
    }

    /** The file's access time is not before its modification time: someone read it since {@link #markUnread}. */
    private boolean readSinceWritten(Path f) {
        try {
            java.nio.file.attribute.BasicFileAttributes t = Files.readAttributes(f, java.nio.file.attribute.BasicFileAttributes.class);
            return t.lastAccessTime().compareTo(t.lastModifiedTime()) >= 0;
        } catch (IOException e) {
            return true; // gone or unreadable: write it again
        }
    }

    /** Sets the access time one second before the modification time (see {@link #readSinceWritten}). */
    private void markUnread(Path f) {
        try {
            var view = Files.getFileAttributeView(f, java.nio.file.attribute.BasicFileAttributeView.class);
            java.nio.file.attribute.FileTime m = view.readAttributes().lastModifiedTime();
            view.setTimes(null, java.nio.file.attribute.FileTime.fromMillis(m.toMillis() - 1000), null);
        } catch (IOException e) {
            warn.accept("sysfs: cannot set the access time of " + f + ": " + e.getMessage());
        }
    }

    private void mirror(String path, Attr a) {
        String last = mirrored.get(path);
        Path f = file(path);
        if (a.writable() && last != null) {
            try {
                String onDisk = Files.readString(f);
                if (!onDisk.equals(last)) {
                    last = null; // the file no longer shows the value: rewrite it whatever the store did
                    try {
                        a.store().accept(onDisk.strip());
                    } catch (RuntimeException e) {
                        warn.accept("sysfs: write to " + path + " rejected: " + e.getMessage());
                    }
                }
            } catch (NoSuchFileException e) {
                // deleted by someone: rewritten below
            } catch (IOException e) {
                warn.accept("sysfs: cannot read " + f + ": " + e.getMessage());
            }
        }
        String now;
        try {
            now = read(path);
        } catch (RuntimeException e) {
            now = "<error: " + e.getMessage() + ">\n";
        }
        if (!now.equals(last)) {
            writeAtomically(f, now, a.writable());
            mirrored.put(path, now);
        }
    }

    private Path file(String path) {
        return path.isEmpty() ? root : root.resolve(path);
    }

    private void writeAtomically(Path f, String content, boolean writable) {
        try {
            Files.createDirectories(f.getParent());
            Path tmp = f.resolveSibling("." + f.getFileName() + ".tmp");
            Files.writeString(tmp, content);
            if (POSIX) {
                Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString(writable ? "rw-r--r--" : "r--r--r--"));
            }
            try {
                Files.move(tmp, f, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
            } catch (AtomicMoveNotSupportedException e) {
                Files.move(tmp, f, StandardCopyOption.REPLACE_EXISTING);
            }
        } catch (IOException e) {
            warn.accept("sysfs: cannot write " + f + ": " + e.getMessage());
        }
    }

    private void mkdirs(Path d) {
        try {
            Files.createDirectories(d);
        } catch (IOException e) {
            warn.accept("sysfs: cannot create " + d + ": " + e.getMessage());
        }
    }

    private void deleteQuietly(Path f) {
        try {
            Files.deleteIfExists(f);
        } catch (IOException e) {
            warn.accept("sysfs: cannot delete " + f + ": " + e.getMessage());
        }
    }

    private void deleteTree(Path d) {
        if (!Files.exists(d)) {
            return;
        }
        try (Stream<Path> s = Files.walk(d)) {
            s.sorted(Comparator.reverseOrder()).forEach(this::deleteQuietly);
        } catch (IOException e) {
            warn.accept("sysfs: cannot delete " + d + ": " + e.getMessage());
        }
    }

    @Override
    public void freezeMirror() {
        synchronized (mirrorLock) {
            sync();
            frozen = true;
            List<String> lines = new ArrayList<>();
            mirroredDirs.forEach(d -> lines.add("d " + d));
            mirrored.keySet().forEach(f -> lines.add("f " + f));
            try {
                Files.write(root.resolve(SNAPSHOT), lines);
            } catch (IOException e) {
                warn.accept("sysfs: could not record the snapshot under " + root + ": " + e.getMessage());
            }
        }
    }

    /** True once {@link #freezeMirror} ran. */
    public boolean mirrorFrozen() {
        synchronized (mirrorLock) {
            return frozen;
        }
    }

    /** Removes every file the mirror wrote (the root folder itself stays). */
    public void clearMirror() {
        synchronized (mirrorLock) {
            for (String k : mirrored.keySet()) {
                deleteQuietly(file(k));
            }
            mirrored.clear();
            for (String d : mirroredDirs.descendingSet()) {
                deleteTree(file(d));
            }
            mirroredDirs.clear();
        }
    }
}

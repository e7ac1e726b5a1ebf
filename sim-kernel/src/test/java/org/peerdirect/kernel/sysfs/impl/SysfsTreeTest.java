package org.peerdirect.kernel.sysfs.impl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.kernel.sysfs.SysfsException;
import org.peerdirect.kernel.sysfs.SysfsException.Errno;

class SysfsTreeTest {

    @TempDir
    Path dir;

    private final List<String> warnings = new ArrayList<>();

    @Test
    void attributesAreReadThroughTheTreeAndTheMirroredFiles() throws Exception {
        SysfsTree t = new SysfsTree(dir, warnings::add);
        AtomicLong allocs = new AtomicLong(3);
        t.attribute("kernel/infiniband/memory_peers/example/num_alloc_mrs", () -> Long.toString(allocs.get()));
        assertEquals("3\n", t.read("kernel/infiniband/memory_peers/example/num_alloc_mrs"));
        assertTrue(t.isDirectory("kernel/infiniband"));
        assertEquals(List.of("memory_peers"), t.list("kernel/infiniband"));

        t.sync();
        Path f = dir.resolve("kernel/infiniband/memory_peers/example/num_alloc_mrs");
        assertEquals("3\n", Files.readString(f));
        allocs.set(42);
        t.sync();
        assertEquals("42\n", Files.readString(f), "the mirror follows the value");
        assertTrue(warnings.isEmpty(), warnings::toString);
    }

    /**
     * A counter's file (an on-demand attribute): the periodic refresh shows it once, then not
     * again while nobody reads; a read through the tree shows it fresh and the mirror writes that
     * value without asking again; a read of the file makes the next refresh ask; sync asks always.
     */
    @Test
    void anOnDemandAttributeIsShownOnlyWhenSomeoneReadsIt() throws Exception {
        SysfsTree t = new SysfsTree(dir, warnings::add);
        AtomicLong value = new AtomicLong(7);
        AtomicLong shows = new AtomicLong();
        t.attributeOnDemand("class/infiniband/d/ports/1/hw_counters/c", () -> {
            shows.incrementAndGet();
            return Long.toString(value.get());
        });
        t.attribute("class/infiniband/d/fw_ver", () -> "1.0");
        Path f = dir.resolve("class/infiniband/d/ports/1/hw_counters/c");
        t.refresh();
        assertEquals(1, shows.get(), "written once, at its first refresh");
        value.set(8);
        for (int i = 0; i < 50; i++) {
            t.refresh();
        }
        assertEquals(1, shows.get(), "nobody read: no show over 50 refreshes");
        assertEquals("1.0\n", Files.readString(dir.resolve("class/infiniband/d/fw_ver")), "the other attributes are mirrored as before");

        assertEquals("8\n", t.read("class/infiniband/d/ports/1/hw_counters/c"), "a read through the tree is fresh");
        assertEquals(2, shows.get());
        t.refresh();
        assertEquals(2, shows.get(), "the mirror writes what the read showed, without asking again");
        assertEquals("8\n", Files.readString(f));
        value.set(9);
        t.sync();
        assertEquals(3, shows.get(), "sync brings every file up to date");
        assertEquals("9\n", Files.readString(f));

        // the file was just read: where the file system records reads, the next refresh asks
        var times = Files.readAttributes(f, java.nio.file.attribute.BasicFileAttributes.class);
        org.junit.jupiter.api.Assumptions.assumeTrue(times.lastAccessTime().compareTo(times.lastModifiedTime()) >= 0,
                "the file system under " + dir + " does not record reads (noatime): the mirror cannot see its readers");
        value.set(10);
        t.refresh();
        assertEquals(4, shows.get(), "a reader of the file made the refresh ask");
        t.refresh();
        assertEquals(4, shows.get(), "no read since: not asked");
        assertEquals("10\n", Files.readString(f), "the reader's next read sees it");
        t.refresh();
        assertEquals(5, shows.get(), "that read: asked again");
        assertTrue(warnings.isEmpty(), warnings::toString);
    }

    @Test
    void removingADirectoryRemovesItsSubtreeAndItsFiles() throws Exception {
        SysfsTree t = new SysfsTree(dir, warnings::add);
        t.attribute("a/b/x", () -> "1");
        t.attribute("a/b/c/y", () -> "2");
        t.attribute("a/z", () -> "3");
        t.sync();
        assertTrue(Files.exists(dir.resolve("a/b/c/y")));
        t.remove("a/b");
        assertFalse(t.exists("a/b/x"));
        assertFalse(t.exists("a/b/c/y"));
        assertTrue(t.exists("a/z"));
        t.sync();
        assertFalse(Files.exists(dir.resolve("a/b")));
        assertEquals("3\n", Files.readString(dir.resolve("a/z")));
        t.clearMirror();
        assertFalse(Files.exists(dir.resolve("a")), "nothing left behind after the mirror is cleared");
    }

    @Test
    void writableAttributesTakeWritesFromTheApiAndFromTheFile() throws Exception {
        SysfsTree t = new SysfsTree(dir, warnings::add);
        AtomicReference<String> value = new AtomicReference<>("off");
        t.attribute("module/debug", value::get, v -> {
            if (!v.equals("on") && !v.equals("off")) {
                throw new IllegalArgumentException("expected on or off, got '" + v + "'");
            }
            value.set(v);
        });
        t.write("module/debug", "on\n");
        assertEquals("on", value.get());
        t.sync();
        Files.writeString(dir.resolve("module/debug"), "off\n");
        t.sync();
        assertEquals("off", value.get(), "a write to the mirrored file reaches the store function");

        Files.writeString(dir.resolve("module/debug"), "maybe\n");
        t.sync();
        assertEquals("off", value.get());
        assertEquals(1, warnings.size(), "the rejected file write is reported");
        assertTrue(warnings.get(0).contains("expected on or off"), warnings::toString);
        assertEquals("off\n", Files.readString(dir.resolve("module/debug")), "the file shows the real value again");
    }

    @Test
    void badInputNamesThePathAndTheProblem() {
        SysfsTree t = new SysfsTree(dir, warnings::add);
        t.attribute("ro", () -> "1");
        assertErrno(Errno.EACCES, () -> t.write("ro", "2"));
        assertErrno(Errno.ENOENT, () -> t.read("missing"));
        assertErrno(Errno.EEXIST, () -> t.attribute("ro", () -> "again"));
        assertErrno(Errno.EEXIST, () -> t.attribute("ro/child", () -> "x"));
        assertErrno(Errno.EINVAL, () -> t.attribute("../escape", () -> "x"));
        assertErrno(Errno.EINVAL, () -> t.attribute("/abs", () -> "x"));
        assertErrno(Errno.EINVAL, () -> t.attribute("a//b", () -> "x"));
        assertErrno(Errno.ENOENT, () -> t.remove("nothing"));
        assertErrno(Errno.EISDIR, () -> {
            t.mkdir("d");
            t.read("d");
        });
        assertEquals("1\n", t.read("ro"), "failed calls change nothing");
    }

    @Test
    void aFrozenMirrorOutlivesTheTreeUntilTheNextBoot() throws Exception {
        List<String> warnings = new ArrayList<>();
        SysfsTree t = new SysfsTree(dir, warnings::add);
        Path user = Files.writeString(dir.resolve("not-ours.txt"), "keep me");
        t.attribute("kernel/infiniband/memory_peers/x/num_alloc_mrs", () -> "3");
        t.freezeMirror();
        t.remove("kernel/infiniband/memory_peers/x");
        t.sync();
        Path f = dir.resolve("kernel/infiniband/memory_peers/x/num_alloc_mrs");
        assertTrue(t.mirrorFrozen());
        assertEquals("3\n", Files.readString(f), "the snapshot stays after removal and shutdown");
        SysfsTree next = new SysfsTree(dir, warnings::add);
        assertFalse(Files.exists(f), "the next boot removes the snapshot");
        assertFalse(Files.exists(dir.resolve("kernel")));
        assertEquals("keep me", Files.readString(user), "and only what the snapshot listed");
        assertFalse(next.mirrorFrozen());
        assertEquals(List.of(), warnings);
    }

    private static void assertErrno(Errno errno, Runnable r) {
        SysfsException e = assertThrows(SysfsException.class, r::run);
        assertEquals(errno, e.errno(), e.getMessage());
    }
}

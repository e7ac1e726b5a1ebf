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

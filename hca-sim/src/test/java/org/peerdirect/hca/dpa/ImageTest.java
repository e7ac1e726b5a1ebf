package org.peerdirect.hca.dpa;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.ref.WeakReference;
import java.util.Arrays;

import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.peerdirect.hca.dpa.progs.BadProgs;
import org.peerdirect.hca.dpa.progs.GoodProgs;
import org.peerdirect.hca.dpa.progs.RtosProgs;

/** Images: the format, the loader (a class loader per process, released at destroy) and the verifier's rules. */
class ImageTest extends DpaRig {

    @BeforeEach
    void up() {
        start(DpaConfig.test(4, 1));
    }

    private String refused(Class<?> c) {
        byte[] img = new ImagePackager().add(c).global("run", c, "run").pack();
        ImageRejected e = assertThrows(ImageRejected.class, () -> load(UID, img, 4096));
        assertTrue(e.getMessage().contains(c.getName().replace('.', '/') + "."), e.getMessage());
        return e.rule;
    }

    @Test
    void eachVerifierRuleIsNamedWithClassAndMethod() {
        assertEquals("reflection", refused(BadProgs.Reflection.class));
        assertEquals("threads", refused(BadProgs.Threads.class));
        assertEquals("threads", refused(BadProgs.Monitor.class));
        assertEquals("system", refused(BadProgs.SystemCall.class));
        assertEquals("io", refused(BadProgs.Io.class));
        assertEquals("host-package", refused(BadProgs.Host.class));
        assertEquals("mutable-static", refused(BadProgs.MutableStatic.class));
        assertEquals("mutable-static", refused(BadProgs.StaticArray.class));
        assertEquals("catch-throwable", refused(BadProgs.CatchThrowable.class));
        assertEquals("catch-throwable", refused(BadProgs.Finally.class));
        assertEquals("isa-internal", refused(BadProgs.HartDirect.class));
        assertEquals("loop-without-call", refused(BadProgs.LoopWithoutCall.class));
        assertEquals(java.util.List.of(), unit.leaks(), "a refused image leaves nothing");
    }

    @Test
    void malformedImagesAreRefusedAsSuch() throws Exception {
        byte[] good = RtosTest.image();
        byte[] magic = good.clone();
        magic[0] = 'X';
        assertEquals("malformed-image", assertThrows(ImageRejected.class, () -> load(UID, magic, 4096)).rule);
        byte[] cut = Arrays.copyOf(good, good.length / 2);
        assertEquals("malformed-image", assertThrows(ImageRejected.class, () -> load(UID, cut, 4096)).rule);
        byte[] garbage = new ImagePackager().add("p.Garbage", new byte[] {1, 2, 3, 4}).pack();
        assertEquals("malformed-class", assertThrows(ImageRejected.class, () -> load(UID, garbage, 4096)).rule);
        byte[] noMethod = new ImagePackager().add(RtosProgs.class).global("x", RtosProgs.class, "nosuch").pack();
        ImageRejected e = assertThrows(ImageRejected.class, () -> load(UID, noMethod, 4096));
        assertTrue(e.getMessage().contains("symbol x") && e.rule.equals("malformed-image"), e.getMessage());
        byte[] wrongShape = new ImagePackager().add(RtosProgs.class).rpc("count", RtosProgs.class, "count", 8).pack();
        assertEquals("malformed-image", assertThrows(ImageRejected.class, () -> load(UID, wrongShape, 4096)).rule,
                "an rpc entry must return long");
        int other = unit.memCreate(UID + 1, good.length);
        assertThrows(IllegalArgumentException.class, () -> unit.processCreate(UID, 1, 1, other, good.length, 4096),
                "an image in another uid's DPA_MEM");
        unit.memDestroy(other);
    }

    @Test
    void recordsConstantsAndMathPassAndRun() throws Exception {
        byte[] img = new ImagePackager().add(GoodProgs.class).add(GoodProgs.Pair.class)
                .rpc("sum", GoodProgs.class, "sum", 16).pack();
        int pid = load(UID, img, 4096);
        long heap = unit.heapBase(pid);
        poke(heap, 30);
        poke(heap + 8, 7);
        int t = unit.threadCreate(pid, "sum", heap, 0, Affinity.ANY, false);
        unit.threadRun(t);
        unit.trigger(t);
        settle();
        assertEquals(42, unit.rpcResult(t));
        unit.processDestroy(pid);
    }

    @Test
    void stringConcatenationAndRecordMethodsWork() throws Exception {
        byte[] img = new ImagePackager().add(GoodProgs.class).add(GoodProgs.Pair.class)
                .rpc("strings", GoodProgs.class, "strings", 16).pack();
        int pid = load(UID, img, 4096);
        long heap = unit.heapBase(pid);
        poke(heap, 30);
        poke(heap + 8, 7);
        int t = unit.threadCreate(pid, "strings", heap, 0, Affinity.ANY, false);
        unit.threadRun(t);
        unit.trigger(t);
        settle();
        assertEquals(ProcessStatus.OK, unit.processStatus(pid), unit.crashData(pid));
        assertEquals(1000 + "pair Pair[a=30, b=2] x=7".length(), unit.rpcResult(t));
    }

    @Test
    void eachProcessHasItsOwnLoaderReleasedAtDestroy() throws Exception {
        int a = load(UID, RtosTest.image(), 4096);
        int b = load(UID, RtosTest.image(), 4096);
        Class<?> ca = unit.process(a).loader.loadClass(RtosProgs.class.getName());
        Class<?> cb = unit.process(b).loader.loadClass(RtosProgs.class.getName());
        assertNotSame(ca, cb, "each process defines its own classes (its own statics)");
        assertNotSame(RtosProgs.class, ca, "not the host's class");
        assertThrows(ClassNotFoundException.class, () -> unit.process(a).loader.loadClass(DpaUnit.class.getName()),
                "the silicon is not visible to DPA code");
        // a plain store: the memory model keeps its site (a frame of the image's class) until the destroy
        int t = unit.threadCreate(a, "setFlag", unit.heapBase(a), 0, Affinity.ANY, false);
        unit.threadRun(t);
        unit.trigger(t);
        settle();
        WeakReference<ClassLoader> ref = new WeakReference<>(unit.process(a).loader);
        ca = null;
        unit.processDestroy(a);
        for (int i = 0; i < 50 && ref.get() != null; i++) {
            System.gc();
        }
        assertNull(ref.get(), "the destroyed process's loader became unreachable");
        unit.processDestroy(b);
    }
}

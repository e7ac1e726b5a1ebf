package org.peerdirect.dpacc.example;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import static org.junit.jupiter.api.Assertions.assertFalse;

import java.io.InputStream;
import java.lang.classfile.Attributes;
import java.lang.classfile.ClassFile;
import java.lang.classfile.constantpool.ClassEntry;
import java.lang.classfile.constantpool.PoolEntry;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.peerdirect.dpacc.DpaBench;
import org.peerdirect.flexio.FlexioApp;
import org.peerdirect.flexio.FlexioFunc;
import org.peerdirect.hca.dpa.Affinity;

/**
 * The example app as the build made it: the stubs the processor generated, the image the
 * packager linked into test-classes. Packed arguments go through the silicon (image loaded into
 * a DPA process, the RPC entry called on the argument buffer) and must give what the user's
 * method gives on the host.
 */
class VecDevTest {

    private static final ValueLayout.OfInt LE32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfLong LE64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfShort LE16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private final VecDev.Vec vec = new VecDev.Vec(-7, 0x0102_0304_0506_0708L, (short) -300, true, (byte) -5);

    @Test
    void theAppRegistersEveryEntryPointWithItsKindAndArgbuf() {
        FlexioApp app = VecDevStubs.APP;
        assertEquals("dpacc_vec", app.name());
        assertEquals(List.of("weigh", "nested", "store", "none", "tick"), app.funcs().stream().map(FlexioFunc::name).toList());
        assertEquals(new FlexioFunc.Kind[] {FlexioFunc.Kind.RPC, FlexioFunc.Kind.RPC, FlexioFunc.Kind.RPC,
            FlexioFunc.Kind.RPC, FlexioFunc.Kind.GLOBAL}.length, app.funcs().size());
        assertEquals(FlexioFunc.Kind.GLOBAL, app.func("tick").kind());
        assertEquals(48, VecDevStubs.WEIGH.argbufSize());
        assertEquals(40, VecDevStubs.NESTED.argbufSize());
        assertEquals(16, VecDevStubs.STORE.argbufSize());
        assertEquals(0, VecDevStubs.NONE.argbufSize());
        assertEquals(8, VecDevStubs.TICK.argbufSize());
        assertTrue(app.imageSize() > 0);
    }

    @Test
    void thePackerLaysARecordAndPrimitivesOutAsACStruct() {
        byte[] b = VecDevStubs.packWeigh(vec, 0x11223344, 0xdead_beef_0000L, 'Z');
        MemorySegment s = MemorySegment.ofArray(b);
        assertEquals(48, b.length);
        assertEquals(-7, s.get(LE32, 0));
        assertEquals(0x0102_0304_0506_0708L, s.get(LE64, 8));
        assertEquals((short) -300, s.get(LE16, 16));
        assertEquals(1, s.get(ValueLayout.JAVA_BYTE, 18));
        assertEquals(-5, s.get(ValueLayout.JAVA_BYTE, 19));
        assertEquals(0x11223344, s.get(LE32, 24));
        assertEquals(0xdead_beef_0000L, s.get(LE64, 32));
        assertEquals('Z', (char) s.get(LE16, 40));
        assertEquals(8, b[0x08], "little-endian: the long's low byte first");
        assertArrayEquals(b, VecDevStubs.WEIGH.packArgs(vec, 0x11223344, 0xdead_beef_0000L, 'Z'));
    }

    @Test
    void theUntypedPackerChecksCountAndTypesNamingTheArgument() {
        var few = assertThrows(IllegalArgumentException.class, () -> VecDevStubs.WEIGH.packArgs(vec, 1, 2L));
        assertTrue(few.getMessage().contains("weigh(") && few.getMessage().contains("takes 4 arguments, got 3"), few.getMessage());
        var type = assertThrows(IllegalArgumentException.class, () -> VecDevStubs.WEIGH.packArgs(vec, 1L, 2L, 'c'));
        assertTrue(type.getMessage().contains("argument 1 (k) of weigh must be int"), type.getMessage());
        var rec = assertThrows(IllegalArgumentException.class, () -> VecDevStubs.WEIGH.packArgs("vec", 1, 2L, 'c'));
        assertTrue(rec.getMessage().contains("argument 0 (v) of weigh must be " + VecDev.Vec.class.getName()), rec.getMessage());
        var nul = assertThrows(IllegalArgumentException.class,
                () -> VecDevStubs.NESTED.packArgs(new VecDev.Pair('t', null), (byte) 1));
        assertTrue(nul.getMessage().contains("p.v of nested is null"), nul.getMessage());
        // lossless widening is accepted: an int literal where a long is declared
        assertArrayEquals(VecDevStubs.packStore(5, 6), VecDevStubs.STORE.packArgs(5, 6));
    }

    @Test
    void theAnnotationsStayInTheClassFileAndTheVerifierAcceptsTheImage() throws Exception {
        byte[] b;
        try (InputStream in = VecDev.class.getResourceAsStream("VecDev.class")) {
            b = in.readAllBytes();
        }
        var invisible = ClassFile.of().parse(b).findAttribute(Attributes.runtimeInvisibleAnnotations()).orElseThrow();
        assertEquals("Lorg/peerdirect/dpacc/DpaApp;", invisible.annotations().get(0).className().stringValue());
        try (DpaBench dpa = new DpaBench()) {
            int pid = dpa.load(VecDevStubs.APP.image(), 4096); // the loader verifies: class retention is no reference
            dpa.unit.processDestroy(pid);
        }
    }

    @Test
    void theStubsNeedNothingOfDpaccOrTheSiliconAtRunTime() throws Exception {
        for (Class<?> c : List.of(VecDevStubs.class, VecDevTrampolines.class)) {
            byte[] b;
            try (InputStream in = c.getResourceAsStream(c.getSimpleName() + ".class")) {
                b = in.readAllBytes();
            }
            for (PoolEntry e : ClassFile.of().parse(b).constantPool()) {
                if (e instanceof ClassEntry ce) {
                    String n = ce.asInternalName();
                    assertFalse(n.startsWith("org/peerdirect/dpacc/") && !n.startsWith("org/peerdirect/dpacc/example/"),
                            c.getSimpleName() + " refers to dpacc's " + n);
                    boolean isa = n.startsWith("org/peerdirect/hca/dpa/isa/");
                    assertFalse(n.startsWith("org/peerdirect/hca/") && !(isa && c == VecDevTrampolines.class),
                            c.getSimpleName() + " refers to the silicon's " + n);
                }
            }
        }
    }

    @Test
    void packedArgumentsReachTheUsersMethodThroughTheTrampolineOnTheDpa() throws Exception {
        VecDev.Pair pair = new VecDev.Pair('\u00e9', vec);
        try (DpaBench dpa = new DpaBench()) {
            int pid = dpa.load(VecDevStubs.APP.image(), 4096);
            assertEquals(VecDev.weigh(vec, 0x11223344, 0xdead_beef_0000L, 'Z'),
                    dpa.call(pid, "weigh", VecDevStubs.WEIGH.packArgs(vec, 0x11223344, 0xdead_beef_0000L, 'Z')));
            assertEquals(VecDev.nested(pair, (byte) -128), dpa.call(pid, "nested", VecDevStubs.packNested(pair, (byte) -128)));
            assertEquals(42, dpa.call(pid, "none", VecDevStubs.packNone()));
            long word = dpa.unit.heapBase(pid) + 1024;
            assertEquals(0x7777 + 1, dpa.call(pid, "store", VecDevStubs.packStore(word, 0x7777)));

            long counter = dpa.unit.heapBase(pid) + 2048;
            int t = dpa.unit.threadCreate(pid, "tick", counter, 0, Affinity.ANY, false);
            dpa.unit.threadRun(t);
            dpa.unit.trigger(t);
            dpa.settle();
            MemorySegment back = MemorySegment.ofArray(new byte[8]);
            dpa.unit.nicRead(counter, back, 0, 8, "the tick count");
            assertEquals(1, back.get(LE64, 0), "the handler ran once through its trampoline");
            dpa.unit.threadDestroy(t);
            dpa.unit.processDestroy(pid);
        }
    }
}

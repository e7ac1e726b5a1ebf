package org.peerdirect.dpacc.example;

import org.peerdirect.dpacc.DpaApp;
import org.peerdirect.dpacc.DpaGlobal;
import org.peerdirect.dpacc.DpaRpc;
import org.peerdirect.hca.dpa.isa.Dpa;

/**
 * The tests' example DPA application, compiled through dpacc's processor and linked by the
 * packager's execution in this module's pom ({@code META-INF/dpa/dpacc_vec.dpaimg} in test-classes).
 * Its RPCs weigh every argument differently, so a byte the packer puts where the trampoline does
 * not read it changes the result.
 */
@DpaApp("dpacc_vec")
public final class VecDev {

    private VecDev() {
    }

    /** Members of every size, so the layout needs padding: x@0 y@8 z@16 flag@18 b@19, 24 bytes. */
    @DpaGlobal
    public record Vec(int x, long y, short z, boolean flag, byte b) {
    }

    /** A record in a record: tag@0, v@8 (aligned to Vec's 8), 32 bytes. */
    @DpaGlobal
    public record Pair(char tag, Vec v) {
    }

    static long mix(Vec v) {
        return v.x() * 1_000_003L + v.y() * 31 + v.z() * 17 + (v.flag() ? 5 : 0) + v.b() * 3;
    }

    /** v@0 k@24 addr@32 c@40: 48 bytes. */
    @DpaRpc
    static long weigh(Vec v, int k, long addr, char c) {
        return mix(v) * 31 + k * 7L + addr * 3 + c;
    }

    /** p@0 last@32: 40 bytes. */
    @DpaRpc
    static long nested(Pair p, byte last) {
        return p.tag() * 65_537L + mix(p.v()) + last;
    }

    /** A symbol of its own; stores through the ISA and reads back. */
    @DpaRpc("store")
    static long storeAt(long daddr, long value) {
        Dpa.st64(daddr, value);
        return Dpa.ld64(daddr) + 1;
    }

    @DpaRpc
    static long none() {
        return 42;
    }

    /** A handler: counts its activations in the word its thread argument points at, visible to the NIC. */
    @DpaGlobal
    static void tick(long threadArg) {
        Dpa.amoAdd64(threadArg, 1);
        Dpa.memoryWriteback();
        Dpa.finish();
    }
}

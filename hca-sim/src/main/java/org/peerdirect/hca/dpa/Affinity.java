package org.peerdirect.hca.dpa;

/**
 * Where a DPA thread may run ({@code flexio_affinity_type}): any free EU, one EU, or any EU of a
 * group.
 */
public record Affinity(Kind kind, int id) {

    public enum Kind {
        NONE, STRICT, GROUP
    }

    public static final Affinity ANY = new Affinity(Kind.NONE, 0);

    public static Affinity strict(int eu) {
        return new Affinity(Kind.STRICT, eu);
    }

    public static Affinity group(int group) {
        return new Affinity(Kind.GROUP, group);
    }
}

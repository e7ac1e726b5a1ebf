package org.peerdirect.ib.core.umem;

/**
 * One peer-memory client's answer to "is [addr, addr+length) yours?", as the peer path of
 * {@code ib_umem_get} would ask it ({@link UmemService#peerClaims}), without registering.
 *
 * @param client the client's name
 * @param answer what it said
 * @param detail for {@link Answer#SKIPPED} why it was not asked, for {@link Answer#FAILED} what
 *               its {@code acquire} threw; else empty
 * @since 0.6
 */
public record PeerClaim(String client, Answer answer, String detail) {

    /** What one client said, or why it was not asked. */
    public enum Answer {
        /** {@code acquire} claimed the whole range (and was released at once). */
        CLAIMED,
        /** {@code acquire} returned no context: not its memory. */
        NOT_MINE,
        /** not asked: it requires invalidation and the caller does not support it. */
        SKIPPED,
        /** {@code acquire} threw; the registration would treat it as not mine. */
        FAILED
    }
}

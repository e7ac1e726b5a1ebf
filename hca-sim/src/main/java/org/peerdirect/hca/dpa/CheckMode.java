package org.peerdirect.hca.dpa;

/**
 * How the memory-model checker acts: {@code STRICT} fails the process on a violation,
 * {@code WARN} records it and goes on, {@code OFF} checks nothing and models DPA memory as
 * sequentially consistent (no write buffers), for speed.
 */
public enum CheckMode {
    STRICT, WARN, OFF
}

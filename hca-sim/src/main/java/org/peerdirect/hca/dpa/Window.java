package org.peerdirect.hca.dpa;

/** A DPA_WINDOW object: bound to a process and a PD; the mkey is chosen on the device. */
record Window(int id, DpaProcess process, int pd) {
}

/**
 * FlexIO's and DOCA DPA's samples as {@code dpa:sample}: user space, each sample a simulated process
 * of its own on a BlueField-3 over the verbs API, DevX and the FlexIO host library, or DOCA DPA and
 * DOCA RDMA. Private.
 */
package org.peerdirect.dpa.samples;

/**
 * RoCEv2 on a wire, the NIC's part that rxe keeps in {@code rxe_hdr.h}, {@code rxe_opcode.c},
 * {@code rxe_icrc.c} and {@code rxe_net.c}: the layouts of the headers a port builds and parses
 * (Ethernet, ARP, IPv4, UDP 4791, BTH and its extension headers, all big-endian over
 * {@link java.lang.foreign.MemorySegment}), the opcode table, the ICRC over the masked headers,
 * and the links that carry frames: a UDP tunnel of Ethernet frames in QEMU's
 * {@code -netdev socket,udp=} format, with configurable faults (drop, duplicate, reorder, delay,
 * corrupt; this machine has no netem) and an ARP neighbour table. Hardware vocabulary only; the
 * transport that fills the frames is the engine's ({@code WireReq}, {@code WireResp},
 * {@code WireComp}). Private to the bundle.
 */
package org.peerdirect.hca.wire;

package org.peerdirect.hca.cx4;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE32;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE64;
import static org.peerdirect.hca.cx4.ifc.DpaObj.*;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.List;
import java.util.SplittableRandom;
import java.util.function.Consumer;
import java.util.function.LongSupplier;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.hca.cx4.CommandFuzzTest.Outcome;
import org.peerdirect.hca.cx4.CommandFuzzTest.Page;
import org.peerdirect.hca.cx4.CommandFuzzTest.Rig;
import org.peerdirect.hca.cx4.CommandFuzzTest.Spec;
import org.peerdirect.hca.cx4.ifc.CmdEntry;
import org.peerdirect.hca.cx4.ifc.CmdMailbox;
import org.peerdirect.hca.cx4.ifc.Cq;
import org.peerdirect.hca.cx4.ifc.Devx;
import org.peerdirect.hca.cx4.ifc.Mkey;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.cx4.ifc.Pages;
import org.peerdirect.hca.cx4.ifc.Qp;
import org.peerdirect.hca.cx4.ifc.Vport;
import org.peerdirect.hca.cx4.ifc.Wqe;
import org.peerdirect.hca.dpa.DpaConfig;
import org.peerdirect.hca.dpa.DpaNic;
import org.peerdirect.hca.dpa.DpaUnit;
import org.peerdirect.hca.dpa.ImagePackager;
import org.peerdirect.hca.dpa.LoaderPolicy;
import org.peerdirect.hca.dpa.ProcessStatus;
import org.peerdirect.hca.dpa.progs.RtosProgs;
import org.peerdirect.hca.dpa.progs.WindowProgs;

/**
 * The DPA wired into the BlueField-3 firmware, driven through the command queue as a driver and
 * libflexio would drive it (the rig of {@link CommandFuzzTest}): DPA objects by general-object
 * commands, a CQ bound to a DPA thread ({@code cqc.apu_cq}) whose completions run the handler,
 * the outbox's isolation, a window over a host MR, the EUs stopped by a force teardown, and the
 * ConnectX-4 without any of it. The image reaches DPA memory as libflexio puts it there: an RDMA
 * WRITE from a host QP through an mkey over the DPA_MEM's DUMEM ({@link #process}). Each test ends with no DPA object,
 * EU or DPA memory left, and the rig's audit (no IOMMU violation, no mapping, every frame free).
 */
class DpaWireTest {

    static final int SLOT = 0;
    static final long WQ = 256; // the send queue's offset in umem page 1, after 4 receive WQEs of 64 bytes

    @TempDir
    Path tmp;
    Rig rig;

    Rig rig(int deviceId) {
        rig = new Rig(new CommandFuzzTest.Stats("dpawire"), tmp.resolve("swap"), (byte) 0x5a, deviceId);
        rig.bringUp(4);
        rig.ok(rig.give(SLOT, rig.fresh(4)));
        return rig;
    }

    @AfterEach
    void down() {
        if (rig != null) {
            rig.close();
        }
    }

    // ------------------------------------------------------------------ commands as the driver builds them

    static Spec cmd(int opcode, int opMod, int uid, int inlen, int outlen) {
        Spec s = new Spec(SLOT, opcode, opMod, inlen, outlen);
        Devx.UID.set(s.inSeg(), 0, uid);
        return s;
    }

    int index(Spec s) {
        return Pages.INDEX24.get(rig.ok(s).outHeader(), 0);
    }

    Outcome run(Spec s) {
        return rig.run(s, new SplittableRandom(3));
    }

    void refused(Spec s, int status, int syndrome) {
        Outcome o = run(s);
        String why = rig.dev.lastRefusal();
        assertEquals(CmdEntry.DELIVERY_OK, o.delivery(), why);
        assertEquals(status, o.status(), why);
        assertEquals(syndrome, o.syndrome(), String.format("syndrome 0x%x (%s)", o.syndrome(), why));
    }

    /** The whole output of the command last run: the entry's 16 bytes, then the mailboxes. */
    MemorySegment output(int outlen) {
        MemorySegment out = MemorySegment.ofArray(new byte[outlen]);
        MemorySegment e = rig.entry(SLOT);
        MemorySegment.copy(e, CmdEntry.OUT, out, 0, 16);
        long b = e.get(BE64, CmdEntry.OUT_PTR);
        for (int off = CmdEntry.INLINE; off < outlen && b != 0; off += CmdMailbox.DATA_SIZE) {
            MemorySegment block = rig.mem(b);
            MemorySegment.copy(block, 0, out, off, Math.min(CmdMailbox.DATA_SIZE, outlen - off));
            b = block.get(BE64, CmdMailbox.NEXT);
        }
        return out;
    }

    Spec destroy(int opcode, int uid, int index) {
        Spec s = cmd(opcode, 0, uid, 16, 16);
        Pages.INDEX24.set(s.inSeg(), 0, index);
        return s;
    }

    static final int OBJ_OUT = 0x10 + CONTEXT_SIZE;

    /** A general-object command of {@code type} on {@code id}; {@code ctx} fills the context after the header. */
    static Spec general(int opcode, int type, int uid, int id, Consumer<MemorySegment> ctx) {
        Spec s = cmd(opcode, type, uid, Devx.GENERAL_OBJ_HDR + CONTEXT_SIZE, OBJ_OUT);
        s.inSeg().set(BE32, Devx.OBJ_ID, id);
        ctx.accept(s.inSeg().asSlice(Devx.GENERAL_OBJ_HDR));
        return s;
    }

    int create(int type, int uid, Consumer<MemorySegment> ctx) {
        return rig.ok(general(Mlx5Cmd.CREATE_GENERAL_OBJECT, type, uid, 0, ctx)).outHeader().get(BE32, Devx.OBJ_ID);
    }

    /** QUERY_GENERAL_OBJECT: the object's context (after the 16-byte output header). */
    MemorySegment query(int type, int uid, int id) {
        rig.ok(general(Mlx5Cmd.QUERY_GENERAL_OBJECT, type, uid, id, c -> { }));
        return output(OBJ_OUT).asSlice(0x10);
    }

    void destroyObj(int type, int uid, int id) {
        rig.ok(general(Mlx5Cmd.DESTROY_GENERAL_OBJECT, type, uid, id, c -> { }));
    }

    void threadState(int uid, int tid, int state) {
        rig.ok(general(Mlx5Cmd.MODIFY_GENERAL_OBJECT, OBJ_DPA_THREAD, uid, tid, c -> {
            THREAD_MODIFY_SELECT.set(c, 0, THREAD_SELECT_STATE);
            THREAD_STATE.set(c, 0, state);
        }));
    }

    int createUctx() {
        return Devx.CREATE_UCTX_OUT_UID.get(rig.ok(cmd(Mlx5Cmd.CREATE_UCTX, 0, 0, Devx.CREATE_UCTX_IN_LEN, 16)).outHeader(), 0);
    }

    void destroyUctx(int uid) {
        Spec s = cmd(Mlx5Cmd.DESTROY_UCTX, 0, 0, 16, 16);
        Devx.DESTROY_UCTX_IN_UID.set(s.inSeg(), 0, uid);
        rig.ok(s);
    }

    Spec createUmem(int uid, long... pages) {
        Spec s = cmd(Mlx5Cmd.CREATE_UMEM, 0, uid, (int) Devx.UMEM_MTT + 8 * pages.length, 16);
        s.inSeg().set(BE64, Devx.UMEM_NUM_OF_MTT, pages.length);
        for (int i = 0; i < pages.length; i++) {
            s.inSeg().set(BE64, Devx.UMEM_MTT + 8L * i, pages[i] | Mkey.MTT_READ | Mkey.MTT_WRITE);
        }
        return s;
    }

    /** CREATE_CQ of 64 CQEs, ring at {@code offset} of {@code umem}, record at {@code dbr}; bound to DPA thread {@code tid} when not negative. */
    Spec umemCq(int uid, int uar, int umem, long offset, long dbr, int tid) {
        Spec s = cmd(Mlx5Cmd.CREATE_CQ, 0, uid, (int) Cq.CREATE_CQ_IN_PAS, 16);
        MemorySegment in = s.inSeg();
        long c = Cq.CREATE_CQ_IN_CQC;
        Cq.CQC_LOG_CQ_SIZE.set(in, c, 6);
        Cq.CQC_UAR_PAGE.set(in, c, uar);
        Cq.CQC_C_EQN.set(in, c, tid < 0 ? rig.eqns.get(0) : tid);
        if (tid >= 0) {
            Devx.CQC_APU_CQ.set(in, c, 1);
            Devx.CQC_APU_ELEMENT_TYPE.set(in, c, Devx.APU_ELEMENT_THREAD);
        }
        Devx.CQ_UMEM_VALID.set(in, 0, 1);
        in.set(BE32, Devx.CQ_UMEM_ID, umem);
        in.set(BE64, Devx.CQ_UMEM_OFFSET, offset);
        Devx.CQC_DBR_UMEM_VALID.set(in, c, 1);
        Devx.CQC_DBR_UMEM_ID.set(in, c, umem);
        in.set(BE64, c + Cq.CQC_DBR_ADDR, dbr);
        return s;
    }

    Spec modifyQp(int opcode, int uid, int qpn) {
        Spec s = cmd(opcode, 0, uid, Qp.MODIFY_IN_LEN, 16);
        Pages.INDEX24.set(s.inSeg(), 0, qpn);
        return s;
    }

    /** RESET -> INIT -> RTR -> RTS of RC QP {@code qpn}, its path to itself by the port's GID (RoCE). */
    void connectToItself(int a, int qpn) {
        connect(a, qpn, qpn);
    }

    /** RESET -> INIT -> RTR -> RTS of RC QP {@code qpn} to QP {@code remote} of the same port (looped back by its GID). */
    void connect(int a, int qpn, int remote) {
        Spec gidCmd = cmd(Mlx5Cmd.QUERY_HCA_VPORT_GID, 0, 0, 16, Vport.GID_OUT_LEN);
        Vport.IN_PORT_NUM.set(gidCmd.inSeg(), 0, 1);
        rig.ok(gidCmd);
        MemorySegment gid = output(Vport.GID_OUT_LEN).asSlice(Vport.OUT_GID, 16);
        Spec init = modifyQp(Qp.RST2INIT_QP, a, qpn);
        Qp.QPC_PRI_VHCA_PORT_NUM.set(init.inSeg(), Qp.IN_QPC, 1);
        Qp.QPC_RWE.set(init.inSeg(), Qp.IN_QPC, 1);
        rig.ok(init);
        Spec rtr = modifyQp(Qp.INIT2RTR_QP, a, qpn);
        Qp.QPC_RWE.set(rtr.inSeg(), Qp.IN_QPC, 1);
        Qp.QPC_MTU.set(rtr.inSeg(), Qp.IN_QPC, 3);
        Qp.QPC_REMOTE_QPN.set(rtr.inSeg(), Qp.IN_QPC, remote);
        Qp.QPC_PRI_GRH.set(rtr.inSeg(), Qp.IN_QPC, 1);
        Qp.QPC_PRI_HOP_LIMIT.set(rtr.inSeg(), Qp.IN_QPC, 64);
        MemorySegment.copy(gid, 0, rtr.inSeg(), Qp.IN_QPC + Qp.QPC_PRI_RGID, 16);
        rig.ok(rtr);
        Spec rts = modifyQp(Qp.RTR2RTS_QP, a, qpn);
        Qp.QPC_RWE.set(rts.inSeg(), Qp.IN_QPC, 1);
        Qp.QPC_RETRY_COUNT.set(rts.inSeg(), Qp.IN_QPC, 3);
        Qp.QPC_PRI_ACK_TIMEOUT.set(rts.inSeg(), Qp.IN_QPC, 14);
        rig.ok(rts);
    }

    // ------------------------------------------------------------------ the DPA side, as libflexio does it

    /** What a test's process consists of. */
    record Proc(int mem, int pid, long heap, int outbox) {
    }

    DpaUnit unit() {
        return rig.dev.dpa().unitIfAny();
    }

    /**
     * DPA_MEM with an image holding {@code entry} of {@code c}; the host writes the image into it
     * by an RDMA WRITE through an mkey over the DPA_MEM's DUMEM ({@code flexio_device_mkey_create}),
     * as libflexio's process create does; DPA_PROCESS on it; an outbox. No back door: the whole
     * path a driver takes.
     */
    Proc process(int uid, int pd, int uar, Class<?> c, String entry) {
        return process(uid, pd, uar, c, entry, 4096);
    }

    /** {@link #process} with a heap of {@code heapSize} bytes. */
    Proc process(int uid, int pd, int uar, Class<?> c, String entry, long heapSize) {
        byte[] img = new ImagePackager().add(c).global(entry, c, entry).pack();
        int mem = create(OBJ_DPA_MEM, uid, ctx -> set64(ctx, MEM_SIZE, img.length));
        MemorySegment memOut = output(OBJ_OUT);
        long daddr = get64(memOut, 0x10 + MEM_DADDR);
        int dumem = MEM_DUMEM_ID.get(memOut, 0x10);
        int key = dumemMkey(uid, pd, dumem, 0, daddr, img.length);
        assertTrue(img.length <= 4096 * Loop.BUF_PAGES, "the image fits the loop's buffer: " + img.length);
        try (Loop loop = new Loop(uid, pd, uar)) {
            assertEquals(Cq.CQE_REQ, loop.write(MemorySegment.ofArray(img), key, daddr), "the image's RDMA WRITE completes");
        }
        rig.ok(destroy(Mlx5Cmd.DESTROY_MKEY, uid, key >>> 8));
        int pid = create(OBJ_DPA_PROCESS, uid, ctx -> {
            PROCESS_IMAGE_MEM.set(ctx, 0, mem);
            PROCESS_IMAGE_LEN.set(ctx, 0, img.length);
            set64(ctx, PROCESS_HEAP_SIZE, heapSize);
            PROCESS_PD.set(ctx, 0, pd);
            PROCESS_UAR.set(ctx, 0, uar);
        });
        long heap = get64(output(OBJ_OUT), 0x10 + PROCESS_HEAP_BASE);
        int outbox = create(OBJ_DPA_OUTBOX, uid, ctx -> OUTBOX_PROCESS.set(ctx, 0, pid));
        return new Proc(mem, pid, heap, outbox);
    }

    /**
     * {@code flexio_device_mkey_create}: CREATE_MKEY over DUMEM {@code dumem} from byte
     * {@code offset}, its virtual address {@code daddr} (the DPA address), local and remote read
     * and write, atomics; the key.
     */
    int dumemMkey(int uid, int pd, int dumem, long offset, long daddr, long len) {
        Spec mk = rig.createMkey(SLOT, pd, daddr, len, new long[0], true);
        mk.onOk = null;
        Mkey.MKC_A.set(mk.inSeg(), Mkey.CREATE_IN_MKC, 1);
        Devx.UID.set(mk.inSeg(), 0, uid);
        Devx.MKEY_UMEM_VALID.set(mk.inSeg(), 0, 1);
        mk.inSeg().set(BE32, Devx.MKEY_UMEM_ID, dumem);
        mk.inSeg().set(BE64, Devx.MKEY_UMEM_OFFSET, offset);
        return index(mk) << 8;
    }

    /**
     * A host-side RC QP with its CQ (both rings and records in one DevX umem of host pages),
     * connected to itself or to another QP of the port: the loopback QP libflexio's runtime uses
     * for {@code host2dev_memcpy} (DPA_MODEL.md §2.6), and a DPA handler's host peer. Page 0 the
     * CQ ring, page 1 the receive queue (8 × 64 B) then the send queue (8 basic blocks), page 2
     * the records, then the host buffer (registered with its own mkey at {@link #BUF}).
     */
    final class Loop implements AutoCloseable {
        static final long BUF = 0x7000_0000L;
        static final int BUF_PAGES = 8;
        static final int LOG_Q = 3;
        static final long SQ = 64L << LOG_Q;
        final int uid;
        final Page[] p = new Page[3 + BUF_PAGES];
        final int umem;
        final int cqn;
        final int qpn;
        final int lkey;
        final int uar;
        int sent;
        int received;
        int completed;

        /** Connected to itself. */
        Loop(int uid, int pd, int uar) {
            this(uid, pd, uar, true);
        }

        /** {@code self}: connected to itself; else {@link #connect} later. */
        Loop(int uid, int pd, int uar, boolean self) {
            this.uid = uid;
            this.uar = uar;
            long[] iovas = new long[p.length];
            for (int i = 0; i < p.length; i++) {
                p[i] = rig.page();
                iovas[i] = p[i].iova();
            }
            for (int i = 0; i < 64; i++) {
                p[0].mem().set(JAVA_BYTE, i * 64L + Cq.CQE_OP_OWN, (byte) (Cq.CQE_INVALID << 4 | 1));
            }
            umem = index(createUmem(uid, java.util.Arrays.copyOf(iovas, 3)));
            cqn = index(umemCq(uid, uar, umem, 0, 8192, -1));
            Spec qp = rig.createQp(SLOT, Qp.ST_RC, LOG_Q, LOG_Q, 2, uar, pd, cqn, cqn, new long[0]);
            qp.onOk = null;
            qp.inlen = (int) Qp.CREATE_QP_IN_PAS;
            Devx.UID.set(qp.inSeg(), 0, uid);
            Devx.QP_WQ_UMEM_VALID.set(qp.inSeg(), 0, 1);
            qp.inSeg().set(BE32, Devx.QP_WQ_UMEM_ID, umem);
            qp.inSeg().set(BE64, Devx.QP_WQ_UMEM_OFFSET, 4096);
            Devx.QPC_DBR_UMEM_VALID.set(qp.inSeg(), Qp.IN_QPC, 1);
            Devx.QPC_DBR_UMEM_ID.set(qp.inSeg(), Qp.IN_QPC, umem);
            qp.inSeg().set(BE64, Qp.IN_QPC + Qp.QPC_DBR_ADDR, 8192 + 64);
            qpn = index(qp);
            Spec mk = rig.createMkey(SLOT, pd, BUF, 4096L * BUF_PAGES, java.util.Arrays.copyOfRange(iovas, 3, p.length), true);
            mk.onOk = null;
            Mkey.MKC_A.set(mk.inSeg(), Mkey.CREATE_IN_MKC, 1);
            Devx.UID.set(mk.inSeg(), 0, uid);
            lkey = index(mk) << 8;
            if (self) {
                connect(qpn);
            }
        }

        /** To RTS towards QP {@code remote} with remote read, write and atomics allowed. */
        void connect(int remote) {
            DpaWireTest.this.connect(uid, qpn, remote);
            Spec rights = modifyQp(Qp.RTS2RTS_QP, uid, qpn); // READ and atomics too: the responder may be this QP
            Qp.QPC_RWE.set(rights.inSeg(), Qp.IN_QPC, 1);
            Qp.QPC_RRE.set(rights.inSeg(), Qp.IN_QPC, 1);
            Qp.QPC_RAE.set(rights.inSeg(), Qp.IN_QPC, 1);
            rig.ok(rights);
        }

        /** The host buffer's byte {@code off} (the pages are not contiguous in the JVM). */
        void put(long off, MemorySegment src, long srcOff, long len) {
            for (long i = 0; i < len; i++) {
                long at = off + i;
                p[3 + (int) (at >>> 12)].mem().set(JAVA_BYTE, at & 0xfff, src.get(JAVA_BYTE, srcOff + i));
            }
        }

        byte get(long off) {
            return p[3 + (int) (off >>> 12)].mem().get(JAVA_BYTE, off & 0xfff);
        }

        long getLong(long off) {
            long v = 0;
            for (int i = 7; i >= 0; i--) {
                v = v << 8 | get(off + i) & 0xff;
            }
            return v;
        }

        /** RDMA WRITE of {@code src} (at most the buffer) to {@code raddr} through {@code rkey}; the completion's opcode. */
        int write(MemorySegment src, int rkey, long raddr) {
            put(0, src, 0, src.byteSize());
            return post(Wqe.OP_RDMA_WRITE, rkey, raddr, BUF, src.byteSize(), 0, 0);
        }

        /** One work request ({@code opcode}), signalled; waits for its CQE and returns its opcode (CQE_REQ, or an error's). */
        int post(int opcode, int rkey, long raddr, long laddr, long len, long swapAdd, long compare) {
            put(opcode, rkey, raddr, laddr, len, swapAdd, compare);
            ring();
            return awaitCqe("work request " + opcode);
        }

        /** Writes one signalled work request into the send queue (rung by {@link #ring}). */
        void put(int opcode, int rkey, long raddr, long laddr, long len, long swapAdd, long compare) {
            boolean atomic = opcode == Wqe.OP_ATOMIC_FA || opcode == Wqe.OP_ATOMIC_CS;
            MemorySegment w = p[1].mem().asSlice(SQ + (sent & (1 << LOG_Q) - 1) * Qp.SEND_WQE_BB, Qp.SEND_WQE_BB);
            w.fill((byte) 0);
            int ds = opcode == Wqe.OP_SEND ? 2 : atomic ? 4 : 3;
            w.set(BE32, Qp.CTRL_OPMOD_IDX_OPCODE, (sent & 0xffff) << 8 | opcode);
            w.set(BE32, Qp.CTRL_QPN_DS, qpn << 8 | ds);
            w.set(JAVA_BYTE, Qp.CTRL_FM_CE_SE, (byte) Qp.CTRL_CQ_UPDATE);
            long data = 16;
            if (opcode != Wqe.OP_SEND) {
                w.set(BE64, 16 + Qp.RADDR_VA, raddr);
                w.set(BE32, 16 + Qp.RADDR_RKEY, rkey);
                data = 32;
            }
            if (atomic) {
                w.set(BE64, 32 + Qp.ATOMIC_SWAP_ADD, swapAdd);
                w.set(BE64, 32 + Qp.ATOMIC_COMPARE, compare);
                data = 48;
            }
            w.set(BE32, data + Qp.DATA_BYTE_COUNT, (int) len);
            w.set(BE32, data + Qp.DATA_LKEY, lkey);
            w.set(BE64, data + Qp.DATA_ADDR, laddr);
            sent++;
        }

        /** The send doorbell record, then the doorbell: every work request put so far. */
        void ring() {
            p[2].mem().set(BE32, 64 + Qp.DBR_SND, sent);
            long first = SQ + ((sent - 1) & (1 << LOG_Q) - 1) * Qp.SEND_WQE_BB;
            rig.fn.write64(0, ((long) uar << 12) + Qp.UAR_BF_OFFSET, Long.reverseBytes(p[1].mem().get(BE64, first)));
        }

        /** Posts a receive of {@code len} bytes at {@code addr} through {@code key} (a SEND lands there). */
        void receive(int key, long addr, int len) {
            MemorySegment r = p[1].mem().asSlice((received & (1 << LOG_Q) - 1) * 64L, 64);
            r.fill((byte) 0);
            r.set(BE32, Qp.DATA_BYTE_COUNT, len);
            r.set(BE32, Qp.DATA_LKEY, key);
            r.set(BE64, Qp.DATA_ADDR, addr);
            r.set(BE32, Qp.DS_SIZE + Qp.DATA_LKEY, Qp.INVALID_LKEY);
            received++;
            p[2].mem().set(BE32, 64 + Qp.DBR_RCV, received);
        }

        /** The next CQE's opcode once it is there (its owner bit that of this pass over the ring). */
        int awaitCqe(String what) {
            long at = (completed & 63) * 64L;
            int owner = completed >>> 6 & 1;
            await(() -> {
                int opOwn = p[0].mem().get(JAVA_BYTE, at + Cq.CQE_OP_OWN) & 0xff;
                return opOwn >>> 4 != Cq.CQE_INVALID && (opOwn & 1) == owner ? 1 : 0;
            }, 1, "the CQE of " + what);
            int op = (p[0].mem().get(JAVA_BYTE, at + Cq.CQE_OP_OWN) & 0xff) >>> 4;
            completed++;
            p[2].mem().set(BE32, Cq.DBR_SET_CI, completed & 0xffffff); // consumed: the ring never overruns
            return op;
        }

        /** The byte count of the CQE {@link #awaitCqe} returned last. */
        int lastByteCount() {
            return p[0].mem().get(BE32, ((completed - 1) & 63) * 64L + Cq.CQE_BYTE_CNT);
        }

        @Override
        public void close() {
            rig.ok(destroy(Mlx5Cmd.DESTROY_QP, uid, qpn));
            rig.ok(destroy(Mlx5Cmd.DESTROY_MKEY, uid, lkey >>> 8));
            rig.ok(destroy(Mlx5Cmd.DESTROY_CQ, uid, cqn));
            rig.ok(destroy(Mlx5Cmd.DESTROY_UMEM, uid, umem));
        }
    }

    int thread(int uid, Proc p) {
        return create(OBJ_DPA_THREAD, uid, ctx -> {
            THREAD_PROCESS.set(ctx, 0, p.pid);
            THREAD_ENTRY_INDEX.set(ctx, 0, 0);
            set64(ctx, THREAD_ARG, p.heap);
        });
    }

    /** Writes the 64-bit words of the handler's argument block in the process heap (the NIC's DMA). */
    void arg(Proc p, long... words) {
        MemorySegment b = MemorySegment.ofArray(new long[words.length]);
        for (int i = 0; i < words.length; i++) {
            b.setAtIndex(java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED, i, words[i]);
        }
        unit().nicWrite(p.heap, b, 0, 8L * words.length);
    }

    /** A word of the heap as the NIC fetches it for a doorbell (a word still dirty in an EU's write buffer is C1). */
    long fetch(Proc p, int off) {
        MemorySegment b = MemorySegment.ofArray(new long[1]);
        unit().nicRead(p.heap + off, b, 0, 8, "test");
        return b.get(java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED, 0);
    }

    /** A word of the heap as a host polling it reads it (the bytes written back; a poll is no finding). */
    long word(Proc p, int off) {
        MemorySegment b = MemorySegment.ofArray(new long[1]);
        unit().nicPoll(p.heap + off, b, 0, 8);
        return b.get(java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED, 0);
    }

    void destroyProcess(int uid, Proc p) {
        destroyObj(OBJ_DPA_OUTBOX, uid, p.outbox);
        destroyObj(OBJ_DPA_PROCESS, uid, p.pid);
        destroyObj(OBJ_DPA_MEM, uid, p.mem);
    }

    static void await(LongSupplier value, long want, String what) {
        await(value, want, what, () -> "");
    }

    /** {@link #await}, the failure also saying {@code state} (what tells a lost wake-up from a slow machine). */
    static void await(LongSupplier value, long want, String what, java.util.function.Supplier<String> state) {
        long deadline = System.nanoTime() + 20_000_000_000L;
        long v;
        while ((v = value.getAsLong()) != want) {
            if (System.nanoTime() >= deadline) {
                throw new AssertionError(what + ": " + v + ", not " + want + " within 20 s" + state.get());
            }
            Thread.onSpinWait();
        }
    }

    FirmwareDpa dpa() {
        FirmwareDpa d = rig.dev.dpa();
        d.configure(DpaConfig.test(8, 1).concurrent(), LoaderPolicy.isaOnly());
        return d;
    }

    // ------------------------------------------------------------------ tests

    /**
     * A CQ bound to a DPA thread: the host posts RDMA WRITEs with immediate on a QP (looped back to
     * itself) whose receive CQ is that CQ; each responder completion runs the handler once (it counts, arms with the next consumer index,
     * reschedules). Four posted at once race the handler's arms and lose nothing: a CQE landing
     * before the arm fires the arm at once.
     */
    @Test
    void eachCompletionOnAThreadBoundCqRunsTheHandlerOnceAndABurstLosesNothing() {
        rig(ConnectX4Device.DEVICE_BLUEFIELD3);
        FirmwareDpa dpa = dpa();
        int a = createUctx();
        int uar = index(cmd(Mlx5Cmd.ALLOC_UAR, 0, a, 16, 16));
        int pd = index(cmd(Mlx5Cmd.ALLOC_PD, 0, a, 16, 16));
        Page[] p = {rig.page(), rig.page(), rig.page(), rig.page(), rig.page()};
        int umem = index(createUmem(a, p[0].iova(), p[1].iova(), p[2].iova(), p[3].iova(), p[4].iova()));
        for (int i = 0; i < 64; i++) {
            p[0].mem().set(JAVA_BYTE, i * 64L + Cq.CQE_OP_OWN, (byte) (Cq.CQE_INVALID << 4 | 1));
        }
        Proc proc = process(a, pd, uar, DpaWireProgs.class, "readCqe");
        int tid = thread(a, proc);
        refused(umemCq(a, uar, umem, 0, 8192, tid + 100), Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_NO_SUCH_OBJECT);
        int cqn = index(umemCq(a, uar, umem, 0, 8192, tid)); // receive CQ: ring in page 0, bound to the thread
        int scqn = index(umemCq(a, uar, umem, 4 * 4096, 8192 + 128, -1)); // send CQ: ring in page 4, an EQ's
        Spec qp = rig.createQp(SLOT, Qp.ST_RC, 2, 2, 2, uar, pd, scqn, cqn, new long[0]);
        qp.onOk = null;
        qp.inlen = (int) Qp.CREATE_QP_IN_PAS;
        Devx.UID.set(qp.inSeg(), 0, a);
        Devx.QP_WQ_UMEM_VALID.set(qp.inSeg(), 0, 1);
        qp.inSeg().set(BE32, Devx.QP_WQ_UMEM_ID, umem);
        qp.inSeg().set(BE64, Devx.QP_WQ_UMEM_OFFSET, 4096);
        Devx.QPC_DBR_UMEM_VALID.set(qp.inSeg(), Qp.IN_QPC, 1);
        Devx.QPC_DBR_UMEM_ID.set(qp.inSeg(), Qp.IN_QPC, umem);
        qp.inSeg().set(BE64, Qp.IN_QPC + Qp.QPC_DBR_ADDR, 8192 + 64);
        int qpn = index(qp);
        Spec mk = rig.createMkey(SLOT, pd, 0x30000, 4096, new long[0], true);
        mk.onOk = null;
        Devx.UID.set(mk.inSeg(), 0, a);
        Devx.MKEY_UMEM_VALID.set(mk.inSeg(), 0, 1);
        mk.inSeg().set(BE32, Devx.MKEY_UMEM_ID, umem);
        mk.inSeg().set(BE64, Devx.MKEY_UMEM_OFFSET, 3 * 4096);
        int key = index(mk) << 8;
        Spec ringKey = rig.createMkey(SLOT, pd, 0x20000, 4096, new long[0], true); // the receive CQ's ring, for the handler's window
        ringKey.onOk = null;
        Devx.UID.set(ringKey.inSeg(), 0, a);
        Devx.MKEY_UMEM_VALID.set(ringKey.inSeg(), 0, 1);
        ringKey.inSeg().set(BE32, Devx.MKEY_UMEM_ID, umem);
        ringKey.inSeg().set(BE64, Devx.MKEY_UMEM_OFFSET, 0);
        int ring = index(ringKey) << 8;
        int win = create(OBJ_DPA_WINDOW, a, ctx -> {
            WINDOW_PROCESS.set(ctx, 0, proc.pid);
            WINDOW_PD.set(ctx, 0, pd);
        });
        connectToItself(a, qpn);
        arg(proc, proc.outbox, win, cqn, ring, 0, 0x20000);
        threadState(a, tid, THREAD_STATE_RUN);
        // the host arms the CQ once (consumer index 0); the handler arms it after each completion
        rig.fn.write64(0, ((long) uar << 12) + Cq.UAR_CQ_DOORBELL, Long.reverseBytes((long) Cq.DB_REQ_NOT << 32 | cqn));
        DpaNic.CqState armed = dpa.cqState(cqn);
        assertTrue(armed.armed(), "armed by the host: " + armed);
        int posted = 0;
        for (int round = 1; round <= 2; round++) {
            for (int i = 0; i < 4; i++) { // four receives (the ring's size), each one scatter entry then INVALID_LKEY
                MemorySegment r = p[1].mem().asSlice(((posted + i) & 3) * 64L, 64);
                r.fill((byte) 0);
                r.set(BE32, Qp.DATA_BYTE_COUNT, 8);
                r.set(BE32, Qp.DATA_LKEY, key);
                r.set(BE64, Qp.DATA_ADDR, 0x30f00);
                r.set(BE32, Qp.DS_SIZE + Qp.DATA_LKEY, Qp.INVALID_LKEY);
            }
            p[2].mem().set(BE32, 64 + Qp.DBR_RCV, posted + 4);
            for (int i = 0; i < 4; i++, posted++) { // four WRITEs with immediate at once
                MemorySegment w = p[1].mem().asSlice(WQ + (posted & 3) * Qp.SEND_WQE_BB, Qp.SEND_WQE_BB);
                w.fill((byte) 0);
                w.set(BE32, Qp.CTRL_OPMOD_IDX_OPCODE, (posted & 0xffff) << 8 | Wqe.OP_RDMA_WRITE_IMM);
                w.set(BE32, Qp.CTRL_IMM, 0x1000 + posted);
                w.set(BE32, Qp.CTRL_QPN_DS, qpn << 8 | 3);
                w.set(JAVA_BYTE, Qp.CTRL_FM_CE_SE, (byte) Qp.CTRL_CQ_UPDATE);
                w.set(BE64, 16 + Qp.RADDR_VA, 0x30800 + 8L * posted);
                w.set(BE32, 16 + Qp.RADDR_RKEY, key);
                w.set(BE32, 32 + Qp.DATA_BYTE_COUNT, 8);
                w.set(BE32, 32 + Qp.DATA_LKEY, key);
                w.set(BE64, 32 + Qp.DATA_ADDR, 0x30000);
            }
            p[2].mem().set(BE32, 64 + Qp.DBR_SND, posted);
            rig.fn.write64(0, ((long) uar << 12) + Qp.UAR_BF_OFFSET, Long.reverseBytes(p[1].mem().get(BE64, WQ)));
            int want = posted;
            // on a timeout: a lost wake-up shows the thread WAITING with its CQ not armed and no event on its way (raised
            // events all received); a finding (STRICT ends the process) shows in the findings; anything else is slowness
            await(() -> word(proc, 32), want, "handler activations after " + want + " completions",
                    () -> "\n  CQ " + dpa.cqState(cqn) + "\n  thread " + unit().threadState(tid) + "\n  findings " + unit().findings() + "\n  dpa:ps " + rig.dev.dpaDescribe()
                            + "\n  dpa:threads " + rig.dev.dpaThreads());
            assertTrue(unit().awaitIdle(), "the DPA settles");
            assertEquals(want, word(proc, 32), "one activation per completion, none more");
            assertEquals(want, THREAD_ACTIVATIONS.get(query(OBJ_DPA_THREAD, a, tid), 0));
            DpaNic.CqState s = dpa.cqState(cqn);
            assertTrue(s.armed() && s.producerIndex() == want, "armed by the handler with every CQE consumed: " + s);
        }
        for (int i = 0; i < posted; i++) {
            int op = (p[0].mem().get(JAVA_BYTE, i * 64L + Cq.CQE_OP_OWN) & 0xff) >>> 4;
            assertEquals(Cq.CQE_RESP_WR_IMM, op, "CQE " + i + " in the thread's CQ: a WRITE with immediate received");
            assertEquals(0x1000 + i, p[0].mem().get(BE32, i * 64L + Cq.CQE_IMM), "its immediate");
            long seen = word(proc, 64 + 8 * i);
            assertEquals(p[0].mem().get(JAVA_BYTE, i * 64L + Cq.CQE_OP_OWN) & 0xff, seen >>> 32, "the handler read CQE " + i + "'s op_own");
            assertEquals(0x1000 + i, Integer.reverseBytes((int) seen), "and its immediate (big-endian in the CQE)");
        }
        assertEquals(0xffff, THREAD_EU.get(query(OBJ_DPA_THREAD, a, tid), 0), "on no EU while waiting");
        assertEquals(List.of(), unit().findings(), "the memory model found nothing");
        String ps = String.join("\n", rig.dev.dpaDescribe());
        assertTrue(ps.contains("readCqe") && ps.contains("activations 8"), "dpa:ps shows the thread: " + ps);
        String threads = String.join("\n", rig.dev.dpaThreads());
        assertTrue(threads.contains(String.format("cq 0x%x armed pi 8 ci", cqn)), "dpa:threads shows the CQ armed: " + threads);
        rig.ok(destroy(Mlx5Cmd.DESTROY_QP, a, qpn));
        rig.ok(destroy(Mlx5Cmd.DESTROY_MKEY, a, key >>> 8));
        rig.ok(destroy(Mlx5Cmd.DESTROY_CQ, a, cqn));
        rig.ok(destroy(Mlx5Cmd.DESTROY_CQ, a, scqn));
        destroyObj(OBJ_DPA_THREAD, a, tid);
        destroyObj(OBJ_DPA_WINDOW, a, win);
        rig.ok(destroy(Mlx5Cmd.DESTROY_MKEY, a, ring >>> 8));
        destroyProcess(a, proc);
        assertEquals(List.of(), dpa.leaks());
        rig.ok(destroy(Mlx5Cmd.DESTROY_UMEM, a, umem));
        rig.ok(destroy(Mlx5Cmd.DEALLOC_PD, a, pd));
        rig.ok(destroy(Mlx5Cmd.DEALLOC_UAR, a, uar));
        destroyUctx(a);
        assertEquals(0, rig.dev.devxLive());
    }

    /**
     * The outbox rings only the process's own queues: the handler arms its own CQ (done), then the
     * kernel's CQ, which belongs to another uid: that doorbell is dropped and, in strict mode,
     * ends the process ({@code OUTBOX_ISOLATION}), which the host sees in the process's status.
     */
    @Test
    void theOutboxRingsOnlyTheProcesssOwnQueues() {
        rig(ConnectX4Device.DEVICE_BLUEFIELD3);
        FirmwareDpa dpa = dpa();
        int a = createUctx();
        int uar = index(cmd(Mlx5Cmd.ALLOC_UAR, 0, a, 16, 16));
        int pd = index(cmd(Mlx5Cmd.ALLOC_PD, 0, a, 16, 16));
        Page ring = rig.page();
        Page rec = rig.page();
        int umem = index(createUmem(a, ring.iova(), rec.iova()));
        int own = index(umemCq(a, uar, umem, 0, 4096, -1));
        int foreign = rig.cqns.get(0); // the kernel's
        Proc proc = process(a, pd, uar, DpaWireProgs.class, "armOwnThenForeign");
        int tid = thread(a, proc);
        arg(proc, proc.outbox, foreign, own, 0, 0);
        assertTrue(!dpa.cqState(own).armed() && !dpa.cqState(foreign).armed());
        threadState(a, tid, THREAD_STATE_RUN);
        threadState(a, tid, THREAD_STATE_TRIGGER);
        await(() -> PROCESS_STATUS.get(query(OBJ_DPA_PROCESS, a, proc.pid), 0), ProcessStatus.OUTBOX_ISOLATION,
                "process status after a doorbell on another uid's CQ");
        assertTrue(unit().awaitIdle());
        assertEquals(1, word(proc, 32), "the handler ran once");
        assertTrue(dpa.cqState(own).armed(), "its own CQ armed through the outbox");
        assertTrue(!dpa.cqState(foreign).armed(), "the kernel's CQ untouched");
        assertEquals(1, unit().foreignDoorbells(proc.pid), "one foreign doorbell dropped and counted");
        destroyObj(OBJ_DPA_THREAD, a, tid);
        destroyProcess(a, proc);
        rig.ok(destroy(Mlx5Cmd.DESTROY_CQ, a, own));
        rig.ok(destroy(Mlx5Cmd.DESTROY_UMEM, a, umem));
        rig.ok(destroy(Mlx5Cmd.DEALLOC_PD, a, pd));
        rig.ok(destroy(Mlx5Cmd.DEALLOC_UAR, a, uar));
        destroyUctx(a);
        assertEquals(List.of(), dpa.leaks());
    }

    /**
     * A window over a host MR: the handler's write-back reaches host memory through the mkey (the
     * MPT, then the function's IOMMU domain); after DESTROY_MKEY the next access faults and ends
     * the process ({@code WINDOW_FAULT}), and host memory keeps what it had.
     */
    @Test
    void aWindowWritesHostMemoryThroughAnMkeyAndFaultsOnceItIsDeregistered() {
        rig(ConnectX4Device.DEVICE_BLUEFIELD3);
        dpa();
        int a = createUctx();
        int uar = index(cmd(Mlx5Cmd.ALLOC_UAR, 0, a, 16, 16));
        int pd = index(cmd(Mlx5Cmd.ALLOC_PD, 0, a, 16, 16));
        Page host = rig.page();
        Spec mk = rig.createMkey(SLOT, pd, 0x50000, 8192, new long[] {host.iova(), rig.page().iova()}, true);
        mk.onOk = null;
        Devx.UID.set(mk.inSeg(), 0, a);
        int key = index(mk) << 8;
        Proc proc = process(a, pd, uar, WindowProgs.class, "writeEach");
        int tid = thread(a, proc);
        int win = create(OBJ_DPA_WINDOW, a, ctx -> {
            WINDOW_PROCESS.set(ctx, 0, proc.pid);
            WINDOW_PD.set(ctx, 0, pd);
        });
        arg(proc, win, key, 0x50040, 0, 0);
        threadState(a, tid, THREAD_STATE_RUN);
        threadState(a, tid, THREAD_STATE_TRIGGER);
        await(() -> host.mem().get(java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED, 0x40), 1, "the window's write-back in host memory");
        assertTrue(unit().awaitIdle());
        // (window_config's result at +24 is not read: the handler stores it without a write-back, and the memory model
        // would rightly report a NIC read of it; the byte in host memory says the config was accepted)
        rig.ok(destroy(Mlx5Cmd.DESTROY_MKEY, a, key >>> 8));
        threadState(a, tid, THREAD_STATE_TRIGGER);
        await(() -> PROCESS_STATUS.get(query(OBJ_DPA_PROCESS, a, proc.pid), 0) == 0 ? 0 : 1, 1, "the process ends");
        assertEquals(ProcessStatus.WINDOW_FAULT, unit().processStatus(proc.pid), "a window access through a deregistered mkey: "
                + unit().crashData(proc.pid) + " " + unit().findings());
        assertTrue(unit().crashData(proc.pid).contains("revoked") || unit().crashData(proc.pid).contains("names no"), unit().crashData(proc.pid));
        assertTrue(unit().awaitIdle());
        assertEquals(1, host.mem().get(java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED, 0x40), "nothing reached host memory after the dereg");
        destroyObj(OBJ_DPA_WINDOW, a, win);
        destroyObj(OBJ_DPA_THREAD, a, tid);
        destroyProcess(a, proc);
        rig.ok(destroy(Mlx5Cmd.DEALLOC_PD, a, pd));
        rig.ok(destroy(Mlx5Cmd.DEALLOC_UAR, a, uar));
        destroyUctx(a);
    }

    /**
     * A force TEARDOWN_HCA while a handler spins on an EU: the firmware stops the EU before the
     * objects go, and nothing of the DPA is left (no process, no DPA memory, no busy EU).
     */
    @Test
    void aForceTeardownStopsASpinningThreadsEuFirst() {
        rig(ConnectX4Device.DEVICE_BLUEFIELD3);
        FirmwareDpa dpa = dpa();
        assertTrue(rig.dev.dpaCaps().contains(String.format("%-32s %d", "log_max_dpa_mem", 28)), "dpa:caps: " + rig.dev.dpaCaps());
        assertEquals(List.of("no DPA object yet"), rig.dev.dpaDescribe());
        assertEquals(List.of("no DPA thread"), rig.dev.dpaThreads());
        // short contexts are refused before a field is read (the fuzzer's 1-byte context and 79-byte output)
        refused(cmd(Mlx5Cmd.CREATE_GENERAL_OBJECT, OBJ_DPA_MEM, 0, 17, OBJ_OUT), Mlx5Cmd.STAT_BAD_INP_LEN_ERR, Syndromes.SYND_SHORT_INPUT);
        refused(cmd(Mlx5Cmd.CREATE_GENERAL_OBJECT, OBJ_DPA_THREAD, 0, Devx.GENERAL_OBJ_HDR + CONTEXT_SIZE, OBJ_OUT - 1),
                Mlx5Cmd.STAT_BAD_OUTP_LEN_ERR, Syndromes.SYND_SHORT_OUTPUT);
        int a = createUctx();
        int uar = index(cmd(Mlx5Cmd.ALLOC_UAR, 0, a, 16, 16));
        int pd = index(cmd(Mlx5Cmd.ALLOC_PD, 0, a, 16, 16));
        Proc proc = process(a, pd, uar, RtosProgs.class, "spin");
        int tid = thread(a, proc);
        arg(proc, 0, 0);
        threadState(a, tid, THREAD_STATE_RUN);
        threadState(a, tid, THREAD_STATE_TRIGGER);
        await(() -> THREAD_EU.get(query(OBJ_DPA_THREAD, a, tid), 0) == 0xffff ? 0 : 1, 1, "the handler on an EU");
        DpaUnit u = unit();
        refused(cmd(Mlx5Cmd.TEARDOWN_HCA, 0, 0, 16, 16), Mlx5Cmd.STAT_BAD_RES_STATE_ERR, Syndromes.SYND_OBJECTS_LIVE);
        Spec force = cmd(Mlx5Cmd.TEARDOWN_HCA, 0, 0, 16, 16);
        Pages.TEARDOWN_PROFILE.set(force.inSeg(), 0, Pages.TEARDOWN_FORCE_CLOSE);
        rig.ok(force);
        assertEquals(List.of(), u.leaks(), "every EU stopped, every process and DPA_MEM gone");
        assertNull(dpa.unitIfAny(), "the unit went with the teardown");
        assertEquals(0, rig.dev.devxLive());
    }

    /**
     * {@code flexio_device_mkey_create}: an mkey over a process DUMEM reaches DPA memory by RDMA.
     * A WRITE lands in the heap (the DPA handler reads it), a READ brings back what the handler
     * wrote and wrote back, a SEND's receive scatters into it, a fetch-and-add is performed on it;
     * none of it through the host IOMMU (DPA addresses are no IOVAs of the function: the audit
     * stays clean). The query gives the DUMEM and the heap; DESTROY_UMEM of a DUMEM and the
     * process's destroy while the mkey lives are refused.
     */
    @Test
    void rdmaThroughAnMkeyOverTheProcessDumemReachesDpaMemory() {
        rig(ConnectX4Device.DEVICE_BLUEFIELD3);
        dpa();
        int a = createUctx();
        int uar = index(cmd(Mlx5Cmd.ALLOC_UAR, 0, a, 16, 16));
        int pd = index(cmd(Mlx5Cmd.ALLOC_PD, 0, a, 16, 16));
        Proc proc = process(a, pd, uar, RtosProgs.class, "count");
        MemorySegment q = query(OBJ_DPA_PROCESS, a, proc.pid);
        int dumem = PROCESS_DUMEM_ID.get(q, 0);
        assertEquals(proc.heap, get64(q, PROCESS_HEAP_BASE), "the query gives the heap base");
        assertEquals(4096, get64(q, PROCESS_QUERY_HEAP_SIZE), "and its size");
        assertTrue(dumem != 0, "and the process DUMEM");
        refused(destroy(Mlx5Cmd.DESTROY_UMEM, a, dumem), Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_UMEM);
        int other = createUctx();
        Spec foreign = rig.createMkey(SLOT, pd, proc.heap, 64, new long[0], true);
        foreign.onOk = null;
        Devx.UID.set(foreign.inSeg(), 0, other);
        Devx.MKEY_UMEM_VALID.set(foreign.inSeg(), 0, 1);
        foreign.inSeg().set(BE32, Devx.MKEY_UMEM_ID, dumem);
        refused(foreign, Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_WRONG_UID);
        destroyUctx(other);
        refused(createMkeyBeyond(a, pd, dumem, proc.heap), Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_UMEM);
        int key = dumemMkey(a, pd, dumem, 0, proc.heap, 4096);
        try (Loop loop = new Loop(a, pd, uar)) {
            MemorySegment data = MemorySegment.ofArray(new byte[256]);
            for (int i = 0; i < 256; i++) {
                data.set(JAVA_BYTE, i, (byte) (i * 7 + 1));
            }
            assertEquals(Cq.CQE_REQ, loop.write(data, key, proc.heap + 512), "WRITE into the heap");
            MemorySegment seen = MemorySegment.ofArray(new byte[256]);
            unit().nicRead(proc.heap + 512, seen, 0, 256, "test");
            assertEquals(-1, seen.mismatch(data), "the WRITE's bytes are in DPA memory");
            // the handler counts its activations with an atomic in word 0 of its argument block: a trigger, then a READ of it
            arg(proc, 0, 0);
            int tid = thread(a, proc);
            threadState(a, tid, THREAD_STATE_RUN);
            threadState(a, tid, THREAD_STATE_TRIGGER);
            await(() -> word(proc, 0), 1, "the handler's count");
            assertTrue(unit().awaitIdle());
            assertEquals(Cq.CQE_REQ, loop.post(Wqe.OP_RDMA_READ, key, proc.heap, Loop.BUF + 1024, 8, 0, 0), "READ from the heap");
            assertEquals(1, loop.getLong(1024), "the READ brought the handler's count to the host");
            assertEquals(Cq.CQE_REQ, loop.post(Wqe.OP_ATOMIC_FA, key, proc.heap + 512, Loop.BUF + 2048, 8, 5, 0), "FETCH_ADD on the heap");
            MemorySegment w = MemorySegment.ofArray(new long[1]);
            unit().nicRead(proc.heap + 512, w, 0, 8, "test");
            assertEquals(data.get(java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED, 0) + 5, w.get(java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED, 0),
                    "the atomic was performed in DPA memory");
            loop.receive(key, proc.heap + 1024, 64);
            MemorySegment msg = MemorySegment.ofArray("a SEND placed in DPA memory".getBytes(java.nio.charset.StandardCharsets.US_ASCII));
            loop.put(3000, msg, 0, msg.byteSize());
            int first = loop.post(Wqe.OP_SEND, 0, 0, Loop.BUF + 3000, msg.byteSize(), 0, 0);
            int second = loop.awaitCqe("the other half of the SEND");
            assertEquals(java.util.Set.of(Cq.CQE_REQ, Cq.CQE_RESP_SEND), java.util.Set.of(first, second), "the SEND and its receive completed");
            MemorySegment got = MemorySegment.ofArray(new byte[(int) msg.byteSize()]);
            unit().nicRead(proc.heap + 1024, got, 0, got.byteSize(), "test");
            assertEquals(-1, got.mismatch(msg), "the SEND's payload is in DPA memory");
            destroyObj(OBJ_DPA_THREAD, a, tid);
        }
        destroyObj(OBJ_DPA_OUTBOX, a, proc.outbox);
        refused(general(Mlx5Cmd.DESTROY_GENERAL_OBJECT, OBJ_DPA_PROCESS, a, proc.pid, c -> { }), Mlx5Cmd.STAT_BAD_RES_STATE_ERR,
                Syndromes.SYND_OBJECTS_LIVE);
        rig.ok(destroy(Mlx5Cmd.DESTROY_MKEY, a, key >>> 8));
        destroyObj(OBJ_DPA_PROCESS, a, proc.pid);
        destroyObj(OBJ_DPA_MEM, a, proc.mem);
        assertEquals(List.of(), unit().findings(), "the memory model found nothing");
        assertEquals(List.of(), rig.dev.dpa().leaks());
        rig.ok(destroy(Mlx5Cmd.DEALLOC_PD, a, pd));
        rig.ok(destroy(Mlx5Cmd.DEALLOC_UAR, a, uar));
        destroyUctx(a);
        assertEquals(0, rig.dev.devxLive());
    }

    /** An mkey reaching one byte past the DUMEM (a 4 KiB heap). */
    Spec createMkeyBeyond(int uid, int pd, int dumem, long heap) {
        Spec mk = rig.createMkey(SLOT, pd, heap, 4097, new long[0], true);
        mk.onOk = null;
        Devx.UID.set(mk.inSeg(), 0, uid);
        Devx.MKEY_UMEM_VALID.set(mk.inSeg(), 0, 1);
        mk.inSeg().set(BE32, Devx.MKEY_UMEM_ID, dumem);
        return mk;
    }

    /** The ConnectX-4 has no DPA: no general-object command, no DPA, no apu CQ. */
    @Test
    void aConnectX4RefusesTheDpaObjectTypes() {
        rig(ConnectX4Device.DEVICE_CONNECTX4);
        refused(general(Mlx5Cmd.CREATE_GENERAL_OBJECT, OBJ_DPA_MEM, 0, 0, c -> set64(c, MEM_SIZE, 4096)), Mlx5Cmd.STAT_BAD_OP_ERR,
                Syndromes.SYND_UNKNOWN_OPCODE);
        refused(general(Mlx5Cmd.CREATE_GENERAL_OBJECT, OBJ_DPA_PROCESS, 0, 0, c -> { }), Mlx5Cmd.STAT_BAD_OP_ERR, Syndromes.SYND_UNKNOWN_OPCODE);
        assertThrows(IllegalStateException.class, () -> rig.dev.dpa());
        Spec cq = cmd(Mlx5Cmd.CREATE_CQ, 0, 0, (int) Cq.CREATE_CQ_IN_PAS + 8, 16);
        Cq.CQC_LOG_CQ_SIZE.set(cq.inSeg(), Cq.CREATE_CQ_IN_CQC, 6);
        Cq.CQC_UAR_PAGE.set(cq.inSeg(), Cq.CREATE_CQ_IN_CQC, rig.uars.get(0));
        Devx.CQC_APU_CQ.set(cq.inSeg(), Cq.CREATE_CQ_IN_CQC, 1);
        cq.inSeg().set(BE64, Cq.CREATE_CQ_IN_CQC + Cq.CQC_DBR_ADDR, rig.page().iova());
        cq.inSeg().set(BE64, Cq.CREATE_CQ_IN_PAS, rig.page().iova());
        refused(cq, Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_CQ);
        assertEquals(List.of(), rig.dev.dpaCaps(), "dpa:caps shows nothing of a ConnectX-4");
        assertNotNull(rig.dev.describe());
    }
}

package org.peerdirect.hca.cx4;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE32;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE64;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.SplittableRandom;

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
import org.peerdirect.hca.cx4.ifc.DpaCap;
import org.peerdirect.hca.cx4.ifc.HcaCap;
import org.peerdirect.hca.cx4.ifc.Mkey;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.cx4.ifc.Pages;
import org.peerdirect.hca.cx4.ifc.Qp;

/**
 * DevX in the ConnectX-4+ firmware, driven through the command queue of a BlueField-3 (the rig of
 * {@link CommandFuzzTest}): what the capabilities report, uids (every command's header, the
 * objects that remember theirs, another uid's object refused, {@code DESTROY_UCTX} refused while
 * objects live), umems as the memory of CQs, QPs and mkeys (too small, in use, another uid's),
 * and the general-object dispatcher with a type of this test. Each test ends with the rig's audit
 * (no IOMMU violation, no mapping, every frame free).
 */
class DevxCommandsTest {

    static final int SLOT = 0;

    @TempDir
    Path tmp;
    Rig rig;

    Rig rig(int deviceId) {
        rig = new Rig(new CommandFuzzTest.Stats("devx"), tmp.resolve("swap"), (byte) 0x5a, deviceId);
        rig.bringUp(4); // a UAR, a PD, an EQ, a CQ, a QP and an mkey of the kernel (uid 0)
        rig.ok(rig.give(SLOT, rig.fresh(4))); // room for the contexts of the tests' objects
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

    Outcome run(Spec s) {
        return rig.run(s, new SplittableRandom(3));
    }

    /** Runs {@code s}, which must succeed; the 24-bit index of its output. */
    int index(Spec s) {
        return Pages.INDEX24.get(rig.ok(s).outHeader(), 0);
    }

    /** Runs {@code s}, which must be refused with {@code status} and {@code syndrome}; the firmware's reason. */
    String refused(Spec s, int status, int syndrome) {
        Outcome o = run(s);
        String why = rig.dev.lastRefusal();
        assertEquals(CmdEntry.DELIVERY_OK, o.delivery(), s + ": " + why);
        assertEquals(status, o.status(), s + ": " + why);
        assertEquals(syndrome, o.syndrome(), String.format("%s: syndrome 0x%x (%s)", s, o.syndrome(), why));
        return why;
    }

    /** The whole output of the command last run on {@link #SLOT}: the entry's 16 bytes, then the mailboxes. */
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

    int createUctx() {
        return Devx.CREATE_UCTX_OUT_UID.get(rig.ok(cmd(Mlx5Cmd.CREATE_UCTX, 0, 0, Devx.CREATE_UCTX_IN_LEN, 16)).outHeader(), 0);
    }

    Spec destroyUctx(int uid) {
        Spec s = cmd(Mlx5Cmd.DESTROY_UCTX, 0, 0, 16, 16);
        Devx.DESTROY_UCTX_IN_UID.set(s.inSeg(), 0, uid);
        return s;
    }

    /** CREATE_UMEM of {@code pages} fresh pages of the rig, writable, from {@code pageOffset}. */
    Spec createUmem(int uid, int pageOffset, long... pages) {
        Spec s = cmd(Mlx5Cmd.CREATE_UMEM, 0, uid, (int) Devx.UMEM_MTT + 8 * pages.length, 16);
        s.inSeg().set(BE32, Devx.UMEM_PAGE_OFFSET, pageOffset);
        s.inSeg().set(BE64, Devx.UMEM_NUM_OF_MTT, pages.length);
        for (int i = 0; i < pages.length; i++) {
            s.inSeg().set(BE64, Devx.UMEM_MTT + 8L * i, pages[i] | Mkey.MTT_READ | Mkey.MTT_WRITE);
        }
        return s;
    }

    Spec destroy(int opcode, int uid, int index) {
        Spec s = cmd(opcode, 0, uid, 16, 16);
        Pages.INDEX24.set(s.inSeg(), 0, index);
        return s;
    }

    /** CREATE_CQ of 2^{@code logSize} CQEs with its ring at {@code offset} of {@code umem} and its doorbell record at {@code dbr} of it. */
    Spec umemCq(int uid, int uar, int logSize, int umem, long offset, long dbr) {
        Spec s = cmd(Mlx5Cmd.CREATE_CQ, 0, uid, (int) Cq.CREATE_CQ_IN_PAS, 16);
        MemorySegment in = s.inSeg();
        long c = Cq.CREATE_CQ_IN_CQC;
        Cq.CQC_LOG_CQ_SIZE.set(in, c, logSize);
        Cq.CQC_UAR_PAGE.set(in, c, uar);
        Cq.CQC_C_EQN.set(in, c, rig.eqns.get(0));
        Devx.CQ_UMEM_VALID.set(in, 0, 1);
        in.set(BE32, Devx.CQ_UMEM_ID, umem);
        in.set(BE64, Devx.CQ_UMEM_OFFSET, offset);
        Devx.CQC_DBR_UMEM_VALID.set(in, c, 1);
        Devx.CQC_DBR_UMEM_ID.set(in, c, umem);
        in.set(BE64, c + Cq.CQC_DBR_ADDR, dbr);
        return s;
    }

    // ------------------------------------------------------------------ tests

    @Test
    void onlyTheBlueField3ReportsDevxAndTheDpa() {
        rig(ConnectX4Device.DEVICE_BLUEFIELD3);
        assertEquals(32, rig.fn.read32be(0, org.peerdirect.hca.cx4.ifc.InitSeg.FW_REV) & 0xffff, "BlueField-3 firmware major 32");
        rig.ok(cmd(Mlx5Cmd.QUERY_HCA_CAP, HcaCap.TYPE_GENERAL << 1 | HcaCap.MODE_CUR, 0, 16, HcaCap.QUERY_OUT_LEN));
        MemorySegment general = output(HcaCap.QUERY_OUT_LEN);
        long types = general.get(BE64, HcaCap.OFFSET + HcaCap.GENERAL_OBJ_TYPES);
        for (int t : new int[] {DpaCap.OBJ_DPA_MEM, DpaCap.OBJ_DPA_PROCESS, DpaCap.OBJ_DPA_THREAD, DpaCap.OBJ_DPA_OUTBOX, DpaCap.OBJ_DPA_WINDOW}) {
            assertTrue((types & 1L << t) != 0, "general_obj_types bit " + t);
        }
        assertEquals(1L << 40 | 1L << 42 | 1L << 43 | 1L << 45 | 1L << 57, types, "bits 40, 42, 43, 45, 57 and nothing else");
        assertNotEquals(0, HcaCap.LOG_MAX_UCTX.get(general, HcaCap.OFFSET), "DevX user contexts");
        assertNotEquals(0, HcaCap.LOG_MAX_UMEM.get(general, HcaCap.OFFSET), "DevX umems");
        assertEquals(HcaCap.PORT_TYPE_ETH, HcaCap.PORT_TYPE.get(general, HcaCap.OFFSET), "an Ethernet port");
        assertEquals(1, HcaCap.ROCE.get(general, HcaCap.OFFSET), "RoCE");
        rig.ok(cmd(Mlx5Cmd.QUERY_HCA_CAP, HcaCap.TYPE_DPA << 1 | HcaCap.MODE_MAX, 0, 16, HcaCap.QUERY_OUT_LEN));
        MemorySegment dpa = output(HcaCap.QUERY_OUT_LEN);
        assertEquals(8, DpaCap.LOG_MAX_HARTS_PER_PARTITION.get(dpa, HcaCap.OFFSET), "256 EUs");
        assertEquals(28, DpaCap.LOG_MAX_DPA_MEM.get(dpa, HcaCap.OFFSET));
        assertEquals(1, DpaCap.THREAD_AFFINITY_SINGLE_HART.get(dpa, HcaCap.OFFSET));
        // the model's extension fields say what the DPA it runs is (DpaConfig.bluefield3: EUs, the OS's EUs, the 120 s watchdog at 1.8 GHz)
        org.peerdirect.hca.dpa.DpaConfig bf3 = org.peerdirect.hca.dpa.DpaConfig.bluefield3();
        assertEquals(bf3.eus(), 1 << DpaCap.LOG_MAX_HARTS_PER_PARTITION.get(dpa, HcaCap.OFFSET));
        assertEquals(16, 1 << DpaCap.LOG_HARTS_PER_CORE.get(dpa, HcaCap.OFFSET), "16 EUs per core");
        assertEquals(bf3.reservedEus(), DpaCap.OS_RESERVED_HARTS.get(dpa, HcaCap.OFFSET));
        assertEquals(bf3.watchdogCycles() / 1_800_000_000L, DpaCap.KERNEL_MAX_RUN_TIME.get(dpa, HcaCap.OFFSET), "seconds");
        rig.close();

        rig(ConnectX4Device.DEVICE_CONNECTX4);
        refused(cmd(Mlx5Cmd.QUERY_HCA_CAP, HcaCap.TYPE_DPA << 1 | HcaCap.MODE_MAX, 0, 16, HcaCap.QUERY_OUT_LEN), Mlx5Cmd.STAT_BAD_PARAM_ERR,
                Syndromes.SYND_BAD_CAP);
        rig.ok(cmd(Mlx5Cmd.QUERY_HCA_CAP, HcaCap.TYPE_GENERAL << 1 | HcaCap.MODE_CUR, 0, 16, HcaCap.QUERY_OUT_LEN));
        general = output(HcaCap.QUERY_OUT_LEN);
        assertEquals(0, general.get(BE64, HcaCap.OFFSET + HcaCap.GENERAL_OBJ_TYPES), "no general objects on a ConnectX-4");
        assertEquals(0, HcaCap.LOG_MAX_UCTX.get(general, HcaCap.OFFSET), "no DevX on a ConnectX-4");
        refused(cmd(Mlx5Cmd.CREATE_UCTX, 0, 0, Devx.CREATE_UCTX_IN_LEN, 16), Mlx5Cmd.STAT_BAD_OP_ERR, Syndromes.SYND_UNKNOWN_OPCODE);
        refused(cmd(Mlx5Cmd.ALLOC_PD, 0, 1, 16, 16), Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_UID);
    }

    @Test
    void objectsRememberTheirUidAndAnotherUidIsRefused() {
        rig(ConnectX4Device.DEVICE_BLUEFIELD3);
        int a = createUctx();
        int b = createUctx();
        assertTrue(a != 0 && b != 0 && a != b, a + " " + b);
        assertTrue(refused(cmd(Mlx5Cmd.ALLOC_PD, 0, 77, 16, 16), Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_UID).contains("uid 77"));
        assertTrue(refused(cmd(Mlx5Cmd.QUERY_PAGES, Pages.QUERY_REGULAR, a, 16, 16), Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_UID)
                .contains("takes no uid"));
        int pdA = index(cmd(Mlx5Cmd.ALLOC_PD, 0, a, 16, 16));
        int uarA = index(cmd(Mlx5Cmd.ALLOC_UAR, 0, a, 16, 16));
        // b names a's PD (an mkey on it) and a's UAR (a CQ ringing it): refused
        Spec mkey = rig.createMkey(SLOT, pdA, 0x10000, 8192, rig.fresh(2), true);
        Devx.UID.set(mkey.inSeg(), 0, b);
        assertTrue(refused(mkey, Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_WRONG_UID).contains("belongs to uid " + a));
        Spec cq = cmd(Mlx5Cmd.CREATE_CQ, 0, b, (int) Cq.CREATE_CQ_IN_PAS + 8, 16);
        Cq.CQC_LOG_CQ_SIZE.set(cq.inSeg(), Cq.CREATE_CQ_IN_CQC, 6);
        Cq.CQC_UAR_PAGE.set(cq.inSeg(), Cq.CREATE_CQ_IN_CQC, uarA);
        Cq.CQC_C_EQN.set(cq.inSeg(), Cq.CREATE_CQ_IN_CQC, rig.eqns.get(0));
        cq.inSeg().set(BE64, Cq.CREATE_CQ_IN_CQC + Cq.CQC_DBR_ADDR, rig.page().iova());
        cq.inSeg().set(BE64, Cq.CREATE_CQ_IN_PAS, rig.page().iova());
        refused(cq, Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_WRONG_UID);
        // nor may b destroy them, or the kernel's objects
        refused(destroy(Mlx5Cmd.DEALLOC_PD, b, pdA), Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_WRONG_UID);
        refused(destroy(Mlx5Cmd.DESTROY_CQ, b, rig.cqns.get(0)), Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_WRONG_UID);
        refused(destroy(Mlx5Cmd.DESTROY_QP, b, rig.qpns.get(0)), Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_WRONG_UID);
        refused(destroy(Mlx5Cmd.DESTROY_MKEY, b, rig.mkeys.get(0)), Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_WRONG_UID);
        // a's own work: an mkey on its PD
        Spec own = rig.createMkey(SLOT, pdA, 0x10000, 8192, rig.fresh(2), true);
        Devx.UID.set(own.inSeg(), 0, a);
        int mkeyA = index(own);
        // the kernel's objects may be used by a uid (not changed: above): an mkey of a on the kernel's PD
        Spec onKernelPd = rig.createMkey(SLOT, rig.pds.get(0), 0x10000, 8192, rig.fresh(2), true);
        Devx.UID.set(onKernelPd.inSeg(), 0, a);
        onKernelPd.onOk = null;
        rig.ok(destroy(Mlx5Cmd.DESTROY_MKEY, a, index(onKernelPd)));
        // a user context with objects cannot go
        assertTrue(refused(destroyUctx(a), Mlx5Cmd.STAT_BAD_RES_STATE_ERR, Syndromes.SYND_OBJECTS_LIVE).contains("3 objects"));
        refused(destroyUctx(99), Mlx5Cmd.STAT_BAD_RES_ERR, Syndromes.SYND_NO_SUCH_OBJECT);
        rig.ok(destroy(Mlx5Cmd.DESTROY_MKEY, a, mkeyA));
        rig.ok(destroy(Mlx5Cmd.DEALLOC_UAR, a, uarA));
        rig.ok(destroy(Mlx5Cmd.DEALLOC_PD, 0, pdA)); // the kernel reaches every uid's objects (its cleanup)
        rig.ok(destroyUctx(a));
        rig.ok(destroyUctx(b));
        refused(cmd(Mlx5Cmd.ALLOC_PD, 0, a, 16, 16), Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_UID);
    }

    @Test
    void queuesAndMkeysTakeTheirMemoryFromUmems() {
        rig(ConnectX4Device.DEVICE_BLUEFIELD3);
        int a = createUctx();
        int b = createUctx();
        int uarA = index(cmd(Mlx5Cmd.ALLOC_UAR, 0, a, 16, 16));
        int pdA = index(cmd(Mlx5Cmd.ALLOC_PD, 0, a, 16, 16));
        Page p0 = rig.page();
        Page p1 = rig.page();
        Page p2 = rig.page();
        int umem = index(createUmem(a, 0, p0.iova(), p1.iova(), p2.iova()));
        // a CQ of 64 CQEs (4 KiB) in page 1, its doorbell record at the start of page 2
        int cqn = index(umemCq(a, uarA, 6, umem, 4096, 8192));
        assertTrue(refused(umemCq(a, uarA, 7, umem, 8192, 0), Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_UMEM).contains("needs 8192 bytes"),
                "a ring of 128 CQEs does not fit the last page");
        refused(umemCq(b, uarA, 6, umem, 0, 0), Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_WRONG_UID);
        refused(umemCq(a, uarA, 6, umem + 100, 0, 0), Mlx5Cmd.STAT_BAD_RES_ERR, Syndromes.SYND_NO_SUCH_OBJECT);
        // an RC QP of 4 send and 4 receive WQEs (1 KiB) at the start of the umem, its doorbell record beside the CQ's
        Spec qp = rig.createQp(SLOT, Qp.ST_RC, 2, 2, 2, uarA, pdA, cqn, cqn, new long[0]);
        Devx.UID.set(qp.inSeg(), 0, a);
        qp.inlen = (int) Qp.CREATE_QP_IN_PAS;
        Devx.QP_WQ_UMEM_VALID.set(qp.inSeg(), 0, 1);
        qp.inSeg().set(BE32, Devx.QP_WQ_UMEM_ID, umem);
        qp.inSeg().set(BE64, Devx.QP_WQ_UMEM_OFFSET, 0);
        Devx.QPC_DBR_UMEM_VALID.set(qp.inSeg(), Qp.IN_QPC, 1);
        Devx.QPC_DBR_UMEM_ID.set(qp.inSeg(), Qp.IN_QPC, umem);
        qp.inSeg().set(BE64, Qp.IN_QPC + Qp.QPC_DBR_ADDR, 8192 + 64);
        qp.onOk = null;
        int qpn = index(qp);
        // an mkey over the umem's first page, VA 0x7000 at umem offset 0
        Spec mk = rig.createMkey(SLOT, pdA, 0x7000, 4096, new long[0], true);
        Devx.UID.set(mk.inSeg(), 0, a);
        Devx.MKEY_UMEM_VALID.set(mk.inSeg(), 0, 1);
        mk.inSeg().set(BE32, Devx.MKEY_UMEM_ID, umem);
        mk.inSeg().set(BE64, Devx.MKEY_UMEM_OFFSET, 0);
        mk.onOk = null;
        int mkey = index(mk);
        mk.inSeg().set(BE64, Devx.MKEY_UMEM_OFFSET, 16); // VA 0x7000 is not at byte 16 of a page
        assertTrue(refused(mk, Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_UMEM).contains("mkey_umem_offset"));
        // in use: the umem stays until its queues and mkey are gone
        assertTrue(refused(destroy(Mlx5Cmd.DESTROY_UMEM, a, umem), Mlx5Cmd.STAT_BAD_RES_STATE_ERR, Syndromes.SYND_OBJECTS_LIVE).contains("5 rings"));
        refused(destroy(Mlx5Cmd.DESTROY_UMEM, b, umem), Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_WRONG_UID);
        rig.ok(destroy(Mlx5Cmd.DESTROY_QP, a, qpn));
        rig.ok(destroy(Mlx5Cmd.DESTROY_MKEY, a, mkey));
        rig.ok(destroy(Mlx5Cmd.DESTROY_CQ, a, cqn));
        rig.ok(destroy(Mlx5Cmd.DESTROY_UMEM, a, umem));
        refused(destroy(Mlx5Cmd.DESTROY_UMEM, a, umem), Mlx5Cmd.STAT_BAD_RES_ERR, Syndromes.SYND_NO_SUCH_OBJECT);
        // a bad umem: no page present, a page size the model does not take
        Spec bad = createUmem(a, 0, rig.page().iova());
        bad.inSeg().set(BE64, Devx.UMEM_MTT, rig.page().iova()); // rd_en clear
        refused(bad, Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_UMEM);
        Spec big = createUmem(a, 0, rig.page().iova());
        Devx.UMEM_LOG_PAGE_SIZE.set(big.inSeg(), 0, 9);
        refused(big, Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_UMEM);
        rig.ok(destroy(Mlx5Cmd.DEALLOC_PD, a, pdA));
        rig.ok(destroy(Mlx5Cmd.DEALLOC_UAR, a, uarA));
        rig.ok(destroyUctx(a));
    }

    /** A modify-QP command of uid {@code uid} on {@code qpn}: the context fields follow at {@link Qp#IN_QPC}. */
    Spec modifyQp(int opcode, int uid, int qpn) {
        Spec s = cmd(opcode, 0, uid, Qp.MODIFY_IN_LEN, 16);
        Pages.INDEX24.set(s.inSeg(), 0, qpn);
        return s;
    }

    /** RESET -> INIT -> RTR -> RTS of RC QP {@code qpn} of uid {@code uid}, its path to itself by the port's GID (RoCE). */
    void connectToItself(int a, int qpn) {
        Spec gidCmd = cmd(Mlx5Cmd.QUERY_HCA_VPORT_GID, 0, 0, 16, org.peerdirect.hca.cx4.ifc.Vport.GID_OUT_LEN);
        org.peerdirect.hca.cx4.ifc.Vport.IN_PORT_NUM.set(gidCmd.inSeg(), 0, 1);
        rig.ok(gidCmd);
        MemorySegment gid = output(org.peerdirect.hca.cx4.ifc.Vport.GID_OUT_LEN).asSlice(org.peerdirect.hca.cx4.ifc.Vport.OUT_GID, 16);
        Spec init = modifyQp(Qp.RST2INIT_QP, a, qpn);
        Qp.QPC_PRI_VHCA_PORT_NUM.set(init.inSeg(), Qp.IN_QPC, 1);
        Qp.QPC_RWE.set(init.inSeg(), Qp.IN_QPC, 1);
        rig.ok(init);
        Spec rtr = modifyQp(Qp.INIT2RTR_QP, a, qpn);
        Qp.QPC_RWE.set(rtr.inSeg(), Qp.IN_QPC, 1);
        Qp.QPC_MTU.set(rtr.inSeg(), Qp.IN_QPC, 3);
        Qp.QPC_REMOTE_QPN.set(rtr.inSeg(), Qp.IN_QPC, qpn);
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

    /**
     * The data path through a umem: an RC QP whose work queue and doorbell record are in the umem,
     * completing to a CQ whose ring and record are in it too, writes by RDMA WRITE looped back
     * (RoCE, to its own GID) from one half of a page of the umem to the other, both through an mkey
     * over that page of the umem; the CQE lands in the umem's ring.
     */
    @Test
    void aQpAndACqInAUmemCarryAnRdmaWriteThroughAnMkeyInIt() {
        rig(ConnectX4Device.DEVICE_BLUEFIELD3);
        int a = createUctx();
        int uar = index(cmd(Mlx5Cmd.ALLOC_UAR, 0, a, 16, 16));
        int pd = index(cmd(Mlx5Cmd.ALLOC_PD, 0, a, 16, 16));
        Page[] p = {rig.page(), rig.page(), rig.page(), rig.page()};
        int umem = index(createUmem(a, 0, p[0].iova(), p[1].iova(), p[2].iova(), p[3].iova()));
        for (int i = 0; i < 64; i++) { // libmlx5's ring: every CQE invalid, hardware-owned
            p[0].mem().set(java.lang.foreign.ValueLayout.JAVA_BYTE, i * 64L + Cq.CQE_OP_OWN, (byte) (Cq.CQE_INVALID << 4 | 1));
        }
        int cqn = index(umemCq(a, uar, 6, umem, 0, 8192)); // ring: umem page 0; record: page 2
        Spec qp = rig.createQp(SLOT, Qp.ST_RC, 2, 2, 2, uar, pd, cqn, cqn, new long[0]);
        qp.onOk = null;
        qp.inlen = (int) Qp.CREATE_QP_IN_PAS;
        Devx.UID.set(qp.inSeg(), 0, a);
        Devx.QP_WQ_UMEM_VALID.set(qp.inSeg(), 0, 1);
        qp.inSeg().set(BE32, Devx.QP_WQ_UMEM_ID, umem);
        qp.inSeg().set(BE64, Devx.QP_WQ_UMEM_OFFSET, 4096); // page 1: 4 receive WQEs of 64 bytes, then the send queue
        Devx.QPC_DBR_UMEM_VALID.set(qp.inSeg(), Qp.IN_QPC, 1);
        Devx.QPC_DBR_UMEM_ID.set(qp.inSeg(), Qp.IN_QPC, umem);
        qp.inSeg().set(BE64, Qp.IN_QPC + Qp.QPC_DBR_ADDR, 8192 + 64);
        int qpn = index(qp);
        Spec mk = rig.createMkey(SLOT, pd, 0x30000, 4096, new long[0], true);
        mk.onOk = null;
        Devx.UID.set(mk.inSeg(), 0, a);
        Devx.MKEY_UMEM_VALID.set(mk.inSeg(), 0, 1);
        mk.inSeg().set(BE32, Devx.MKEY_UMEM_ID, umem);
        mk.inSeg().set(BE64, Devx.MKEY_UMEM_OFFSET, 3 * 4096); // page 3 is VA 0x30000
        int key = index(mk) << 8; // mkey_7_0 is 0
        connectToItself(a, qpn);
        // the data: 64 bytes at VA 0x30000, written to VA 0x30800
        MemorySegment data = p[3].mem();
        for (int i = 0; i < 64; i++) {
            data.set(java.lang.foreign.ValueLayout.JAVA_BYTE, i, (byte) (i * 7 + 1));
        }
        // one RDMA WRITE WQE at send-queue index 0 (page 1 after the 256 bytes of receive queue): ctrl, raddr, data segments
        MemorySegment wqe = p[1].mem().asSlice(256, Qp.SEND_WQE_BB);
        wqe.set(BE32, Qp.CTRL_OPMOD_IDX_OPCODE, org.peerdirect.hca.cx4.ifc.Wqe.OP_RDMA_WRITE);
        wqe.set(BE32, Qp.CTRL_QPN_DS, qpn << 8 | 3);
        wqe.set(java.lang.foreign.ValueLayout.JAVA_BYTE, Qp.CTRL_FM_CE_SE, (byte) Qp.CTRL_CQ_UPDATE);
        wqe.set(BE64, 16 + Qp.RADDR_VA, 0x30800);
        wqe.set(BE32, 16 + Qp.RADDR_RKEY, key);
        wqe.set(BE32, 32 + Qp.DATA_BYTE_COUNT, 64);
        wqe.set(BE32, 32 + Qp.DATA_LKEY, key);
        wqe.set(BE64, 32 + Qp.DATA_ADDR, 0x30000);
        p[2].mem().set(BE32, 64 + Qp.DBR_SND, 1); // the send counter in the umem's doorbell record
        rig.fn.write64(0, ((long) uar << 12) + Qp.UAR_BF_OFFSET, Long.reverseBytes(wqe.get(BE64, 0)));
        long deadline = System.nanoTime() + 10_000_000_000L;
        int opOwn;
        while (((opOwn = p[0].mem().get(java.lang.foreign.ValueLayout.JAVA_BYTE, Cq.CQE_OP_OWN) & 0xff) >>> 4) == Cq.CQE_INVALID) {
            assertTrue(System.nanoTime() < deadline, "a CQE in the umem's ring within 10 s: " + rig.dev.describe());
            Thread.onSpinWait();
        }
        assertEquals(Cq.CQE_REQ, opOwn >>> 4, String.format("a requester CQE, not op_own 0x%x: %s", opOwn, rig.dev.describe()));
        for (int i = 0; i < 64; i++) {
            assertEquals((byte) (i * 7 + 1), data.get(java.lang.foreign.ValueLayout.JAVA_BYTE, 0x800 + i), "byte " + i + " written through the mkey in the umem");
        }
        rig.ok(destroy(Mlx5Cmd.DESTROY_QP, a, qpn));
        rig.ok(destroy(Mlx5Cmd.DESTROY_MKEY, a, key >>> 8));
        rig.ok(destroy(Mlx5Cmd.DESTROY_CQ, a, cqn));
        rig.ok(destroy(Mlx5Cmd.DESTROY_UMEM, a, umem));
    }

    /** A general object type of this test: an object holds one 32-bit word; 0xdead marks it in use (destroy refused). */
    static final class Word implements GeneralObjectType {
        static final int TYPE = 0x4242;
        final Map<Integer, Integer> words = new HashMap<>();
        int next = 1;

        @Override
        public int objType() {
            return TYPE;
        }

        @Override
        public int create(int uid, MemorySegment obj, MemorySegment out) throws Refused {
            if (obj.byteSize() < 4) {
                throw new Refused(Mlx5Cmd.STAT_BAD_INP_LEN_ERR, Syndromes.SYND_SHORT_INPUT, "a word object needs 4 bytes");
            }
            words.put(next, obj.get(BE32, 0));
            return next++;
        }

        @Override
        public void modify(int uid, int objId, MemorySegment obj) {
            words.put(objId, obj.get(BE32, 0));
        }

        @Override
        public void query(int uid, int objId, MemorySegment out) {
            out.set(BE32, 16, words.get(objId));
        }

        @Override
        public void destroy(int uid, int objId) throws Refused {
            if (words.get(objId) == 0xdead) {
                throw new Refused(Mlx5Cmd.STAT_BAD_RES_STATE_ERR, Syndromes.SYND_OBJECTS_LIVE, "word " + objId + " is in use");
            }
            words.remove(objId);
        }
    }

    Spec general(int opcode, int objType, int uid, int objId, int word) {
        Spec s = cmd(opcode, objType, uid, Devx.GENERAL_OBJ_HDR + 4, 32);
        s.inSeg().set(BE32, Devx.OBJ_ID, objId);
        s.inSeg().set(BE32, Devx.GENERAL_OBJ_HDR, word);
        return s;
    }

    @Test
    void theDispatcherChecksTypeObjectAndUidBeforeTheType() {
        rig(ConnectX4Device.DEVICE_BLUEFIELD3);
        Word type = new Word();
        rig.dev.addGeneralObjectType(type);
        int a = createUctx();
        int b = createUctx();
        Outcome made = rig.ok(general(Mlx5Cmd.CREATE_GENERAL_OBJECT, Word.TYPE, a, 0, 41));
        int id = made.outHeader().get(BE32, Devx.OBJ_ID);
        assertEquals(41, type.words.get(id), "the type got the context after the header");
        assertTrue(refused(general(Mlx5Cmd.CREATE_GENERAL_OBJECT, 0x7777, a, 0, 1), Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_OBJ_TYPE)
                .contains("0x4242"), "the refusal names the types there are");
        refused(general(Mlx5Cmd.QUERY_GENERAL_OBJECT, Word.TYPE, a, id + 1, 0), Mlx5Cmd.STAT_BAD_RES_ERR, Syndromes.SYND_NO_SUCH_OBJECT);
        refused(general(Mlx5Cmd.MODIFY_GENERAL_OBJECT, Word.TYPE, b, id, 5), Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_WRONG_UID);
        refused(general(Mlx5Cmd.DESTROY_GENERAL_OBJECT, Word.TYPE, b, id, 0), Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_WRONG_UID);
        assertEquals(41, type.words.get(id), "b changed nothing");
        // a change of the object: an OBJECT_CHANGE EQE naming it, on the EQ that asked for the type
        assertTrue(!rig.dev.objectChanged(Word.TYPE, id), "no EQ takes OBJECT_CHANGE yet");
        assertTrue(!rig.dev.objectChanged(Word.TYPE, id + 1), "no such object");
        Page ring = rig.page();
        Spec eq = new Spec(SLOT, Mlx5Cmd.CREATE_EQ, 0, (int) org.peerdirect.hca.cx4.ifc.Eq.CREATE_EQ_IN_PAS + 8, 16);
        org.peerdirect.hca.cx4.ifc.Eq.EQC_LOG_EQ_SIZE.set(eq.inSeg(), org.peerdirect.hca.cx4.ifc.Eq.CREATE_EQ_IN_EQC, 6);
        org.peerdirect.hca.cx4.ifc.Eq.EQC_UAR_PAGE.set(eq.inSeg(), org.peerdirect.hca.cx4.ifc.Eq.CREATE_EQ_IN_EQC, rig.uars.get(0));
        eq.inSeg().set(BE64, org.peerdirect.hca.cx4.ifc.Eq.CREATE_EQ_IN_EVENT_BITMASK, 1L << org.peerdirect.hca.cx4.ifc.Eq.EVENT_OBJECT_CHANGE);
        eq.inSeg().set(BE64, org.peerdirect.hca.cx4.ifc.Eq.CREATE_EQ_IN_PAS, ring.iova());
        rig.ok(eq);
        assertTrue(rig.dev.objectChanged(Word.TYPE, id), "posted");
        MemorySegment eqe = ring.mem();
        assertEquals(org.peerdirect.hca.cx4.ifc.Eq.EVENT_OBJECT_CHANGE, eqe.get(java.lang.foreign.ValueLayout.JAVA_BYTE,
                org.peerdirect.hca.cx4.ifc.Eq.EQE_TYPE) & 0xff);
        long d = org.peerdirect.hca.cx4.ifc.Eq.EQE_DATA;
        assertEquals(Word.TYPE, eqe.get(org.peerdirect.hca.cx4.ifc.CmdEntry.BE16, d + org.peerdirect.hca.cx4.ifc.Eq.OBJ_CHANGE_TYPE) & 0xffff);
        assertEquals(id, eqe.get(BE32, d + org.peerdirect.hca.cx4.ifc.Eq.OBJ_CHANGE_ID));
        rig.ok(general(Mlx5Cmd.MODIFY_GENERAL_OBJECT, Word.TYPE, a, id, 0xdead));
        rig.ok(general(Mlx5Cmd.QUERY_GENERAL_OBJECT, Word.TYPE, a, id, 0));
        assertEquals(0xdead, output(32).get(BE32, 16), "QUERY wrote the context after the output header");
        refused(general(Mlx5Cmd.DESTROY_GENERAL_OBJECT, Word.TYPE, a, id, 0), Mlx5Cmd.STAT_BAD_RES_STATE_ERR, Syndromes.SYND_OBJECTS_LIVE);
        assertTrue(refused(destroyUctx(a), Mlx5Cmd.STAT_BAD_RES_STATE_ERR, Syndromes.SYND_OBJECTS_LIVE).contains("1 general objects"));
        rig.ok(general(Mlx5Cmd.MODIFY_GENERAL_OBJECT, Word.TYPE, a, id, 0));
        rig.ok(general(Mlx5Cmd.DESTROY_GENERAL_OBJECT, Word.TYPE, a, id, 0));
        assertTrue(type.words.isEmpty());
        rig.ok(destroyUctx(a));
        rig.ok(destroyUctx(b));
    }
}

package org.peerdirect.mlx5.ib;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE32;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE64;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.hca.cx4.ConnectX4Device;
import org.peerdirect.hca.cx4.ifc.Cq;
import org.peerdirect.hca.cx4.ifc.Devx;
import org.peerdirect.hca.cx4.ifc.DpaObj;
import org.peerdirect.hca.cx4.ifc.Eq;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.cx4.ifc.Pages;
import org.peerdirect.ib.core.umem.IbAccess;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.mlx5.dv.Mlx5dv;

/**
 * DevX through the user library ({@link Mlx5dv}) on a BlueField-3 model, two processes: a uid per
 * context (none on a ConnectX-4), umems over pinned process memory, a CQ whose ring and doorbell
 * record are in a umem, the uid the driver stamps whatever the user wrote, another process's umem
 * refused by the firmware, commands that do not act on the handle's object refused by the driver,
 * and cleanup at close and at the process's exit that leaves the firmware with no DevX object and
 * every page returned (the machine's leak checks).
 */
class Mlx5DevxTest extends Mlx5Machine {

    @TempDir
    Path tmp;
    AddressSpace procB;
    boolean bExited;

    @BeforeEach
    void up() {
        startMachine(tmp, "devx-a", ConnectX4Device.DEVICE_BLUEFIELD3, ConnectX4Device.DEVICE_CONNECTX4);
        procB = mm.createProcess("devx-b");
        procB.setMemlockLimit(64L << 20);
    }

    @AfterEach
    void down() {
        if (!bExited) {
            procB.exit();
        }
        assertEquals(0, models.get(0).devxLive(), "no DevX object left in the firmware: " + models.get(0).devxDescribe());
        assertEquals(List.of(), stopMachine(), "every DMA page freed, no page with the firmware, IOMMU clean, every frame free");
    }

    /** {@code pages} pages of {@code p}'s memory, touched. */
    static long buffer(AddressSpace p, int pages) {
        long va = p.mmap(4096L * pages);
        p.populate(va, 4096L * pages, true);
        return va;
    }

    /** CREATE_CQ of 64 CQEs, its ring at offset 0 of {@code umem}, its doorbell record at 4096, on {@code uar}; a uid of the user's own choosing in the header. */
    static MemorySegment createCq(int eqn, int uar, int umem, int logSize) {
        MemorySegment in = MemorySegment.ofArray(new byte[(int) Cq.CREATE_CQ_IN_PAS]);
        in.set(BE32, 0, Mlx5Cmd.CREATE_CQ << 16 | 0x7777); // a uid the driver must overwrite
        long c = Cq.CREATE_CQ_IN_CQC;
        Cq.CQC_LOG_CQ_SIZE.set(in, c, logSize);
        Cq.CQC_UAR_PAGE.set(in, c, uar);
        Cq.CQC_C_EQN.set(in, c, eqn);
        Devx.CQ_UMEM_VALID.set(in, 0, 1);
        in.set(BE32, Devx.CQ_UMEM_ID, umem);
        in.set(BE64, Devx.CQ_UMEM_OFFSET, 0);
        Devx.CQC_DBR_UMEM_VALID.set(in, c, 1);
        Devx.CQC_DBR_UMEM_ID.set(in, c, umem);
        in.set(BE64, c + Cq.CQC_DBR_ADDR, 4096);
        return in;
    }

    @Test
    void aUmemBackedCqOfOneProcessIsItsOwnAndGoesAtCloseAndAtExit() throws Exception {
        IbvContext a = devs.get(0).open(proc);
        IbvContext b = devs.get(0).open(procB);
        assertEquals(2, models.get(0).devxLive(), "a uid per context: " + models.get(0).devxDescribe());
        IbvContext cx4 = devs.get(1).open(proc);
        KernelException none = assertThrows(KernelException.class, () -> Mlx5dv.devxAllocUar(cx4));
        assertEquals(KernelException.Errno.EOPNOTSUPP, none.errno(), "no DevX on a ConnectX-4");
        cx4.close();

        long va = buffer(proc, 2);
        Mlx5dv.DevxUmem umem = Mlx5dv.devxUmemReg(a, va, 8192, IbAccess.LOCAL_WRITE);
        Mlx5dv.DevxUar uar = Mlx5dv.devxAllocUar(a);
        int eqn = Mlx5dv.devxQueryEqn(a, 0);
        Mlx5dv.DevxObj cq = Mlx5dv.devxObjCreate(a, createCq(eqn, uar.page(), umem.umemId(), 6), 16);
        int cqn = Pages.INDEX24.get(cq.out(), 0);
        assertTrue(models.get(0).devxDescribe().contains("umems 1"), models.get(0).devxDescribe());
        // the CQ's context as created: on a's UAR (the firmware took it: the uid was a's, not 0x7777)
        MemorySegment q = MemorySegment.ofArray(new byte[16]);
        q.set(BE32, 0, Mlx5Cmd.QUERY_CQ << 16);
        Pages.INDEX24.set(q, 0, cqn);
        MemorySegment ctx = Mlx5dv.devxObjQuery(cq, q, (int) Cq.CREATE_CQ_IN_PAS);
        assertEquals(uar.page(), Cq.CQC_UAR_PAGE.get(ctx, Cq.CREATE_CQ_IN_CQC));
        assertEquals(6, Cq.CQC_LOG_CQ_SIZE.get(ctx, Cq.CREATE_CQ_IN_CQC));

        // bad inputs, each with the model's syndrome (hca-sim's Syndromes: 0x0bad0012 another uid's object, 0x0bad0106 a umem
        // too small, 0x0bad0013 no such obj_type): b on a's umem (the firmware), a query naming another object (the driver),
        // a ring larger than the umem, a general object of no type, a umem in use
        Mlx5dv.DevxUar uarB = Mlx5dv.devxAllocUar(b);
        KernelException foreign = assertThrows(KernelException.class, () -> Mlx5dv.devxObjCreate(b, createCq(eqn, uarB.page(), umem.umemId(), 6), 16));
        assertTrue(foreign.getMessage().contains("syndrome (0xbad0012)"), foreign.getMessage());
        MemorySegment other = MemorySegment.ofArray(new byte[16]);
        other.set(BE32, 0, Mlx5Cmd.QUERY_CQ << 16);
        Pages.INDEX24.set(other, 0, cqn + 1);
        assertEquals(KernelException.Errno.EINVAL, assertThrows(KernelException.class, () -> Mlx5dv.devxObjQuery(cq, other, 64)).errno());
        KernelException small = assertThrows(KernelException.class, () -> Mlx5dv.devxObjCreate(a, createCq(eqn, uar.page(), umem.umemId(), 8), 16));
        assertTrue(small.getMessage().contains("syndrome (0xbad0106)"), small.getMessage());
        MemorySegment gen = MemorySegment.ofArray(new byte[32]);
        gen.set(BE32, 0, Mlx5Cmd.CREATE_GENERAL_OBJECT << 16);
        Devx.OBJ_TYPE.set(gen, 0, 0x7777);
        KernelException type = assertThrows(KernelException.class, () -> Mlx5dv.devxObjCreate(a, gen, 16));
        assertTrue(type.getMessage().contains("syndrome (0xbad0013)"), type.getMessage());
        MemorySegment eq = MemorySegment.ofArray(new byte[16]);
        eq.set(BE32, 0, Mlx5Cmd.CREATE_EQ << 16);
        assertEquals(KernelException.Errno.EINVAL, assertThrows(KernelException.class, () -> Mlx5dv.devxObjCreate(a, eq, 16)).errno(),
                "CREATE_EQ is no DevX object");
        assertThrows(KernelException.class, () -> Mlx5dv.devxUmemDereg(umem), "the CQ uses it");

        // an event channel: the CQ's object-change events, none until one is raised
        Mlx5dv.DevxEventChannel ch = Mlx5dv.devxCreateEventChannel(a);
        Mlx5dv.devxSubscribeDevxEvent(ch, cq, new int[] {Eq.EVENT_OBJECT_CHANGE}, 42);
        assertNull(Mlx5dv.devxGetEvent(ch, Duration.ofMillis(10)));
        ibs.get(0).objectChange(0, cqn); // what an OBJECT_CHANGE EQE naming it does
        Mlx5dv.DevxEvent e = Mlx5dv.devxGetEvent(ch, Duration.ofSeconds(5));
        assertEquals(new Mlx5dv.DevxEvent(42, Eq.EVENT_OBJECT_CHANGE, 0, cqn), e);

        // b's own umem-backed CQ, left for its exit
        long vb = buffer(procB, 2);
        Mlx5dv.DevxUmem umemB = Mlx5dv.devxUmemReg(b, vb, 8192, IbAccess.LOCAL_WRITE);
        Mlx5dv.devxObjCreate(b, createCq(eqn, uarB.page(), umemB.umemId(), 6), 16);
        assertNotEquals(umem.umemId(), umemB.umemId());

        // a closes with its CQ, umem, UAR and channel live: all of it goes, in order, and its uid
        a.close();
        assertEquals(KernelException.Errno.EINVAL, assertThrows(KernelException.class, () -> Mlx5dv.devxGetEvent(ch, Duration.ofMillis(10))).errno(),
                "a closed context's channel (a reader blocked at the close wakes with EIO)");
        assertTrue(models.get(0).devxDescribe().startsWith("user contexts 1, umems 1,"), models.get(0).devxDescribe());
        // b is killed: its exit closes the context the same way
        procB.exit();
        bExited = true;
        assertEquals(0, models.get(0).devxLive(), models.get(0).devxDescribe());
        assertTrue(models.get(0).devxDescribe().endsWith("CQs 0"), models.get(0).devxDescribe());
    }

    /**
     * {@code mlx5dv_devx_create_event_channel} + {@code mlx5dv_devx_subscribe_devx_event} for
     * {@code OBJECT_CHANGE} of a DPA general object (a DPA_MEM here; flexio's tests raise it from a
     * device {@code flexio_dev_error} on a DPA_PROCESS): the firmware's {@code OBJECT_CHANGE} EQE
     * reaches the channel through mlx5_core's EQ and DevX's notifier with the subscription's cookie,
     * the object's type and id, on every channel subscribed, on none other. Bad input, with the
     * kernel's errno: another context's object (ENOENT, a handle the file does not hold), a umem
     * handle where an object is wanted (EINVAL), another context's channel (EBADF), no event type
     * (EINVAL); after the object's destroy its subscriptions are gone.
     */
    @Test
    void aDpaObjectsChangeReachesTheSubscribedChannelsWithItsId() throws Exception {
        IbvContext a = devs.get(0).open(proc);
        IbvContext b = devs.get(0).open(procB);
        MemorySegment in = MemorySegment.ofArray(new byte[Devx.GENERAL_OBJ_HDR + DpaObj.CONTEXT_SIZE]);
        in.set(BE32, 0, Mlx5Cmd.CREATE_GENERAL_OBJECT << 16);
        Devx.OBJ_TYPE.set(in, 0, DpaObj.OBJ_DPA_MEM);
        DpaObj.set64(in.asSlice(Devx.GENERAL_OBJ_HDR), DpaObj.MEM_SIZE, 4096);
        Mlx5dv.DevxObj mem = Mlx5dv.devxObjCreate(a, in, Devx.GENERAL_OBJ_HDR + DpaObj.CONTEXT_SIZE);
        int memId = mem.out().get(BE32, Devx.OBJ_ID);
        Mlx5dv.DevxEventChannel ch = Mlx5dv.devxCreateEventChannel(a);
        Mlx5dv.DevxEventChannel quiet = Mlx5dv.devxCreateEventChannel(a);
        Mlx5dv.DevxEventChannel chB = Mlx5dv.devxCreateEventChannel(b);
        Mlx5dv.devxSubscribeDevxEvent(ch, mem, new int[] {Eq.EVENT_OBJECT_CHANGE}, 0xfeed);

        KernelException foreign = assertThrows(KernelException.class,
                () -> Mlx5dv.devxSubscribeDevxEvent(chB, mem, new int[] {Eq.EVENT_OBJECT_CHANGE}, 1));
        assertEquals(KernelException.Errno.ENOENT, foreign.errno(), "another uid's object: " + foreign.getMessage());
        long va = buffer(proc, 1);
        Mlx5dv.DevxUmem umem = Mlx5dv.devxUmemReg(a, va, 4096, IbAccess.LOCAL_WRITE);
        // the ioctl with a umem's handle where an object's is wanted (libmlx5 cannot build it; a raw ioctl can)
        assertEquals(KernelException.Errno.EINVAL, assertThrows(KernelException.class, () -> a.driverMethod("DEVX_SUBSCRIBE_EVENT", ch.id(),
                umem.handle(), new int[] {Eq.EVENT_OBJECT_CHANGE}, 1L)).errno(), "a umem is no DevX object");
        assertEquals(KernelException.Errno.EBADF, assertThrows(KernelException.class,
                () -> Mlx5dv.devxSubscribeDevxEvent(new Mlx5dv.DevxEventChannel(a, chB.id() + 100), mem, new int[] {Eq.EVENT_OBJECT_CHANGE}, 1)).errno(),
                "a channel this context never opened");
        assertEquals(KernelException.Errno.EINVAL, assertThrows(KernelException.class,
                () -> Mlx5dv.devxSubscribeDevxEvent(ch, mem, new int[0], 1)).errno(), "no event type");

        assertTrue(models.get(0).objectChanged(DpaObj.OBJ_DPA_MEM, memId), "the firmware posted OBJECT_CHANGE on the async EQ");
        assertEquals(new Mlx5dv.DevxEvent(0xfeed, Eq.EVENT_OBJECT_CHANGE, DpaObj.OBJ_DPA_MEM, memId), Mlx5dv.devxGetEvent(ch, Duration.ofSeconds(10)));
        assertNull(Mlx5dv.devxGetEvent(quiet, Duration.ofMillis(20)), "a channel not subscribed gets nothing");
        assertNull(Mlx5dv.devxGetEvent(chB, Duration.ofMillis(20)), "nor another context's");
        assertNull(Mlx5dv.devxGetEvent(ch, Duration.ofMillis(20)), "one event per change");

        Mlx5dv.devxObjDestroy(mem);
        assertFalse(models.get(0).objectChanged(DpaObj.OBJ_DPA_MEM, memId), "no such object any more");
        Mlx5dv.devxUmemDereg(umem);
        Mlx5dv.devxDestroyEventChannel(ch);
        assertEquals(KernelException.Errno.EBADF, assertThrows(KernelException.class, () -> Mlx5dv.devxGetEvent(ch, Duration.ofMillis(1))).errno());
        a.close();
        b.close();
    }

    /**
     * Verbs on the BlueField-3: the tools' contexts get uids, their PDs, CQs and UARs carry them,
     * the kernel's QPs and mkeys on them (uid 0) are allowed; a validated RC pingpong over RoCE
     * (looped back by GID) and nothing of DevX left after.
     */
    @Test
    void verbsRunOnTheBlueField3UnderTheContextsUid() throws Exception {
        String out = tools().pingpong("-d", "mlx5_0", "-s", "4096", "-n", "100", "-c");
        assertTrue(out.contains("no mismatch"), out);
        assertEquals(0, models.get(0).devxLive(), models.get(0).devxDescribe());
    }

    /**
     * The cleanup order of a context's DevX objects: DPA threads, queues and mkeys, windows and outboxes, processes, DPA memory,
     * PDs; umems; UARs. An mkey goes before the process or DPA_MEM whose DUMEM it may map (the firmware refuses their destroy
     * while it lives).
     */
    @Test
    void cleanupTakesObjectsByDependencyRank() {
        int[][] order = { {Mlx5Cmd.CREATE_GENERAL_OBJECT, 0x2b}, {Mlx5Cmd.CREATE_QP, 0}, {Mlx5Cmd.CREATE_CQ, 0}, {Mlx5Cmd.CREATE_MKEY, 0},
                {Mlx5Cmd.CREATE_GENERAL_OBJECT, 0x39}, {Mlx5Cmd.CREATE_GENERAL_OBJECT, 0x2d}, {Mlx5Cmd.CREATE_GENERAL_OBJECT, 0x2a},
                {Mlx5Cmd.CREATE_GENERAL_OBJECT, 0x28}, {Mlx5Cmd.ALLOC_PD, 0} };
        for (int i = 1; i < order.length; i++) {
            assertTrue(Mlx5Devx.rank(order[i - 1][0], order[i - 1][1]) <= Mlx5Devx.rank(order[i][0], order[i][1]),
                    Mlx5Cmd.name(order[i - 1][0]) + " 0x" + Integer.toHexString(order[i - 1][1]) + " before " + Mlx5Cmd.name(order[i][0]));
        }
        assertTrue(Mlx5Devx.rank(Mlx5Cmd.CREATE_GENERAL_OBJECT, 0x2b) < Mlx5Devx.rank(Mlx5Cmd.CREATE_GENERAL_OBJECT, 0x2a), "threads before processes");
        assertTrue(Mlx5Devx.rank(Mlx5Cmd.CREATE_GENERAL_OBJECT, 0x39) < Mlx5Devx.rank(Mlx5Cmd.CREATE_GENERAL_OBJECT, 0x2a), "windows before processes");
        assertTrue(Mlx5Devx.rank(Mlx5Cmd.CREATE_MKEY, 0) < Mlx5Devx.rank(Mlx5Cmd.CREATE_GENERAL_OBJECT, 0x2a), "mkeys (over a DUMEM) before processes");
        assertTrue(Mlx5Devx.rank(Mlx5Cmd.CREATE_GENERAL_OBJECT, 0x2a) < 7, "processes before umems (rank 7) and UARs (8)");
    }

    /**
     * {@code mlx5dv_devx_general_cmd}: QUERY_HCA_CAP of the DPA block answers under the context's uid (a uid of the user's
     * choosing in the header is overwritten, else the firmware would refuse it as naming no context); a command that is no
     * general query is refused by the driver with EINVAL naming it, and reaches no firmware.
     */
    @Test
    void aGeneralCommandQueriesTheDpaCapabilitiesAndOthersAreRefused() {
        IbvContext a = devs.get(0).open(proc);
        MemorySegment q = MemorySegment.ofArray(new byte[16]);
        q.set(BE32, 0, Mlx5Cmd.QUERY_HCA_CAP << 16 | 0x7777);
        q.set(BE32, 4, org.peerdirect.hca.cx4.ifc.HcaCap.TYPE_DPA << 1 | org.peerdirect.hca.cx4.ifc.HcaCap.MODE_CUR);
        MemorySegment out = Mlx5dv.devxGeneralCmd(a, q, org.peerdirect.hca.cx4.ifc.HcaCap.QUERY_OUT_LEN);
        long off = org.peerdirect.hca.cx4.ifc.HcaCap.OFFSET;
        assertEquals(0, out.get(java.lang.foreign.ValueLayout.JAVA_BYTE, 0), "status OK");
        assertEquals(8, org.peerdirect.hca.cx4.ifc.DpaCap.LOG_MAX_HARTS_PER_PARTITION.get(out, off), "256 EUs");
        assertEquals(2, org.peerdirect.hca.cx4.ifc.DpaCap.OS_RESERVED_HARTS.get(out, off));
        assertEquals(models.get(0).dpaCapValues().get("log_max_dpa_mem").intValue(), org.peerdirect.hca.cx4.ifc.DpaCap.LOG_MAX_DPA_MEM.get(out, off),
                "the same block dpa:caps shows");

        MemorySegment bad = MemorySegment.ofArray(new byte[16]);
        bad.set(BE32, 0, Mlx5Cmd.DESTROY_UCTX << 16);
        KernelException e = assertThrows(KernelException.class, () -> Mlx5dv.devxGeneralCmd(a, bad, 16));
        assertEquals(KernelException.Errno.EINVAL, e.errno());
        assertTrue(e.getMessage().contains("DESTROY_UCTX") && e.getMessage().contains("no general command"), e.getMessage());
        assertEquals(1, models.get(0).devxLive(), "the context's uid is still there: " + models.get(0).devxDescribe());
        a.close();
    }
}

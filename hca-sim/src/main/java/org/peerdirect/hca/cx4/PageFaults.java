package org.peerdirect.hca.cx4;

import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE16;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE32;
import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE64;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.ToIntFunction;

import org.peerdirect.hca.cx4.ifc.Eq;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.cx4.ifc.Odp;
import org.peerdirect.hca.engine.HcaDevice;
import org.peerdirect.hca.engine.HwCommandException;
import org.peerdirect.hca.engine.PageFault;

/**
 * The ConnectX-4+ page-fault unit: turns the transport engine's translation misses into
 * {@code PAGE_FAULT} EQEs ({@code struct mlx5_eqe_page_fault}) on the EQ subscribed to event 0x0C,
 * and executes {@code PAGE_FAULT_RESUME} (0x204). The engine is told to raise faults only while
 * such an EQ exists ({@link #eqsChanged}); without one a miss is a protection error, as on a device
 * whose driver never asked for page faults.
 *
 * <p>What the EQE said is kept per token until its resume, so a resume must name the same WQ
 * number (the QP or SRQ for a WQE fault, the token itself for an RDMA fault, as
 * {@code mlx5_ib_page_fault_resume} fills it) and fault type; anything else is refused as a bad
 * parameter and resumes nothing. A fault whose EQE is lost (the EQ full) or whose EQ is destroyed
 * is resumed with the error flag by the device itself: the access ends in an error completion,
 * never in a queue waiting forever.
 *
 * <p>Threads: {@link #raise} runs on the engine's executing threads, {@link #resume} and
 * {@link #eqsChanged} on the firmware thread; {@link #posted} is concurrent.
 */
final class PageFaults {

    /** What the EQE of a pending fault said: its subtype, its type byte and the WQ number a resume must give. */
    private record Posted(int subtype, int type, int wqNum) {
    }

    private final Eqs eqs;
    private final HcaDevice engine;
    /** The {@code wqe_index} a WQE fault reports (the queue's own count of the faulting WQE). */
    private final ToIntFunction<PageFault> wqeIndex;
    private final ConcurrentHashMap<Integer, Posted> posted = new ConcurrentHashMap<>();
    final AtomicLong raised = new AtomicLong();
    final AtomicLong resumed = new AtomicLong();
    final AtomicLong resumedWithError = new AtomicLong();
    /** EQEs that found the EQ full or no EQ: resumed with error by the device. */
    final AtomicLong lost = new AtomicLong();

    PageFaults(Eqs eqs, HcaDevice engine, ToIntFunction<PageFault> wqeIndex) {
        this.eqs = eqs;
        this.engine = engine;
        this.wqeIndex = wqeIndex;
    }

    void register(CommandTable t) {
        t.add(Mlx5Cmd.PAGE_FAULT_RESUME, (opMod, in, out) -> resume(in));
    }

    /**
     * After CREATE_EQ or DESTROY_EQ: faults are raised while an EQ takes event 0x0C; when the last
     * one goes, every fault still waiting is resumed with the error flag.
     */
    void eqsChanged() {
        boolean on = eqs.eqFor(Eq.EVENT_PAGE_FAULT) != null;
        engine.setPageFaultHandler(on ? this::raise : null);
        if (!on) {
            for (Integer token : posted.keySet()) {
                if (posted.remove(token) != null) {
                    failByDevice(token);
                }
            }
        }
    }

    /** The engine's miss as an EQE on the page-fault EQ (the engine's thread). */
    void raise(PageFault f) {
        MemorySegment d = MemorySegment.ofArray(new byte[28]);
        int type;
        int wq;
        int packet = (int) Math.min(f.length(), HcaDevice.MTU);
        if (f.subtype() == PageFault.SUBTYPE_WQE) {
            if (f.requestor()) {
                type = f.write() ? Odp.WQE_PF_TYPE_REQ_READ_OR_ATOMIC : Odp.WQE_PF_TYPE_REQ_SEND_OR_WRITE;
            } else {
                type = (f.flags() & PageFault.FLAG_SRQ) != 0 ? Odp.WQE_PF_TYPE_RMP : Odp.WQE_PF_TYPE_RESP;
            }
            wq = f.wqNum() & 0xff_ffff;
            d.set(BE16, Odp.EQE_WQE_INDEX, (short) wqeIndex.applyAsInt(f));
            d.set(BE16, Odp.EQE_WQE_PACKET_LENGTH, (short) packet);
            d.set(BE32, Odp.EQE_WQE_TOKEN, f.token());
            d.set(BE32, Odp.EQE_WQE_PFTYPE_WQ, type << 24 | wq);
        } else {
            type = Odp.PFAULT_RDMA | (f.write() ? Odp.PFAULT_WRITE : 0);
            wq = f.token();
            d.set(BE32, Odp.EQE_RDMA_R_KEY, f.key());
            d.set(BE16, Odp.EQE_RDMA_PACKET_LENGTH, (short) packet);
            d.set(BE32, Odp.EQE_RDMA_OP_LEN, (int) Math.min(f.length(), 0xffff_ffffL));
            d.set(BE64, Odp.EQE_RDMA_VA, f.va());
            d.set(BE32, Odp.EQE_RDMA_PFTYPE_TOKEN, type << 24 | f.token());
        }
        posted.put(f.token(), new Posted(f.subtype(), type, wq));
        raised.incrementAndGet();
        if (!eqs.postEvent(Eq.EVENT_PAGE_FAULT, f.subtype(), d) && posted.remove(f.token()) != null) {
            lost.incrementAndGet();
            failByDevice(f.token());
        }
    }

    private void failByDevice(int token) {
        try {
            engine.pageFaultResume(token, true);
            resumedWithError.incrementAndGet();
        } catch (HwCommandException e) {
            // the QP or the device went meanwhile: nothing waits for this fault any more
        }
    }

    /** {@code PAGE_FAULT_RESUME} (the firmware thread). */
    void resume(MemorySegment in) throws Refused {
        int token = Odp.RESUME_FAULT_TOKEN.get(in, 0);
        int wq = Odp.RESUME_WQ_NUMBER.get(in, 0);
        int type = Odp.RESUME_PAGE_FAULT_TYPE.get(in, 0);
        boolean error = Odp.RESUME_ERROR.get(in, 0) != 0;
        Posted p = posted.get(token);
        if (p == null) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_RESUME, String.format("no page fault with token 0x%x is pending", token));
        }
        if (p.wqNum != wq || (p.type & 7) != type) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_RESUME, String.format(
                    "fault token 0x%x was raised for wq_number 0x%x type %d, the resume names wq_number 0x%x type %d", token, p.wqNum,
                    p.type & 7, wq, type));
        }
        if (posted.remove(token) == null) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_RESUME, String.format("page fault 0x%x was already resumed", token));
        }
        try {
            engine.pageFaultResume(token, error);
        } catch (HwCommandException e) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_BAD_RESUME, e.getMessage());
        }
        (error ? resumedWithError : resumed).incrementAndGet();
    }

    /** The faults waiting for their resume, with what a resume must name (token order). */
    java.util.List<PendingPageFault> waiting() {
        return posted.entrySet().stream().sorted(java.util.Map.Entry.comparingByKey())
                .map(e -> new PendingPageFault(e.getKey(), e.getValue().wqNum, e.getValue().type & 7)).toList();
    }

    int pending() {
        return posted.size();
    }

    /** Every fault raised so far has been resumed (the engine let its queue go on), with or without error. */
    boolean settled() {
        return raised.get() == resumed.get() + resumedWithError.get();
    }

    String describe() {
        return String.format("page faults raised %d, resumed %d, with error %d, lost %d, pending %d", raised.get(), resumed.get(),
                resumedWithError.get(), lost.get(), posted.size());
    }
}

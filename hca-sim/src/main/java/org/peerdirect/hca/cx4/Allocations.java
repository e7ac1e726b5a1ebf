package org.peerdirect.hca.cx4;

import java.util.BitSet;
import java.util.function.IntUnaryOperator;

import org.peerdirect.hca.cx4.ifc.HcaCap;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.hca.cx4.ifc.Pages;

/**
 * What {@code ALLOC_UAR}, {@code ALLOC_PD} and {@code ALLOC_XRCD} hand out (the driver side is
 * {@code mlx5_core}'s {@code uar.c}, {@code pd.c} and {@code mlx5_cmd_xrcd_alloc}): numbers only,
 * the objects that name them check them here ({@link #usePd} and the like: allocated, and the
 * command's uid's, {@link Uctxs}).
 *
 * <p>Lock rules: the firmware thread alone, except {@link #uarOf} (pure arithmetic).
 */
final class Allocations {

    /** UAR pages start above the initialization segment (0x0000..0x400c) in BAR0. */
    static final int FIRST_UAR = 16;

    private final int uarPages;
    private final Caps caps;
    /** The uids and their objects (every table checks ownership there). */
    final Uctxs uctxs;
    private final BitSet uars = new BitSet();
    private final BitSet pds = new BitSet();
    /** XRC domains allocated ({@code ALLOC_XRCD}), from 1. */
    private final BitSet xrcds = new BitSet();

    Allocations(int uarPages, Caps caps, Uctxs uctxs) {
        this.uarPages = uarPages;
        this.caps = caps;
        this.uctxs = uctxs;
    }

    /**
     * The commands; {@code eqOfUar} gives the EQ a UAR page rings (-1: none), which keeps the page
     * from being freed.
     */
    void register(CommandTable t, IntUnaryOperator eqOfUar) {
        t.add(Mlx5Cmd.ALLOC_UAR, (opMod, in, out) -> Pages.INDEX24.set(out, 0, allocUar()));
        t.add(Mlx5Cmd.DEALLOC_UAR, (opMod, in, out) -> deallocUar(Pages.INDEX24.get(in, 0), eqOfUar));
        t.add(Mlx5Cmd.ALLOC_PD, (opMod, in, out) -> Pages.INDEX24.set(out, 0, allocPd()));
        t.add(Mlx5Cmd.DEALLOC_PD, (opMod, in, out) -> deallocPd(Pages.INDEX24.get(in, 0)));
        t.add(Mlx5Cmd.ALLOC_XRCD, (opMod, in, out) -> Pages.INDEX24.set(out, 0, allocXrcd()));
        t.add(Mlx5Cmd.DEALLOC_XRCD, (opMod, in, out) -> deallocXrcd(Pages.INDEX24.get(in, 0)));
    }

    /** Refused unless UAR page {@code uar} is allocated to the command's uid (or the command is the kernel's). */
    void useUar(int uar) throws Refused {
        if (!uarAllocated(uar)) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_NO_SUCH_OBJECT, "uar_page " + uar + " is not allocated");
        }
        uctxs.checkUse(Uctxs.Kind.UAR, uar, "uar_page " + uar);
    }

    /** Refused unless {@code pd} is allocated to the command's uid (or the command is the kernel's). */
    void usePd(int pd) throws Refused {
        if (!pdAllocated(pd)) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_NO_SUCH_OBJECT, "pd " + pd + " is not allocated");
        }
        uctxs.checkUse(Uctxs.Kind.PD, pd, "pd " + pd);
    }

    /** Refused unless XRC domain {@code xrcd} is allocated to the command's uid (or the command is the kernel's). */
    void useXrcd(int xrcd) throws Refused {
        if (!xrcdAllocated(xrcd)) {
            throw new Refused(Mlx5Cmd.STAT_BAD_PARAM_ERR, Syndromes.SYND_NO_SUCH_OBJECT, "xrcd " + xrcd + " is not allocated");
        }
        uctxs.checkUse(Uctxs.Kind.XRCD, xrcd, "xrcd " + xrcd);
    }

    boolean uarAllocated(int uar) {
        return uar >= FIRST_UAR && uars.get(uar);
    }

    boolean pdAllocated(int pd) {
        return pd > 0 && pds.get(pd);
    }

    boolean xrcdAllocated(int xrcd) {
        return xrcd > 0 && xrcds.get(xrcd);
    }

    /** The UAR page a BAR0 offset falls in, or -1 (the initialization segment, or no such UAR). */
    int uarOf(long barOffset) {
        long page = barOffset >>> 12;
        return page >= FIRST_UAR && page < uarPages ? (int) page : -1;
    }

    int uarsAllocated() {
        return uars.cardinality();
    }

    int pdsAllocated() {
        return pds.cardinality();
    }

    /** UARs, PDs and XRC domains allocated: what keeps a graceful teardown from going. */
    int live() {
        return uars.cardinality() + pds.cardinality() + xrcds.cardinality();
    }

    /** Teardown: every number free again. */
    void clear() {
        uars.clear();
        pds.clear();
        xrcds.clear();
    }

    private int allocUar() throws Refused {
        int u = uars.nextClearBit(FIRST_UAR);
        if (u >= uarPages) {
            throw new Refused(Mlx5Cmd.STAT_LIM_ERR, Syndromes.SYND_LIMIT, "all " + (uarPages - FIRST_UAR) + " UAR pages are allocated");
        }
        uars.set(u);
        uctxs.own(Uctxs.Kind.UAR, u);
        return u;
    }

    private void deallocUar(int u, IntUnaryOperator eqOfUar) throws Refused {
        if (u < FIRST_UAR || !uars.get(u)) {
            throw new Refused(Mlx5Cmd.STAT_BAD_RES_ERR, Syndromes.SYND_NO_SUCH_OBJECT, "UAR " + u + " is not allocated");
        }
        uctxs.check(Uctxs.Kind.UAR, u, "UAR " + u);
        int eqn = eqOfUar.applyAsInt(u);
        if (eqn >= 0) {
            throw new Refused(Mlx5Cmd.STAT_BAD_RES_STATE_ERR, Syndromes.SYND_OBJECTS_LIVE, "UAR " + u + " rings EQ " + eqn);
        }
        uars.clear(u);
        uctxs.release(Uctxs.Kind.UAR, u);
    }

    private int allocPd() throws Refused {
        int pd = pds.nextClearBit(1);
        if (pd >= 1 << caps.cur(HcaCap.LOG_MAX_PD)) {
            throw new Refused(Mlx5Cmd.STAT_LIM_ERR, Syndromes.SYND_LIMIT, "PD limit reached");
        }
        pds.set(pd);
        uctxs.own(Uctxs.Kind.PD, pd);
        return pd;
    }

    private void deallocPd(int pd) throws Refused {
        if (pd == 0 || !pds.get(pd)) {
            throw new Refused(Mlx5Cmd.STAT_BAD_RES_ERR, Syndromes.SYND_NO_SUCH_OBJECT, "PD " + pd + " is not allocated");
        }
        uctxs.check(Uctxs.Kind.PD, pd, "PD " + pd);
        pds.clear(pd);
        uctxs.release(Uctxs.Kind.PD, pd);
    }

    private int allocXrcd() throws Refused {
        int x = xrcds.nextClearBit(1);
        if (x >= 1 << caps.cur(HcaCap.LOG_MAX_XRCD)) {
            throw new Refused(Mlx5Cmd.STAT_LIM_ERR, Syndromes.SYND_LIMIT, "XRC domain limit reached");
        }
        xrcds.set(x);
        uctxs.own(Uctxs.Kind.XRCD, x);
        return x;
    }

    private void deallocXrcd(int x) throws Refused {
        if (!xrcdAllocated(x)) {
            throw new Refused(Mlx5Cmd.STAT_BAD_RES_ERR, Syndromes.SYND_NO_SUCH_OBJECT, "XRC domain " + x + " is not allocated");
        }
        uctxs.check(Uctxs.Kind.XRCD, x, "XRC domain " + x);
        xrcds.clear(x);
        uctxs.release(Uctxs.Kind.XRCD, x);
    }
}

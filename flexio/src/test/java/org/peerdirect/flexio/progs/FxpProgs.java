package org.peerdirect.flexio.progs;

import org.peerdirect.hca.dpa.isa.Dpa;

/** {@code __dpa_rpc__ rpc_fxp(op, x)}: one Q16.16 intrinsic and the EU cycles it cost, as {@code cycles << 32 | result}. */
public final class FxpProgs {

    private FxpProgs() {
    }

    public static long rpcFxp(long argbuf) {
        long op = Dpa.ld64(argbuf);
        int x = (int) Dpa.ld64(argbuf + 8);
        long c0 = Dpa.cycles();
        int r = op == 0 ? Dpa.fxpLog2(x) : op == 1 ? Dpa.fxpRcp(x) : Dpa.fxpPow2(x);
        long c1 = Dpa.cycles();
        return (c1 - c0) << 32 | (r & 0xffffffffL);
    }
}

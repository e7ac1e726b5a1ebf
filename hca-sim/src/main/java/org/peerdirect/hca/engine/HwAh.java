package org.peerdirect.hca.engine;

import org.peerdirect.ib.core.verbs.IbvAh;

/** An address handle: a destination LID reached through a local port. */
public final class HwAh implements IbvAh {
    final int dlid;
    final int port;

    public HwAh(int dlid, int port) {
        this.dlid = dlid;
        this.port = port;
    }

    @Override
    public int dlid() {
        return dlid;
    }

    @Override
    public int portNum() {
        return port;
    }

    @Override
    public void destroy() {
    }
}

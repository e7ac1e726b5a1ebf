package org.peerdirect.ib.core.uverbs;

import org.peerdirect.ib.core.provider.IbAhOps;
import org.peerdirect.ib.core.verbs.IbvAh;

/** {@code struct ib_ah}: the driver's address vector. */
final class UAh implements IbvAh {
    final UPd pd;
    final IbAhOps ops;
    private boolean destroyed;

    UAh(UPd pd, IbAhOps ops) {
        this.pd = pd;
        this.ops = ops;
    }

    @Override
    public int dlid() {
        return ops.dlid();
    }

    @Override
    public int portNum() {
        return ops.portNum();
    }

    @Override
    public boolean isGlobal() {
        return ops.isGlobal();
    }

    @Override
    public long dgidHigh() {
        return ops.dgidHigh();
    }

    @Override
    public long dgidLow() {
        return ops.dgidLow();
    }

    @Override
    public int sgidIndex() {
        return ops.sgidIndex();
    }

    @Override
    public int hopLimit() {
        return ops.hopLimit();
    }

    @Override
    public synchronized void destroy() {
        if (destroyed) {
            return;
        }
        destroyed = true;
        ops.destroyAh();
        pd.ahs.remove(this);
    }
}

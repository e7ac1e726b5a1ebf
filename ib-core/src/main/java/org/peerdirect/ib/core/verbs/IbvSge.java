package org.peerdirect.ib.core.verbs;

/** {@code struct ibv_sge}: one scatter/gather element (a user address, a length, an lkey). Mutable. */
public final class IbvSge {
    public long addr;
    public int length;
    public int lkey;

    public IbvSge() {
    }

    public IbvSge(long addr, int length, int lkey) {
        this.addr = addr;
        this.length = length;
        this.lkey = lkey;
    }

    public IbvSge set(long addr, int length, int lkey) {
        this.addr = addr;
        this.length = length;
        this.lkey = lkey;
        return this;
    }
}

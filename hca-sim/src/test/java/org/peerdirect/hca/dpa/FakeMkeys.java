package org.peerdirect.hca.dpa;

import java.lang.foreign.MemorySegment;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.peerdirect.kernel.dma.DmaPort;

/**
 * The firmware's side of windows for the tests: an mkey table (PD, range, rights, the IOVA the
 * range is mapped at) over a real IOMMU domain's {@link DmaPort}, so every window byte goes
 * through the IOMMU and its audit. A deregistered mkey is gone: the next access is refused before
 * any DMA, as the MPT does. (The real MPT lives in the ConnectX firmware; the lead wires it.)
 */
final class FakeMkeys implements WindowPort {

    private record Key(Mkey info, long iova) {
    }

    private final DmaPort port;
    private final Map<Integer, Key> keys = new ConcurrentHashMap<>();

    FakeMkeys(DmaPort port) {
        this.port = port;
    }

    void register(int mkey, int pd, long va, long len, long iova) {
        keys.put(mkey, new Key(new Mkey(pd, true, true, va, len), iova));
    }

    void deregister(int mkey) {
        keys.remove(mkey);
    }

    @Override
    public Mkey lookup(int mkey) {
        Key k = keys.get(mkey);
        return k == null ? null : k.info;
    }

    private long iova(int mkey, long va, long len) {
        Key k = keys.get(mkey);
        if (k == null) {
            throw new IllegalStateException("mkey 0x" + Integer.toHexString(mkey) + " is not valid");
        }
        if (!k.info.covers(va, len)) {
            throw new IllegalStateException("0x" + Long.toHexString(va) + "+" + len + " outside mkey 0x" + Integer.toHexString(mkey));
        }
        return k.iova + va - k.info.start();
    }

    @Override
    public void read(int mkey, long va, MemorySegment dst, long dstOffset, long len) {
        port.read(iova(mkey, va, len), dst, dstOffset, len);
    }

    @Override
    public void write(int mkey, long va, MemorySegment src, long srcOffset, long len) {
        port.write(iova(mkey, va, len), src, srcOffset, len);
    }
}

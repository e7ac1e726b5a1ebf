package org.peerdirect.hca.engine;

/** One port of a device on the {@link Fabric}. */
public final class HcaPort {
    final HcaDevice device;
    final int portNum;
    volatile int lid;
    volatile boolean active;

    HcaPort(HcaDevice device, int portNum) {
        this.device = device;
        this.portNum = portNum;
    }

    public int lid() {
        return lid;
    }

    public int portNum() {
        return portNum;
    }

    public boolean active() {
        return active;
    }
}

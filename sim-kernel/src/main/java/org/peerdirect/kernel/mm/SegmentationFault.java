package org.peerdirect.kernel.mm;

/** A CPU access the MMU refuses, what SIGSEGV is to a process: no VMA, or a protection forbids it. */
public class SegmentationFault extends KernelException {
    private static final long serialVersionUID = 1L;

    private final long address;

    public SegmentationFault(long address, String why) {
        super(Errno.EFAULT, String.format("SIGSEGV at 0x%x: %s", address, why));
        this.address = address;
    }

    public long address() {
        return address;
    }
}

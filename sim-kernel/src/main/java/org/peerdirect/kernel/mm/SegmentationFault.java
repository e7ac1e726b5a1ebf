package org.peerdirect.kernel.mm;

/**
 * A CPU access the MMU refuses, what SIGSEGV is to a process: no VMA, or a protection forbids it;
 * or an access the fault handler cannot back, what SIGBUS is ({@link #sigbus}).
 */
public class SegmentationFault extends KernelException {
    private static final long serialVersionUID = 1L;

    private final long address;

    public SegmentationFault(long address, String why) {
        this(address, "SIGSEGV", why);
    }

    private SegmentationFault(long address, String signal, String why) {
        super(Errno.EFAULT, String.format("%s at 0x%x: %s", signal, address, why));
        this.address = address;
    }

    /** {@code VM_FAULT_SIGBUS}: the mapping allows the access but no page can back it (the fault handlers of this package). */
    static SegmentationFault sigbus(long address, String why) {
        return new SegmentationFault(address, "SIGBUS", why);
    }

    public long address() {
        return address;
    }
}

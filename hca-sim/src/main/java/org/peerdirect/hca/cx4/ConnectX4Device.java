package org.peerdirect.hca.cx4;

import static org.peerdirect.hca.cx4.ifc.CmdEntry.BE32;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.peerdirect.hca.cx4.ifc.CmdEntry;
import org.peerdirect.hca.cx4.ifc.InitSeg;
import org.peerdirect.hca.cx4.ifc.Mlx5Cmd;
import org.peerdirect.kernel.pci.PciDeviceSpec;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * A ConnectX-4+ function (PCI {@code 15b3:1013} ConnectX-4, {@code 15b3:101d} ConnectX-6 Dx) as
 * its driver sees it: BAR0 with the big-endian initialization segment, the command queue the
 * driver places in its memory, a firmware thread executing commands read by DMA through the
 * function's IOMMU domain. No direct firmware calls: the driver reaches it only by MMIO, DMA and
 * MSI-X.
 *
 * <p>Built so far (issue 11, first step): the initialization segment (firmware revision,
 * command interface revision 5, the command queue address with log size 5 and log stride 6, the
 * doorbell vector, the initializing bit, the health counter), the command queue with its full
 * descriptor and mailbox checks, and the commands {@code ENABLE_HCA}, {@code DISABLE_HCA},
 * {@code QUERY_ISSI}, {@code SET_ISSI} and {@code NOP}. Every other opcode is answered with
 * {@code BAD_OP}. Not built yet: firmware pages, EQs and MSI-X events, capabilities, the
 * verbs objects and the data path.
 *
 * <p>Lock rules: the firmware thread alone executes commands and owns the HCA state; the BAR
 * write handler (the driver's thread) only queues doorbells.
 */
public final class ConnectX4Device implements AutoCloseable {

    public static final int VENDOR_MELLANOX = 0x15b3;
    public static final int DEVICE_CONNECTX4 = 0x1013;
    public static final int DEVICE_CONNECTX6DX = 0x101d;
    /** BAR0: the initialization segment, then UAR pages. */
    public static final long BAR0_SIZE = 1L << 20;
    public static final int MSIX_VECTORS = 64;
    /** The queue: 2^5 entries of 2^6 bytes, one 4 KiB page. */
    public static final int LOG_CMDQ_SIZE = 5;
    public static final int LOG_CMDQ_STRIDE = 6;
    /** Firmware revision the model reports: 16.35.1012 (ConnectX-4), 22.35.1012 (ConnectX-6 Dx). */
    static final int FW_MINOR = 35;
    static final int FW_SUBMINOR = 1012;

    /** Model-specific syndromes (firmware syndromes have no generic meaning; these name the check). */
    static final int SYND_UNKNOWN_OPCODE = 0x0bad_0001;
    static final int SYND_NOT_ENABLED = 0x0bad_0002;
    static final int SYND_BAD_ISSI = 0x0bad_0003;
    static final int SYND_SHORT_OUTPUT = 0x0bad_0004;

    private final String name;
    private final int deviceId;
    private volatile PciFunction fn;
    private volatile MemorySegment bar0;
    private final LinkedBlockingQueue<Integer> doorbells = new LinkedBlockingQueue<>();
    private volatile boolean closed;
    private Thread firmware;
    private CommandQueue cmdq;
    // HCA state: owned by the firmware thread
    private boolean enabled;
    private int issi;

    public ConnectX4Device(String name, int deviceId) {
        if (deviceId != DEVICE_CONNECTX4 && deviceId != DEVICE_CONNECTX6DX) {
            throw new IllegalArgumentException(String.format("%s: device id 0x%x is neither ConnectX-4 (0x1013) nor ConnectX-6 Dx (0x101d)", name,
                    deviceId));
        }
        this.name = name;
        this.deviceId = deviceId;
    }

    /** What the function looks like on the bus: class 0x020000 (Ethernet) or 0x020700 (InfiniBand), BAR0, MSI-X. */
    public PciDeviceSpec spec() {
        return PciDeviceSpec.builder(name).vendorId(VENDOR_MELLANOX).deviceId(deviceId)
                .classCode(deviceId == DEVICE_CONNECTX6DX ? 0x020000 : 0x020700).bar(0, BAR0_SIZE, this::barWritten)
                .msixVectors(MSIX_VECTORS).build();
    }

    /**
     * Powers the device up on its function (after {@code bus.register(spec())}): the
     * initialization segment is written with the initializing bit set, then the firmware thread
     * boots and clears it.
     */
    public synchronized void attach(PciFunction function) {
        if (fn != null) {
            throw new IllegalStateException(name + ": already attached to " + fn.bdf());
        }
        fn = function;
        bar0 = function.barMemory(0);
        int major = deviceId == DEVICE_CONNECTX6DX ? 22 : 16;
        bar0.set(BE32, InitSeg.FW_REV, FW_MINOR << 16 | major);
        bar0.set(BE32, InitSeg.CMDIF_REV_FW_SUB, InitSeg.CMD_IF_REV << 16 | FW_SUBMINOR);
        bar0.set(BE32, InitSeg.CMDQ_ADDR_L_SZ, InitSeg.NIC_IFC_FULL << 8 | LOG_CMDQ_SIZE << 4 | LOG_CMDQ_STRIDE);
        bar0.set(BE32, InitSeg.HEALTH_FW_VER, major << 24 | FW_MINOR << 16 | FW_SUBMINOR);
        bar0.set(BE32, InitSeg.INITIALIZING, InitSeg.INITIALIZING_BIT);
        cmdq = new CommandQueue(function.dmaPort(), this::queueAddress, this::executeCommand);
        firmware = Thread.ofPlatform().daemon().name(name + "-fw").start(this::firmwareLoop);
    }

    private long queueAddress() {
        return (bar0.get(BE32, InitSeg.CMDQ_ADDR_H) & 0xffff_ffffL) << 32 | bar0.get(BE32, InitSeg.CMDQ_ADDR_L_SZ) & 0xffff_f000L;
    }

    /** The BAR write handler (the driver's thread): keeps the read-only bits, queues doorbells. */
    private void barWritten(int bar, long offset, int width, long value) {
        MemorySegment b = bar0;
        if (bar != 0 || b == null) {
            return;
        }
        if (offset == InitSeg.CMDQ_ADDR_L_SZ) {
            // the address bits are the driver's; the low bits read back the queue's geometry
            b.set(BE32, InitSeg.CMDQ_ADDR_L_SZ, (int) (value & 0xffff_f000L) | InitSeg.NIC_IFC_FULL << 8 | LOG_CMDQ_SIZE << 4
                    | LOG_CMDQ_STRIDE);
        } else if (offset == InitSeg.CMD_DBELL) {
            doorbells.add((int) value);
        }
    }

    private void firmwareLoop() {
        bar0.set(BE32, InitSeg.INITIALIZING, 0); // booted: the driver may set up the command queue
        int counter = 0;
        while (!closed) {
            Integer mask;
            try {
                mask = doorbells.poll(10, TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                return;
            }
            bar0.set(BE32, InitSeg.HEALTH_COUNTER, ++counter & 0xff_ffff); // alive
            if (mask == null) {
                continue;
            }
            for (int slot = 0; slot < 1 << LOG_CMDQ_SIZE; slot++) {
                if ((mask & 1 << slot) != 0 && !closed) {
                    cmdq.execute(slot);
                }
            }
        }
    }

    /** Executes one command (firmware thread); the queue delivers at least 16 bytes each way. */
    private void executeCommand(MemorySegment in, MemorySegment out) {
        int opcode = CommandQueue.opcode(in);
        int need = switch (opcode) {
            case Mlx5Cmd.QUERY_ISSI -> Mlx5Cmd.QUERY_ISSI_OUT_LEN;
            default -> CmdEntry.INLINE;
        };
        if (!enabled && opcode != Mlx5Cmd.ENABLE_HCA && opcode != Mlx5Cmd.NOP) {
            CommandQueue.status(out, Mlx5Cmd.STAT_BAD_SYS_STATE_ERR, SYND_NOT_ENABLED);
            return;
        }
        if (out.byteSize() < need) {
            CommandQueue.status(out, Mlx5Cmd.STAT_BAD_OUTP_LEN_ERR, SYND_SHORT_OUTPUT);
            return;
        }
        switch (opcode) {
            case Mlx5Cmd.ENABLE_HCA -> {
                enabled = true;
                CommandQueue.status(out, Mlx5Cmd.STAT_OK, 0);
            }
            case Mlx5Cmd.DISABLE_HCA -> {
                enabled = false;
                issi = 0;
                CommandQueue.status(out, Mlx5Cmd.STAT_OK, 0);
            }
            case Mlx5Cmd.QUERY_ISSI -> {
                CommandQueue.status(out, Mlx5Cmd.STAT_OK, 0);
                out.set(BE32, 8, issi & 0xffff);
                out.set(BE32, Mlx5Cmd.QUERY_ISSI_OUT_SUPPORTED, 0b11); // ISSI 0 and 1
            }
            case Mlx5Cmd.SET_ISSI -> {
                int want = in.get(BE32, 8) & 0xffff; // the queue delivers at least the 16-byte header
                if (want != 0 && want != 1) {
                    CommandQueue.status(out, Mlx5Cmd.STAT_BAD_PARAM_ERR, SYND_BAD_ISSI);
                } else {
                    issi = want;
                    CommandQueue.status(out, Mlx5Cmd.STAT_OK, 0);
                }
            }
            case Mlx5Cmd.NOP -> CommandQueue.status(out, Mlx5Cmd.STAT_OK, 0);
            default -> CommandQueue.status(out, Mlx5Cmd.STAT_BAD_OP_ERR, SYND_UNKNOWN_OPCODE);
        }
    }

    /** Commands executed and entries refused at delivery (for tools and tests). */
    public long commandsExecuted() {
        return cmdq == null ? 0 : cmdq.executed.get();
    }

    public long deliveryErrors() {
        return cmdq == null ? 0 : cmdq.deliveryErrors.get();
    }

    /** Powers the firmware down (the function's removal or the model's stop). Idempotent. */
    @Override
    public void close() {
        closed = true;
        Thread t;
        synchronized (this) {
            t = firmware;
        }
        if (t != null) {
            t.interrupt();
            try {
                t.join(5_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }
}

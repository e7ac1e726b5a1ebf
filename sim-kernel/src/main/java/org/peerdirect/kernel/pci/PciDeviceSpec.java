package org.peerdirect.kernel.pci;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.function.Consumer;

/**
 * What a device model plugs in: the configuration-space identity of one PCI function, its memory
 * BARs and its MSI-X table size. Immutable and always valid: the constructor (and so
 * {@link Builder#build()}) refuses a bad value with an {@link IllegalArgumentException} naming the
 * field and the value.
 *
 * <pre>{@code
 * PciDeviceSpec spec = PciDeviceSpec.builder("ConnectX-4")
 *         .vendorId(0x15b3).deviceId(0x1013).classCode(0x020700)
 *         .bar(0, 32 << 20, this::doorbell)
 *         .msixVectors(64)
 *         .build();
 * }</pre>
 *
 * @param name what {@code lspci} shows for the device, not blank
 * @param vendorId PCI vendor id, 0..0xffff (Mellanox: 0x15b3)
 * @param deviceId PCI device id, 0..0xffff (ConnectX-4: 0x1013)
 * @param classCode 24-bit class code: base class, sub-class, programming interface (InfiniBand: 0x020700)
 * @param bars at most {@value #MAX_BARS} BARs with distinct indices, sorted by index
 * @param msixVectors MSI-X table size, 0..{@value #MAX_MSIX_VECTORS}
 * @param powerOn the device's power-on reset, or null: called once with the new function after
 *        its BARs exist and before it is published on the bus, so the registers a driver reads
 *        first (an initialization segment, a "firmware initializing" bit) already hold their reset
 *        values when any driver can bind
 */
public record PciDeviceSpec(String name, int vendorId, int deviceId, int classCode, List<Bar> bars, int msixVectors,
        Consumer<PciFunction> powerOn) {

    /** A function without a power-on reset. */
    public PciDeviceSpec(String name, int vendorId, int deviceId, int classCode, List<Bar> bars, int msixVectors) {
        this(name, vendorId, deviceId, classCode, bars, msixVectors, null);
    }

    /** A function has six BAR registers. */
    public static final int MAX_BARS = 6;
    /** The MSI-X capability's table size field is 11 bits. */
    public static final int MAX_MSIX_VECTORS = 2048;
    /** The smallest memory BAR (one page, as the PCIe spec recommends). */
    public static final long MIN_BAR_SIZE = 4096;
    /** The largest BAR the simulation allocates (its memory is real off-heap memory). */
    public static final long MAX_BAR_SIZE = 1L << 30;
    /** The largest aperture BAR ({@link BarAperture}: no memory of its own), as a GPU's 64 GiB BAR1. */
    public static final long MAX_APERTURE_SIZE = 1L << 40;

    /**
     * One memory BAR.
     *
     * @param index BAR register, 0..5
     * @param size bytes, a power of two from {@value PciDeviceSpec#MIN_BAR_SIZE} to 1 GiB
     * @param onWrite sees every driver write to the BAR (doorbells); null when the model does not care
     * @param aperture null for a BAR with memory of its own (the bus allocates it); else the BAR is
     *        a window onto the device's memory that this resolves page by page (up to 1 TiB)
     * @param onRead sees driver reads before they load (registers whose read has an effect); null
     *        when the model does not care. Only for a BAR with memory of its own.
     */
    public record Bar(int index, long size, BarWriteHandler onWrite, BarAperture aperture, BarReadHandler onRead) {
        public Bar {
            if (index < 0 || index >= MAX_BARS) {
                throw new IllegalArgumentException("bar index " + index + ": must be 0..5");
            }
            long max = aperture == null ? MAX_BAR_SIZE : MAX_APERTURE_SIZE;
            if (size < MIN_BAR_SIZE || size > max || Long.bitCount(size) != 1) {
                throw new IllegalArgumentException("bar " + index + " size " + size + " (0x" + Long.toHexString(size)
                        + "): must be a power of two from 4 KiB to " + (aperture == null ? "1 GiB" : "1 TiB for an aperture"));
            }
            if (aperture != null && onRead != null) {
                throw new IllegalArgumentException("bar " + index + ": an aperture BAR has no registers to watch reads of");
            }
        }

        /** A BAR with memory of its own or an aperture, nobody watching reads. */
        public Bar(int index, long size, BarWriteHandler onWrite, BarAperture aperture) {
            this(index, size, onWrite, aperture, null);
        }

        /** A BAR with memory of its own. */
        public Bar(int index, long size, BarWriteHandler onWrite) {
            this(index, size, onWrite, null);
        }
    }

    public PciDeviceSpec {
        if (name == null || name.isBlank()) {
            throw new IllegalArgumentException("name " + (name == null ? "null" : "'" + name + "'") + ": a device needs a name");
        }
        checkId("vendorId", vendorId);
        checkId("deviceId", deviceId);
        if (classCode < 0 || classCode > 0xffffff) {
            throw new IllegalArgumentException("classCode 0x" + Integer.toHexString(classCode) + ": must be 0..0xffffff (24 bits)");
        }
        if (bars == null) {
            throw new IllegalArgumentException("bars null: use an empty list for a function without BARs");
        }
        if (bars.size() > MAX_BARS) {
            throw new IllegalArgumentException("bars: " + bars.size() + " BARs, a function has at most " + MAX_BARS);
        }
        List<Bar> sorted = new ArrayList<>(bars.size());
        for (Bar b : bars) {
            if (b == null) {
                throw new IllegalArgumentException("bars: null entry");
            }
            sorted.add(b);
        }
        sorted.sort(Comparator.comparingInt(Bar::index));
        for (int i = 1; i < sorted.size(); i++) {
            if (sorted.get(i).index() == sorted.get(i - 1).index()) {
                throw new IllegalArgumentException("bar index " + sorted.get(i).index() + ": given twice");
            }
        }
        bars = List.copyOf(sorted);
        if (msixVectors < 0 || msixVectors > MAX_MSIX_VECTORS) {
            throw new IllegalArgumentException("msixVectors " + msixVectors + ": must be 0.." + MAX_MSIX_VECTORS);
        }
    }

    private static void checkId(String field, int id) {
        if (id < 0 || id > 0xffff) {
            throw new IllegalArgumentException(field + " 0x" + Integer.toHexString(id) + " (" + id + "): must be 0..0xffff");
        }
    }

    /** The BAR with this index, if the function implements it. */
    public Optional<Bar> bar(int index) {
        return bars.stream().filter(b -> b.index() == index).findFirst();
    }

    public static Builder builder(String name) {
        return new Builder(name);
    }

    /** Collects the fields; {@link #build()} validates them. Not thread-safe. */
    public static final class Builder {
        private final String name;
        private int vendorId;
        private int deviceId;
        private int classCode;
        private final List<Bar> bars = new ArrayList<>();
        private int msixVectors;
        private Consumer<PciFunction> powerOn;

        private Builder(String name) {
            this.name = name;
        }

        public Builder vendorId(int vendorId) {
            this.vendorId = vendorId;
            return this;
        }

        public Builder deviceId(int deviceId) {
            this.deviceId = deviceId;
            return this;
        }

        public Builder classCode(int classCode) {
            this.classCode = classCode;
            return this;
        }

        /** Adds a BAR nobody watches writes to. */
        public Builder bar(int index, long size) {
            return bar(index, size, null);
        }

        /** Adds a BAR whose driver writes {@code onWrite} sees (null: none). */
        public Builder bar(int index, long size, BarWriteHandler onWrite) {
            bars.add(new Bar(index, size, onWrite));
            return this;
        }

        /**
         * Adds a register BAR whose driver writes {@code onWrite} and reads {@code onRead} see
         * (either may be null).
         *
         * @since 0.6
         */
        public Builder bar(int index, long size, BarWriteHandler onWrite, BarReadHandler onRead) {
            bars.add(new Bar(index, size, onWrite, null, onRead));
            return this;
        }

        /** Adds an aperture BAR: a window onto the device's memory, resolved by {@code aperture}. */
        public Builder aperture(int index, long size, BarAperture aperture) {
            if (aperture == null) {
                throw new IllegalArgumentException("bar " + index + ": an aperture BAR needs its BarAperture");
            }
            bars.add(new Bar(index, size, null, aperture));
            return this;
        }

        public Builder msixVectors(int msixVectors) {
            this.msixVectors = msixVectors;
            return this;
        }

        /** The device's power-on reset (see {@link PciDeviceSpec#powerOn()}). */
        public Builder powerOn(Consumer<PciFunction> powerOn) {
            this.powerOn = powerOn;
            return this;
        }

        public PciDeviceSpec build() {
            return new PciDeviceSpec(name, vendorId, deviceId, classCode, bars, msixVectors, powerOn);
        }
    }
}

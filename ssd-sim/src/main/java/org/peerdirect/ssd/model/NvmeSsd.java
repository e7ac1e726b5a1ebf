package org.peerdirect.ssd.model;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

import org.peerdirect.kernel.pci.PciDeviceSpec;
import org.peerdirect.kernel.pci.PciFunction;

import static org.peerdirect.ssd.regs.NvmeRegs.*;

/**
 * The silicon of an NVMe SSD with a persistent memory region (NVMe 1.4 PMR): a Samsung PM173X
 * ({@code 144d:a824}) whose BAR0 holds the controller registers and whose BAR2 is the PMR, a
 * window of byte-addressable memory that RDMA adapters reach peer-to-peer. Imports nothing of the
 * IB stack; speaks registers only.
 *
 * <h2>Persistence</h2> The PMR's media is a real file ({@code FileChannel.map}), so it outlives
 * the process: what reached the media is there after a {@code kill -9}. Writes to the window
 * (CPU stores, peer DMA) are <em>posted</em>: they land in the controller's volatile write buffer,
 * which the host reads back at once but which a power loss (the process killed) loses. They reach
 * the media by a write barrier, as {@code PMRCAP.PMRWBM} bit 1 says: <b>the completion of a read
 * of {@code PMRSTS} ensures that prior writes to the PMR are persistent</b> (the model then writes
 * the changed pages to the file and forces them to the disk), and by a normal shutdown
 * ({@code CC.SHN}), after which {@code CSTS.SHST} reads "complete". QEMU's NVMe PMR does the same
 * on a read of PMRSTS ({@code memory_region_msync}). The model also sets {@code PMRWBM} bit 0:
 * <b>the completion of a memory read from the PMR</b> makes prior writes persistent; a peer's
 * flushing read (an RDMA FLUSH with the persistent placement type at an adapter that reaches the
 * PMR through its IOMMU) is such a read, and the model persists the pages it covered. Ordinary
 * data reads of the window do not run the barrier (the model's simplification: the promise is
 * kept where it is asked for, not on every read).
 *
 * <p>An access to a PMR that is not enabled ({@code PMRCTL.EN} 0) goes nowhere: MMIO reads all
 * ones, peer DMA is a use-after-free for the IOMMU audit, and {@code ioremap} of the BAR is
 * refused. (A CPU mapping made while it was on keeps reaching the write buffer: the model does
 * not take CPU mappings back; the driver turns the PMR off only after unmapping them.)
 *
 * <p>The controller ({@link NvmeCtrl}: registers, admin queue) is the only way in for a driver;
 * the PMR's bytes are reached through BAR2 (MMIO, the CPU's {@code ioremap} of the BAR, a peer's
 * IOMMU mapping of it).
 *
 * <p>Thread safety: the write buffer is written by peers and CPUs without a lock (the driver owns
 * the ranges it hands out); a barrier serialises with other barriers on {@code this}; register
 * writes arrive on the driver's thread and serialise on the controller's lock, which is taken
 * before {@code this}, never after.
 */
public final class NvmeSsd {

    public static final int VENDOR_SAMSUNG = 0x144d;
    /** {@code 144d:a824}, "NVMe SSD Controller PM173X". */
    public static final int DEVICE_PM173X = 0xa824;
    /** Mass storage, non-volatile memory controller, NVM Express. */
    public static final int CLASS_NVME = 0x010802;
    public static final long BAR0_SIZE = 16 << 10;
    /** The BAR the PMR is at ({@code PMRCAP.BIR}). */
    public static final int PMR_BAR = 2;

    private static final long PAGE = 4096;

    private final String name;
    private final long pmrBytes;
    private final Path media;
    private final Arena arena = Arena.ofShared();
    private final FileChannel channel;
    private final FileLock lock;
    /** The media: the file, mapped shared. */
    private final MemorySegment mediaMap;
    /** The controller's volatile write buffer: what the window shows now. */
    private final MemorySegment buffer;
    private final NvmeCtrl ctrl;
    /**
     * The window was reached since power-on (a peer's DMA, or handed to a CPU mapping): until
     * then the write buffer is the media and a barrier has nothing to write (the probe's PMRSTS
     * read costs nothing). Never cleared: a store may land after a barrier's comparison.
     */
    private volatile boolean reached;
    private volatile boolean pmrEnabled;
    private volatile boolean dead;
    private volatile boolean mediaError;
    /** Guarded by this: barriers run (register reads, flushing reads of the window, shutdown). */
    private long barriers;

    /**
     * Powers the controller on over its media file: created (sparse) when absent; an existing
     * file must have exactly the PMR's size. The file is locked for this controller alone.
     *
     * @param pmrBytes a power of two from 64 KiB to 1 GiB
     */
    public NvmeSsd(String name, Path media, long pmrBytes) {
        if (pmrBytes < (64 << 10) || pmrBytes > (1L << 30) || Long.bitCount(pmrBytes) != 1) {
            throw new IllegalArgumentException("PMR of " + pmrBytes + " bytes: must be a power of two from 64 KiB to 1 GiB");
        }
        this.name = name;
        this.pmrBytes = pmrBytes;
        this.media = media;
        FileChannel ch = null;
        try {
            if (media.getParent() != null) {
                Files.createDirectories(media.getParent());
            }
            ch = FileChannel.open(media, StandardOpenOption.CREATE, StandardOpenOption.READ, StandardOpenOption.WRITE);
            FileLock l;
            try {
                l = ch.tryLock();
            } catch (OverlappingFileLockException e) {
                l = null;
            }
            if (l == null) {
                throw new IllegalStateException(name + ": media file " + media + " is in use by another SSD model (another container?)");
            }
            this.lock = l;
            long have = ch.size();
            if (have == 0) {
                ch.write(java.nio.ByteBuffer.wrap(new byte[1]), pmrBytes - 1); // sparse, full length
            } else if (have != pmrBytes) {
                throw new IllegalStateException(String.format("%s: media file %s holds %d bytes, the PMR is %d: "
                        + "give the file of this size or another file", name, media, have, pmrBytes));
            }
            this.channel = ch;
            this.mediaMap = ch.map(FileChannel.MapMode.READ_WRITE, 0, pmrBytes, arena);
            this.buffer = org.peerdirect.kernel.mm.Mm.deviceMemory(pmrBytes, arena);
            load();
            int pmrcap = PMRCAP_RDS | PMRCAP_WDS | (PMR_BAR << PMRCAP_BIR_SHIFT)
                    | ((PMRWBM_READ_PMR | PMRWBM_READ_PMRSTS) << PMRCAP_PMRWBM_SHIFT) | (10 << PMRCAP_PMRTO_SHIFT);
            // PMREBS: the elasticity buffer is the whole PMR, in MiB (PMRSZU 2), read bypass 0
            int pmrebs = (int) (Math.min(pmrBytes >> 20, 0xffffff) << PMREBS_PMRWBZ_SHIFT) | PMREBS_PMRSZU_MIB;
            this.ctrl = new NvmeCtrl(name, String.format("PD%08X", media.toAbsolutePath().toString().hashCode()), pmrcap, pmrebs,
                    new NvmeCtrl.Media() {
                        @Override
                        public boolean barrier() {
                            return NvmeSsd.this.barrier();
                        }

                        @Override
                        public void pmrEnabled(boolean en) {
                            pmrEnabled = en;
                        }
                    });
        } catch (IOException e) {
            close(ch);
            arena.close();
            throw new UncheckedIOException(name + ": cannot open media file " + media + ": " + e.getMessage(), e);
        } catch (RuntimeException e) {
            close(ch);
            arena.close();
            throw e;
        }
    }

    private static void close(FileChannel ch) {
        if (ch != null) {
            try {
                ch.close(); // releases the lock too
            } catch (IOException ignored) {
                // closing after a failure: the first error is the one to report
            }
        }
    }

    /** Power-on: the write buffer starts as the media holds it; untouched (zero) chunks stay uncommitted. */
    private void load() {
        long chunk = 64 << 10;
        MemorySegment zero = arena.allocate(chunk);
        for (long off = 0; off < pmrBytes; off += chunk) {
            MemorySegment m = mediaMap.asSlice(off, chunk);
            if (m.mismatch(zero) != -1) {
                buffer.asSlice(off, chunk).copyFrom(m);
            }
        }
    }

    /** The PCI function to plug in: BAR0 the controller (registers, doorbells), BAR2 the PMR, MSI-X vector 0 for the admin queue. */
    public PciDeviceSpec spec() {
        return PciDeviceSpec.builder(name).vendorId(VENDOR_SAMSUNG).deviceId(DEVICE_PM173X).classCode(CLASS_NVME)
                .bar(0, BAR0_SIZE, (bar, offset, width, value) -> ctrl.written(offset, width, value), this::registerRead)
                .aperture(PMR_BAR, pmrBytes, new Pmr())
                .msixVectors(1)
                .powerOn(this::reset)
                .build();
    }

    /** Power-on: the registers as the spec gives them, the PMR off. */
    private void reset(PciFunction fn) {
        pmrEnabled = false;
        ctrl.powerOn(fn);
    }

    private void registerRead(int bar, long offset, int width) {
        if (offset == NVME_REG_PMRSTS && pmrEnabled && !dead) {
            ctrl.pmrstsRead();
        }
    }

    /**
     * BAR2, the PMR as peers see it: persistent memory ({@code IORES_DESC_PERSISTENT_MEMORY}),
     * every page the write buffer from its offset to the end (contiguous), nothing while the PMR is
     * off; a flushing read of a range (RDMA FLUSH at an adapter, PCIe zero-length reads) is the
     * {@code PMRWBM} bit 0 barrier for that range.
     */
    private final class Pmr implements org.peerdirect.kernel.pci.BarAperture {
        @Override
        public MemorySegment page(long off) {
            if (!pmrEnabled || dead) {
                return null;
            }
            reached = true;
            return buffer.asSlice(off); // the PMR is contiguous to its end
        }

        @Override
        public boolean persistent() {
            return true;
        }

        @Override
        public boolean flush(long offset, long length) {
            if (!pmrEnabled) {
                return !dead; // a disabled PMR's barrier ran when it was disabled
            }
            return barrier(offset, length);
        }
    }

    /**
     * The write barrier: every page of the write buffer that differs from the media is written to
     * the media, and the file is forced to the disk. True when the media took it.
     */
    private boolean barrier() {
        return barrier(0, pmrBytes);
    }

    /**
     * The write barrier for PMR [from, from+length) (page-aligned): what {@code PMRWBM} bit 0
     * promises a read's completion ensures, for the pages the read covered. Serialised with every
     * other barrier on {@code this}.
     */
    private synchronized boolean barrier(long from, long length) {
        if (dead) {
            return false;
        }
        if (!reached) {
            return !mediaError;
        }
        barriers++;
        long n = 0;
        long to = Math.min(pmrBytes, from + length);
        for (long off = Math.max(0, from) & -PAGE; off < to; off += PAGE) {
            MemorySegment b = buffer.asSlice(off, PAGE);
            MemorySegment m = mediaMap.asSlice(off, PAGE);
            if (b.mismatch(m) != -1) {
                m.copyFrom(b);
                n++;
            }
        }
        try {
            if (n > 0) {
                mediaMap.force();
            }
        } catch (UncheckedIOException e) {
            mediaError = true;
            return false;
        }
        return !mediaError;
    }

    public String name() {
        return name;
    }

    public Path media() {
        return media;
    }

    public long pmrBytes() {
        return pmrBytes;
    }

    /**
     * What the controller counted since power-on, the lab's view: admin commands fetched, register
     * writes without effect (read-only, reserved, doorbells before ready), invalid doorbell writes
     * (each an asynchronous event), events dropped because eight were retained already, fatal
     * errors ({@code CSTS.CFS}) and the last one's reason.
     */
    public record ControllerCounters(long commands, long ignoredWrites, long invalidDoorbells, long droppedEvents, long fatalErrors,
            String lastFatal) {
    }

    public ControllerCounters controller() {
        return ctrl.counters();
    }

    /** Write barriers that ran since power-on (a PMRSTS read, a flushing read of the window, a shutdown). */
    public synchronized long barriers() {
        return barriers;
    }

    /** Pages of the window whose latest contents are not yet on the media (volatile, lost on power loss). */
    public synchronized long unpersistedPages() {
        if (!reached) {
            return 0;
        }
        long n = 0;
        for (long off = 0; off < pmrBytes; off += PAGE) {
            if (buffer.asSlice(off, PAGE).mismatch(mediaMap.asSlice(off, PAGE)) != -1) {
                n++;
            }
        }
        return n;
    }

    /**
     * Power off: the card is pulled (its function removed first). What was posted and not made
     * persistent is lost, as on a real power loss; the media file stays, unlocked.
     */
    public void close() {
        ctrl.powerOff(); // outside this object's lock: the controller's lock comes first
        closeMedia();
    }

    private synchronized void closeMedia() {
        if (dead) {
            return;
        }
        dead = true;
        pmrEnabled = false;
        arena.close();
        try {
            lock.release();
        } catch (IOException | RuntimeException ignored) {
            // the channel closes below, which releases it anyway
        }
        close(channel);
    }
}

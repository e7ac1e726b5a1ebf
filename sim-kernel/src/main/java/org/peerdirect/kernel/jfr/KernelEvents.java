package org.peerdirect.kernel.jfr;

import jdk.jfr.Category;
import jdk.jfr.Description;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.StackTrace;
import jdk.jfr.Unsigned;

import org.peerdirect.kernel.mm.MmuNotifierRange;

/**
 * The JFR events of sim-kernel: an IOMMU fault ({@code report_iommu_fault}) and one MMU interval
 * notifier's invalidate callback ({@code mn_itree_invalidate}).
 *
 * <p>Cheap when not recording: a site asks {@link IommuFault#on()} / {@link MmuNotifierInvalidate#start}
 * first, which read the event type's enabled flag through a shared probe instance; nothing is
 * allocated and no string is built unless a recording has the event enabled.
 */
public final class KernelEvents {

    private KernelEvents() {
    }

    /** A DMA the IOMMU refused (not mapped, not permitted, or a use-after-free). */
    @Name("org.peerdirect.IommuFault")
    @Label("IOMMU Fault")
    @Category({"peerdirect", "IOMMU"})
    @Description("A device's DMA refused by its IOMMU domain: no mapping, no permission, or a frame or BAR freed while mapped")
    @StackTrace(true)
    public static final class IommuFault extends Event {
        private static final IommuFault PROBE = new IommuFault();

        @Label("Domain")
        @Description("The IOMMU domain (the device's PCI function)")
        public String domain;

        @Label("Kind")
        @Description("NOT_MAPPED, PERMISSION or USE_AFTER_FREE")
        public String kind;

        @Label("IOVA")
        @Description("The I/O virtual address the device used")
        @Unsigned
        public long iova;

        @Label("Reason")
        public String reason;

        /** Commits one fault if a recording wants it. */
        public static void commit(String domain, String kind, long iova, String reason) {
            if (PROBE.isEnabled()) {
                IommuFault e = new IommuFault();
                e.domain = domain;
                e.kind = kind;
                e.iova = iova;
                e.reason = reason;
                e.commit();
            }
        }
    }

    /** One interval notifier's invalidate callback for one invalidation, with its duration. */
    @Name("org.peerdirect.MmuNotifierInvalidate")
    @Label("MMU Notifier Invalidate")
    @Category({"peerdirect", "Memory"})
    @Description("One MMU interval notifier's invalidate callback (ODP MRs, HMM mirrors): the range, the reason, and how long the "
            + "callback took to stop its device's access")
    public static final class MmuNotifierInvalidate extends Event {
        private static final MmuNotifierInvalidate PROBE = new MmuNotifierInvalidate();

        @Label("Process")
        @Description("The process (address space) whose mappings change")
        public String process;

        @Label("PID")
        public int pid;

        @Label("Event")
        @Description("Why: UNMAP, CLEAR (reclaim), MIGRATE, PROTECTION_VMA, PROTECTION_PAGE, RELEASE, ...")
        public String event;

        @Label("Start Address")
        @Unsigned
        public long startAddress;

        @Label("End Address")
        @Description("The range's end, exclusive")
        @Unsigned
        public long endAddress;

        @Label("Notifier")
        @Description("The notifier's interval")
        public String notifier;

        @Label("Sequence")
        @Description("The invalidation sequence number the callback was given (odd while invalidations run)")
        public long sequence;

        /** A begun event when a recording wants it, else null (nothing allocated). */
        public static MmuNotifierInvalidate start() {
            if (!PROBE.isEnabled()) {
                return null;
            }
            MmuNotifierInvalidate e = new MmuNotifierInvalidate();
            e.begin();
            return e;
        }

        /** Ends and commits an event {@link #start} returned (null: nothing to do). */
        public static void done(MmuNotifierInvalidate e, MmuNotifierRange range, Object notifier, long sequence) {
            if (e == null) {
                return;
            }
            e.end();
            if (e.shouldCommit()) {
                e.process = range.mm().name();
                e.pid = range.mm().pid();
                e.event = range.event().name();
                e.startAddress = range.start();
                e.endAddress = range.end();
                e.notifier = String.valueOf(notifier);
                e.sequence = sequence;
                e.commit();
            }
        }
    }
}

package org.peerdirect.ssd.model;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import org.osgi.framework.BundleContext;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Deactivate;
import org.osgi.service.component.annotations.Modified;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.metatype.annotations.AttributeDefinition;
import org.osgi.service.metatype.annotations.Designate;
import org.osgi.service.metatype.annotations.ObjectClassDefinition;
import org.peerdirect.kernel.pci.PciBus;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * Plugs NVMe SSD models into the PCI bus (Configuration Admin PID {@code org.peerdirect.ssd}:
 * {@code ssds}, {@code pmr.size}, {@code dir}). SSD {@code i}'s persistent memory region is the
 * file {@code nvme<i>.pmr} in {@code dir}; by default the framework property
 * {@code peerdirect.state.dir} (the launcher's {@code <home>/state}, kept across runs), else a
 * temporary folder removed when the models go (nothing then outlives the container, say so with
 * {@code dir}). Stopping the bundle pulls the cards: the driver unbinds first (a normal shutdown
 * that makes posted writes persistent), then the models power off. {@code ssd:media} shows the
 * model's own view.
 */
@Component(immediate = true, configurationPid = SsdModel.PID, service = SsdModel.class)
@Designate(ocd = SsdModel.Config.class)
public final class SsdModel {

    public static final String PID = "org.peerdirect.ssd";
    public static final String STATE_DIR_PROPERTY = "peerdirect.state.dir";

    @ObjectClassDefinition(name = "SSD models", description = "NVMe SSDs with a file-backed persistent memory region")
    @interface Config {
        @AttributeDefinition(min = "0", max = "4", description = "number of SSDs (0 to 4)")
        int ssds() default 1;

        @AttributeDefinition(description = "persistent memory region per SSD in bytes: a power of two from 64 KiB to 1 GiB")
        long pmr_size() default 64L << 20;

        @AttributeDefinition(description = "folder of the media files nvme<i>.pmr (default: the framework property peerdirect.state.dir)")
        String dir() default "";
    }

    private record Card(NvmeSsd ssd, PciFunction fn) {
    }

    /** Written under this (activate, modified, deactivate); read by {@code ssd:media} from shell threads. */
    private final List<Card> cards = new java.util.concurrent.CopyOnWriteArrayList<>();
    /** A temporary media folder this component made and removes, or null. */
    private Path temporary;
    private final PciBus bus;
    private final BundleContext ctx;
    /** Guarded by this: the PMR size and configured folder of the cards plugged in, and their folder. */
    private long pmrSize;
    private String dirSetting;
    private Path dir;

    @Activate
    public SsdModel(@Reference PciBus bus, BundleContext ctx, Config c) {
        this.bus = bus;
        this.ctx = ctx;
        modified(c);
    }

    /**
     * A configuration change plugs in or removes only the difference in {@code ssds} (the newest
     * first; a removed SSD shuts down normally, its media file kept); the other SSDs and what is
     * registered over them stay. A change of {@code pmr.size} or {@code dir} re-creates them all
     * (each card's media is its file there). A delivery that changes nothing (the guard putting
     * back a rejected value) touches nothing.
     */
    @Modified
    synchronized void modified(Config c) {
        if (c.ssds() < 0 || c.ssds() > 4) {
            throw new IllegalArgumentException(PID + ": ssds must be 0..4, not " + c.ssds());
        }
        if (dir == null || c.pmr_size() != pmrSize || !c.dir().equals(dirSetting)) {
            deactivate();
            pmrSize = c.pmr_size();
            dirSetting = c.dir();
            dir = mediaDir(ctx, c);
        }
        try {
            while (cards.size() > c.ssds()) {
                unplug(cards.get(cards.size() - 1));
            }
            while (cards.size() < c.ssds()) {
                NvmeSsd s = new NvmeSsd("Samsung PM173X NVMe SSD", dir.resolve("nvme" + cards.size() + ".pmr"), pmrSize);
                try {
                    cards.add(new Card(s, bus.register(s.spec())));
                } catch (RuntimeException e) {
                    s.close();
                    throw e;
                }
            }
        } catch (RuntimeException e) {
            deactivate();
            throw e;
        }
    }

    private void unplug(Card k) {
        assert Thread.holdsLock(this);
        cards.remove(k);
        k.fn.remove(); // the driver unbinds here: normal shutdown, posted writes made persistent
        k.ssd.close();
    }

    private Path mediaDir(BundleContext ctx, Config c) {
        String d = !c.dir().isBlank() ? c.dir() : ctx.getProperty(STATE_DIR_PROPERTY);
        if (d != null && !d.isBlank()) {
            return Path.of(d);
        }
        try {
            temporary = Files.createTempDirectory("peerdirect-ssd-");
            return temporary;
        } catch (IOException e) {
            throw new UncheckedIOException(PID + ": no dir configured and no temporary folder: " + e.getMessage(), e);
        }
    }

    /**
     * What the model alone knows of one SSD (no driver can see it): its media file, the pages
     * posted to its PMR and not yet on the media (lost on power loss), the barriers run, and what
     * its controller counted (admin commands, writes without effect, invalid doorbells, fatal errors).
     */
    public record Media(String bdf, Path file, long pmrBytes, long postedPages, long barriers, NvmeSsd.ControllerCounters controller) {
    }

    /** The SSDs' media, in plug order (nvme{@code i} is SSD {@code i} once the driver probed them all). */
    public List<Media> media() {
        return cards.stream().map(k -> new Media(k.fn.bdf(), k.ssd.media(), k.ssd.pmrBytes(), k.ssd.unpersistedPages(), k.ssd.barriers(),
                k.ssd.controller())).toList();
    }

    @Deactivate
    synchronized void deactivate() {
        while (!cards.isEmpty()) {
            unplug(cards.get(cards.size() - 1));
        }
        dir = null;
        if (temporary != null) {
            try (var s = Files.list(temporary)) {
                for (Path p : s.toList()) {
                    Files.deleteIfExists(p);
                }
                Files.deleteIfExists(temporary);
            } catch (IOException e) {
                System.getLogger("org.peerdirect.ssd").log(System.Logger.Level.WARNING, "cannot remove " + temporary + ": " + e);
            }
            temporary = null;
        }
    }
}

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

    /** Written by activate and deactivate only; read by {@code ssd:media} from shell threads. */
    private final List<Card> cards = new java.util.concurrent.CopyOnWriteArrayList<>();
    /** A temporary media folder this component made and removes, or null. */
    private Path temporary;

    @Activate
    public SsdModel(@Reference PciBus bus, BundleContext ctx, Config c) {
        if (c.ssds() < 0 || c.ssds() > 4) {
            throw new IllegalArgumentException(PID + ": ssds must be 0..4, not " + c.ssds());
        }
        try {
            Path dir = mediaDir(ctx, c);
            for (int i = 0; i < c.ssds(); i++) {
                NvmeSsd s = new NvmeSsd("Samsung PM173X NVMe SSD", dir.resolve("nvme" + i + ".pmr"), c.pmr_size());
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
     * posted to its PMR and not yet on the media (lost on power loss), the barriers run.
     */
    public record Media(String bdf, Path file, long pmrBytes, long postedPages, long barriers) {
    }

    /** The SSDs' media, in plug order (nvme{@code i} is SSD {@code i} once the driver probed them all). */
    public List<Media> media() {
        return cards.stream().map(k -> new Media(k.fn.bdf(), k.ssd.media(), k.ssd.pmrBytes(), k.ssd.unpersistedPages(), k.ssd.barriers())).toList();
    }

    @Deactivate
    void deactivate() {
        for (Card k : cards) {
            k.fn.remove(); // the driver unbinds here: normal shutdown, posted writes made persistent
            k.ssd.close();
        }
        cards.clear();
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

package org.peerdirect.ssd.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.annotation.Annotation;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.pci.PciFunction;
import org.peerdirect.kernel.pci.StandalonePciBus;

/**
 * Configuration changes reach the SSD models in place: {@code ssds} by the difference (a removed
 * SSD keeps its media file), an unchanged delivery touches nothing, a PMR size change re-creates
 * them all (over new media: a media file keeps its size).
 */
class SsdModelTest {

    @TempDir
    Path tmp;

    Path media;

    SsdModel.Config config(int ssds, long pmr) {
        return config(ssds, pmr, media);
    }

    SsdModel.Config config(int ssds, long pmr, Path folder) {
        String dir = folder.toString();
        return new SsdModel.Config() {
            @Override
            public int ssds() {
                return ssds;
            }

            @Override
            public long pmr_size() {
                return pmr;
            }

            @Override
            public String dir() {
                return dir;
            }

            @Override
            public Class<? extends Annotation> annotationType() {
                return SsdModel.Config.class;
            }
        };
    }

    @Test
    void ssdsChangeByTheDifferenceAndAPmrSizeRecreatesThem() throws Exception {
        media = Files.createDirectories(tmp.resolve("media"));
        Mm mm = new Mm(16L << 20, true, tmp.resolve("swap"), 1 << 20);
        Iommu iommu = new Iommu(mm);
        StandalonePciBus bus = new StandalonePciBus(iommu);
        SsdModel model = new SsdModel(bus, null, config(1, 64L << 10));
        List<PciFunction> one = bus.functions();
        assertEquals(1, one.size());
        model.modified(config(1, 64L << 10));
        assertEquals(one, bus.functions(), "an unchanged delivery keeps the SSD");
        model.modified(config(2, 64L << 10));
        assertEquals(2, bus.functions().size());
        assertEquals(one.get(0), bus.functions().get(0), "the first SSD stayed");
        assertTrue(Files.exists(media.resolve("nvme1.pmr")));
        model.modified(config(1, 64L << 10));
        assertEquals(one, bus.functions(), "the newest removed");
        assertTrue(Files.exists(media.resolve("nvme1.pmr")), "its media kept");
        // a media file keeps its size: a new PMR size needs new media (another folder) and re-creates the SSD
        model.modified(config(1, 128L << 10, Files.createDirectories(tmp.resolve("media2"))));
        assertFalse(one.get(0).present(), "a new PMR size re-creates the SSD");
        assertEquals(1, bus.functions().size());
        assertEquals(2, model.media().get(0).pmrBytes() / (64L << 10));
        model.deactivate();
        model.deactivate(); // idempotent
        assertEquals(0, bus.functions().size());
        bus.close();
        org.junit.jupiter.api.Assertions.assertEquals(java.util.List.of(), bus.warnings(), "the bus warned");
        assertTrue(iommu.audit().clean(), iommu.audit().toString());
        mm.close();
    }
}

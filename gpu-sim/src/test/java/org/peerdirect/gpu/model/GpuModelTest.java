package org.peerdirect.gpu.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.annotation.Annotation;
import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.kernel.pci.PciFunction;
import org.peerdirect.kernel.pci.StandalonePciBus;

/**
 * Configuration changes reach the GPU models in place: {@code gpus} by the difference, an
 * unchanged delivery (the guard putting back a rejected value) touches nothing, a memory size
 * change re-creates the cards, a size no board can have leaves them as they are.
 */
class GpuModelTest {

    @TempDir
    Path tmp;

    static GpuModel.Config config(int gpus, long vram) {
        return new GpuModel.Config() {
            @Override
            public int gpus() {
                return gpus;
            }

            @Override
            public long vram_size() {
                return vram;
            }

            @Override
            public long bar1_size() {
                return 1L << 20;
            }

            @Override
            public Class<? extends Annotation> annotationType() {
                return GpuModel.Config.class;
            }
        };
    }

    @Test
    void gpusChangeByTheDifferenceAndSizesRecreateTheCards() {
        Mm mm = new Mm(16L << 20, true, tmp.resolve("swap"), 1 << 20);
        Iommu iommu = new Iommu(mm);
        StandalonePciBus bus = new StandalonePciBus(iommu);
        GpuModel model = new GpuModel(bus, config(1, 4L << 20));
        List<PciFunction> one = bus.functions();
        assertEquals(1, one.size());
        model.modified(config(1, 4L << 20));
        assertEquals(one, bus.functions(), "an unchanged delivery keeps the card");
        assertTrue(one.get(0).present());
        model.modified(config(3, 4L << 20));
        assertEquals(3, bus.functions().size());
        assertEquals(one.get(0), bus.functions().get(0), "the first card stayed");
        model.modified(config(2, 4L << 20));
        assertEquals(2, bus.functions().size());
        IllegalArgumentException bad = assertThrows(IllegalArgumentException.class, () -> model.modified(config(2, 3L << 20)));
        assertTrue(bad.getMessage().contains("multiple of 2 MiB"), bad.getMessage());
        assertEquals(2, bus.functions().size(), "a size no board can have changed nothing");
        assertTrue(one.get(0).present());
        model.modified(config(2, 8L << 20));
        assertFalse(one.get(0).present(), "a new size re-creates the cards");
        assertEquals(2, bus.functions().size());
        model.deactivate();
        model.deactivate(); // idempotent
        assertEquals(0, bus.functions().size());
        bus.close();
        org.junit.jupiter.api.Assertions.assertEquals(java.util.List.of(), bus.warnings(), "the bus warned");
        assertTrue(iommu.audit().clean(), iommu.audit().toString());
        assertEquals(mm.totalFrames(), mm.freeFrames());
        mm.close();
    }
}

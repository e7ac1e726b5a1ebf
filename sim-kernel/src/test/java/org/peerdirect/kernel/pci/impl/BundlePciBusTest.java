package org.peerdirect.kernel.pci.impl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.peerdirect.kernel.pci.PciDeviceSpec;
import org.peerdirect.kernel.pci.PciFunction;

/** The per-bundle view that makes a device model's bundle stop a hot-unplug of its devices. */
class BundlePciBusTest {

    private final List<String> unpublished = Collections.synchronizedList(new ArrayList<>());
    private final PciBusCore core = new PciBusCore(new PciBusCore.Listener() {
        @Override
        public void added(PciFunction f) {
        }

        @Override
        public void removed(PciFunction f) {
            unpublished.add(f.bdf());
        }
    }, w -> {
        throw new AssertionError("unexpected warning: " + w);
    });

    @AfterEach
    void shutDown() {
        core.close();
    }

    private static PciDeviceSpec spec(String name) {
        return PciDeviceSpec.builder(name).vendorId(0x15b3).deviceId(0x1013).classCode(0x020700).bar(0, 4096).msixVectors(2).build();
    }

    @Test
    void releasingABundlesViewRemovesExactlyTheFunctionsThatBundleRegistered() {
        BundlePciBus hcaModel = new BundlePciBus(core, "org.peerdirect.hca-sim [7]");
        BundlePciBus gpuModel = new BundlePciBus(core, "org.peerdirect.gpu-peer-mem [9]");
        PciFunction hca0 = hcaModel.register(spec("ConnectX-4 #0"));
        PciFunction gpu = gpuModel.register(spec("GPU"));
        PciFunction hca1 = hcaModel.register(spec("ConnectX-4 #1"));
        hca1.requestIrq(0, v -> { });
        assertEquals(List.of(hca0, gpu, hca1), hcaModel.functions(), "every view shows the whole bus");

        hcaModel.release();

        assertFalse(hca0.present());
        assertFalse(hca1.present());
        assertTrue(gpu.present());
        assertEquals(List.of("0000:05:00.0", "0000:03:00.0"), unpublished, "newest first");
        assertEquals(List.of(gpu), gpuModel.functions());
        assertFalse(hca1.irqRequested(0));
        hcaModel.release(); // the framework calls ungetService once, but twice is harmless
        assertEquals(2, unpublished.size());

        IllegalStateException e = assertThrows(IllegalStateException.class, () -> hcaModel.register(spec("late")));
        assertTrue(e.getMessage().contains("org.peerdirect.hca-sim [7]"), e.getMessage());
    }

    @Test
    void aFunctionItsModelRemovedIsForgottenByTheView() {
        BundlePciBus model = new BundlePciBus(core, "model");
        PciFunction f = model.register(spec("x"));
        assertEquals(List.of(f), model.registered());
        f.remove();
        assertEquals(List.of(), model.registered());
        model.release();
        assertEquals(List.of("0000:03:00.0"), unpublished, "removed once");
    }
}

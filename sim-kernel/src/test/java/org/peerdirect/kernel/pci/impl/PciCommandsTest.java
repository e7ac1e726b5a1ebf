package org.peerdirect.kernel.pci.impl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.peerdirect.kernel.pci.PciDeviceSpec;
import org.peerdirect.kernel.pci.PciFunction;

class PciCommandsTest {

    private final PciBusCore core = new PciBusCore(new PciBusCore.Listener() {
        @Override
        public void added(PciFunction f) {
        }

        @Override
        public void removed(PciFunction f) {
        }
    }, w -> { });
    private final PciCommands commands = new PciCommands(core);

    @AfterEach
    void shutDown() {
        core.close();
    }

    @Test
    void lspciListsLikeLspciNnAndVerboseAddsBarsAndVectorCounters() {
        assertEquals("no PCI functions", commands.lspci());
        PciFunction hca = core.register(PciDeviceSpec.builder("ConnectX-4").vendorId(0x15b3).deviceId(0x1013)
                .classCode(0x020700).bar(0, 1 << 20).bar(2, 8192).msixVectors(4).build());
        core.register(PciDeviceSpec.builder("Samsung PM1733").vendorId(0x144d).deviceId(0xa824).classCode(0x010802).build());
        hca.raiseMsix(1);
        hca.raiseMsix(1);

        assertEquals("""
                0000:03:00.0 Infiniband controller [0207]: ConnectX-4 [15b3:1013]
                0000:04:00.0 Non-Volatile memory controller [0108]: Samsung PM1733 [144d:a824]""", commands.lspci());
        assertEquals("""
                0000:03:00.0 Infiniband controller [0207]: ConnectX-4 [15b3:1013]
                \tRegion 0: Memory (64-bit, non-prefetchable) [size=1M]
                \tRegion 2: Memory (64-bit, non-prefetchable) [size=8K]
                \tCapabilities: MSI-X: Count=4
                \t\tvector 1: raised 2, delivered 0, pending
                \t\t3 vectors never used

                0000:04:00.0 Non-Volatile memory controller [0108]: Samsung PM1733 [144d:a824]""", commands.lspci("-v"));
        assertThrows(IllegalArgumentException.class, () -> commands.lspci("-x"));
    }

    @Test
    void classNamesAndSizesFollowLspci() {
        assertEquals("Ethernet controller", PciCommands.className(0x020000));
        assertEquals("3D controller", PciCommands.className(0x030200));
        assertEquals("Class ff00", PciCommands.className(0xff0000));
        assertEquals("4K", PciCommands.size(4096));
        assertEquals("32M", PciCommands.size(32 << 20));
        assertEquals("1G", PciCommands.size(1L << 30));
    }
}

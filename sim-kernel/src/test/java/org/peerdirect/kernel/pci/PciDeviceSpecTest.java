package org.peerdirect.kernel.pci;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

class PciDeviceSpecTest {

    private static PciDeviceSpec.Builder cx4() {
        return PciDeviceSpec.builder("ConnectX-4").vendorId(0x15b3).deviceId(0x1013).classCode(0x020700);
    }

    @Test
    void aValidSpecKeepsItsFieldsWithBarsSortedByIndex() {
        BarWriteHandler h = (bar, offset, width, value) -> { };
        PciDeviceSpec s = cx4().bar(2, 8192).bar(0, 1 << 20, h).msixVectors(2048).build();
        assertEquals("ConnectX-4", s.name());
        assertEquals(0x15b3, s.vendorId());
        assertEquals(0x1013, s.deviceId());
        assertEquals(0x020700, s.classCode());
        assertEquals(List.of(0, 2), s.bars().stream().map(PciDeviceSpec.Bar::index).toList());
        assertEquals(h, s.bar(0).orElseThrow().onWrite());
        assertTrue(s.bar(1).isEmpty());
        assertEquals(2048, s.msixVectors());
        PciDeviceSpec noBars = PciDeviceSpec.builder("bridge").vendorId(0).deviceId(0xffff).build();
        assertTrue(noBars.bars().isEmpty(), "a function without BARs or MSI-X is fine");
    }

    @Test
    void everyBadFieldIsRefusedNamingTheFieldAndTheValue() {
        refused(() -> PciDeviceSpec.builder(null).build(), "name null");
        refused(() -> PciDeviceSpec.builder("  ").build(), "name '  '");
        refused(() -> cx4().vendorId(-1).build(), "vendorId 0xffffffff");
        refused(() -> cx4().vendorId(0x10000).build(), "vendorId 0x10000");
        refused(() -> cx4().deviceId(0x10000).build(), "deviceId 0x10000");
        refused(() -> cx4().classCode(0x1000000).build(), "classCode 0x1000000");
        refused(() -> cx4().bar(6, 4096), "bar index 6");
        refused(() -> cx4().bar(-1, 4096), "bar index -1");
        refused(() -> cx4().bar(0, 4097), "bar 0 size 4097");
        refused(() -> cx4().bar(1, 3 * 4096), "bar 1 size 12288");
        refused(() -> cx4().bar(2, 2048), "bar 2 size 2048");
        refused(() -> cx4().bar(3, 0), "bar 3 size 0");
        refused(() -> cx4().bar(4, 1L << 31), "bar 4 size 2147483648");
        refused(() -> cx4().bar(0, 4096).bar(0, 8192).build(), "bar index 0");
        refused(() -> cx4().msixVectors(-1).build(), "msixVectors -1");
        refused(() -> cx4().msixVectors(2049).build(), "msixVectors 2049");
        List<PciDeviceSpec.Bar> seven = java.util.stream.IntStream.range(0, 7)
                .mapToObj(i -> new PciDeviceSpec.Bar(i % 6, 4096, null)).toList();
        refused(() -> new PciDeviceSpec("x", 1, 1, 0, seven, 0), "bars: 7 BARs");
        refused(() -> new PciDeviceSpec("x", 1, 1, 0, null, 0), "bars null");
    }

    private static void refused(Executable e, String start) {
        IllegalArgumentException x = assertThrows(IllegalArgumentException.class, e);
        assertTrue(x.getMessage().startsWith(start), () -> "expected '" + start + "...', got: " + x.getMessage());
    }
}

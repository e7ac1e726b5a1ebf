package org.peerdirect.doca;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.peerdirect.doca.dev.DocaDev;
import org.peerdirect.doca.dev.DocaDevinfo;
import org.peerdirect.doca.mmap.DocaMmap;
import org.peerdirect.hca.cx4.ConnectX4Device;
import org.peerdirect.kernel.mm.AddressSpace;

/** doca_devinfo / doca_dev over the verbs device list: listing, lookup by name and PCI address, open/close reference rules. */
class DocaDevTest {

    @TempDir
    Path tmp;
    DocaLab lab;
    AddressSpace proc;

    @BeforeEach
    void up() {
        lab = new DocaLab(tmp, 2);
        proc = lab.process("doca-app");
    }

    @AfterEach
    void down() {
        lab.close();
    }

    static DocaError status(Runnable r) {
        try {
            r.run();
            return DocaError.DOCA_SUCCESS;
        } catch (DocaException e) {
            return e.error();
        }
    }

    @Test
    void theListNamesEveryDeviceWithItsPciAddress() {
        List<DocaDevinfo> list = lab.devinfos(proc);
        assertEquals(List.of("mlx5_0", "mlx5_1"), list.stream().map(DocaDevinfo::getIbdevName).toList());
        for (int i = 0; i < 2; i++) {
            String bdf = lab.fns.get(i).bdf();
            assertEquals(bdf, list.get(i).getPciAddrStr());
            assertTrue(list.get(i).isEqualPciAddr(bdf));
            assertTrue(list.get(i).isEqualPciAddr(bdf.substring(5).toUpperCase()), "the short form without the domain, any case");
            assertFalse(list.get(1 - i).isEqualPciAddr(bdf));
            assertSame(list.get(i), DocaDevinfo.byPciAddr(list, bdf));
        }
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(() -> list.get(0).isEqualPciAddr("03:00")));
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(() -> list.get(0).isEqualPciAddr(null)));
        assertEquals(DocaError.DOCA_ERROR_NOT_FOUND, status(() -> DocaDevinfo.byIbdevName(list, "mlx5_7")));
        assertEquals(DocaError.DOCA_ERROR_NOT_FOUND, status(() -> DocaDevinfo.byPciAddr(list, "0000:7f:00.0")));
        assertEquals(ConnectX4Device.DEVICE_BLUEFIELD3, list.get(0).queryDevice().vendorPartId(), "the capability source sees a BlueField-3");
        assertTrue(list.get(0).isEthernet());
        assertEquals(0, lab.core.openContexts(lab.devs.get(0)), "a query closes the context it opened");
        List<DocaDevinfo> noPci = DocaDevinfo.createList(proc, lab.deviceList(), d -> null);
        assertEquals(DocaError.DOCA_ERROR_NOT_SUPPORTED, status(() -> noPci.get(0).getPciAddrStr()));
        DocaDevinfo.destroyList(list);
    }

    @Test
    void openTwiceIsOneDeviceWithTwoReferences() {
        List<DocaDevinfo> list = lab.devinfos(proc);
        DocaDev a = DocaDev.open(list.get(0));
        DocaDev b = DocaDev.open(list.get(0));
        assertSame(a, b, "doca_dev_open of an open device returns the same instance");
        assertSame(list.get(0), a.asDevinfo());
        assertEquals(1, lab.core.openContexts(lab.devs.get(0)));
        assertSame(proc, a.process());
        a.close();
        assertFalse(a.isClosed());
        a.rdmaBridgeGetDevPd(); // still usable: one reference left
        b.close();
        assertTrue(a.isClosed());
        assertEquals(0, lab.core.openContexts(lab.devs.get(0)), "the last close frees the PD and the context");
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(a::close), "a second close of a closed device");
        assertEquals(DocaError.DOCA_ERROR_INVALID_VALUE, status(a::rdmaBridgeGetDevPd));
        DocaDev c = DocaDev.open(list.get(0));
        assertFalse(c.isClosed(), "a closed device opens again, anew");
        c.close();
    }

    @Test
    void closeWhileAMapUsesTheDeviceIsInUse() {
        DocaDev dev = lab.open(proc, 1);
        DocaMmap m = DocaMmap.create();
        m.addDev(dev);
        DocaException e = assertThrows(DocaException.class, dev::close);
        assertEquals(DocaError.DOCA_ERROR_IN_USE, e.error());
        assertTrue(e.getMessage().contains("doca_mmap"), e.getMessage());
        assertFalse(dev.isClosed(), "IN_USE keeps the reference");
        m.rmDev(dev);
        m.destroy();
        dev.close();
        assertTrue(dev.isClosed());
    }

    @Test
    void aRemovedDeviceIsNotListedAndDoesNotOpen() {
        List<DocaDevinfo> list = lab.devinfos(proc);
        lab.core.unregister(lab.ibs.get(1));
        assertEquals(List.of("mlx5_0"), lab.devinfos(proc).stream().map(DocaDevinfo::getIbdevName).toList());
        assertEquals(DocaError.DOCA_ERROR_NOT_CONNECTED, status(() -> DocaDev.open(list.get(1))));
        lab.ibs.get(1).close();
        lab.ibs.remove(1);
    }

    @Test
    void errorsCarryDocaValuesAndNames() {
        assertEquals(18, DocaError.DOCA_ERROR_BAD_STATE.value());
        assertEquals(DocaError.DOCA_ERROR_TIME_OUT, DocaError.of(9));
        assertEquals("DOCA_ERROR_NOT_SUPPORTED", DocaError.of(4).getName());
        assertEquals("Invalid input", DocaError.DOCA_ERROR_INVALID_VALUE.getDescr());
        assertEquals(DocaError.DOCA_ERROR_UNKNOWN, DocaError.of(1000));
        assertThrows(IllegalArgumentException.class, () -> new DocaException(DocaError.DOCA_SUCCESS, "not an error"));
    }
}

package org.peerdirect.mlx5.ib;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.extension.RegisterExtension;

import org.peerdirect.hca.cx4.ConnectX4Device;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.testkit.KnownDifferences;
import org.peerdirect.testkit.VerbsContract;

/**
 * The provider verbs contract (and its destroy half) on two ConnectX-4 models with mlx5_core,
 * mlx5_ib and libmlx5. {@link #KNOWN}: what still fails, each in the ConnectX-4 model (the
 * silicon), not in the driver or libmlx5; each must still fail, so the list only shrinks.
 * {@link Mlx5Machine#stopMachine} is the audit.
 */
class Mlx5VerbsContractTest extends VerbsContract {

    /** Contract test to the cause found (none left: both were the silicon's, fixed). */
    static final Map<String, String> KNOWN = Map.of();

    @RegisterExtension
    static final KnownDifferences DIFFERENCES = new KnownDifferences(KNOWN);

    final Mlx5Machine m = new Mlx5Machine() {
    };

    @Override
    protected void start(Path tmp) {
        m.startMachine(tmp, "verbs-contract", ConnectX4Device.DEVICE_CONNECTX4, ConnectX4Device.DEVICE_CONNECTX4);
    }

    @Override
    protected IbvContext open(int dev) {
        return m.devs.get(dev).open(m.proc);
    }

    @Override
    protected AddressSpace process() {
        return m.proc;
    }

    @Override
    protected Mm mm() {
        return m.mm;
    }

    @Override
    protected void stop() {
        List<String> leaks = m.stopMachine();
        assertEquals(List.of(), leaks, "nothing left behind");
    }
}

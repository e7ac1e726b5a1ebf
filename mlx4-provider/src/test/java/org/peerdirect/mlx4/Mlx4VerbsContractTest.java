package org.peerdirect.mlx4;

import java.nio.file.Path;
import java.util.Map;

import org.junit.jupiter.api.extension.RegisterExtension;
import org.peerdirect.ib.core.verbs.IbvContext;
import org.peerdirect.kernel.mm.AddressSpace;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.testkit.KnownDifferences;
import org.peerdirect.testkit.VerbsContract;

/**
 * The provider verbs contract (and its destroy half) on two ConnectX-3 models with mlx4
 * ({@link Lab}; its close is the audit). {@link #KNOWN} lists the contract tests mlx4 still
 * fails, each with its cause; each must still fail, so the list only shrinks.
 */
class Mlx4VerbsContractTest extends VerbsContract {

    /** Contract test to the cause found in mlx4 (none left: the errnos, the MR at an iova and the GRH were fixed). */
    static final Map<String, String> KNOWN = Map.of();

    @RegisterExtension
    static final KnownDifferences DIFFERENCES = new KnownDifferences(KNOWN);

    Lab lab;

    @Override
    protected void start(Path tmp) {
        lab = new Lab(tmp, 2);
    }

    @Override
    protected IbvContext open(int dev) {
        return lab.ib.get(dev).open(lab.proc);
    }

    @Override
    protected AddressSpace process() {
        return lab.proc;
    }

    @Override
    protected Mm mm() {
        return lab.mm;
    }

    @Override
    protected void stop() {
        lab.close();
    }
}

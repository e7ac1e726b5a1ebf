package org.peerdirect.rdma.tools;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Supplier;

import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.component.annotations.ReferenceCardinality;
import org.osgi.service.component.annotations.ReferencePolicy;
import org.osgi.service.component.annotations.ReferencePolicyOption;
import org.peerdirect.gpu.nvidia.NvidiaRm;

/**
 * {@link GpuBar1} from the nvidia driver's GPUs: which one's allocation a range is
 * ({@link NvidiaRm#owns}, the question nvidia-peermem's {@code acquire} asks) and its BAR1 use
 * ({@link NvidiaRm#smi}, what {@code gpu:smi} prints). The range is widened to 64 KiB GPU pages as
 * nvidia-peermem widens it before {@code nvidia_p2p_get_pages}. Reads only. The only class of
 * rdma-tools that names the nvidia package, which the bundle imports optionally: without the
 * nvidia bundle this component alone does not start and the doctor says nothing of BAR1.
 */
@Component(service = GpuBar1.class)
public final class NvidiaBar1 implements GpuBar1 {

    @Reference(cardinality = ReferenceCardinality.MULTIPLE, policy = ReferencePolicy.DYNAMIC, policyOption = ReferencePolicyOption.GREEDY)
    private final List<NvidiaRm> gpus = new CopyOnWriteArrayList<>();
    private final Supplier<List<NvidiaRm>> bound;

    public NvidiaBar1() {
        this.bound = () -> gpus;
    }

    /** Outside OSGi (tests): over the GPUs {@code bound} gives. */
    public NvidiaBar1(Supplier<List<NvidiaRm>> bound) {
        this.bound = bound;
    }

    @Override
    public Bar1 bar1(int pid, long addr, long length) {
        long page = NvidiaRm.P2P_PAGE_SIZE;
        long start = addr & -page;
        long end = addr + length + page - 1 & -page;
        if (length <= 0 || end <= start) {
            return null;
        }
        for (NvidiaRm rm : bound.get()) {
            if (rm.owns(pid, start, end - start)) {
                NvidiaRm.Smi s = rm.smi();
                return new Bar1(s.name(), s.bdf(), (end - start) / page, (s.bar1Bytes() - s.bar1UsedBytes()) / page, s.bar1Bytes() / page);
            }
        }
        return null;
    }
}

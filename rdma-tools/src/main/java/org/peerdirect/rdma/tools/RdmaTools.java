package org.peerdirect.rdma.tools;

import org.apache.felix.service.command.Descriptor;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.component.annotations.ReferenceCardinality;
import org.osgi.service.component.annotations.ReferencePolicy;
import org.osgi.service.component.annotations.ReferencePolicyOption;
import org.peerdirect.ib.core.umem.UmemService;
import org.peerdirect.ib.core.verbs.IbvDeviceList;
import org.peerdirect.kernel.iommu.Iommu;
import org.peerdirect.kernel.mm.Mm;
import org.peerdirect.peermem.alloc.PeerMemoryAllocator;

/**
 * The {@code rdma:*} Gogo commands: one service whose functions are the tools, as a shell's
 * {@code $PATH} lists the programs of rdma-core and perftest. Each function hands its arguments to
 * the tool's own class, which is the program ({@link DeviceList} ibv_devices, {@link Devinfo}
 * ibv_devinfo, {@link RcPingpong} ibv_rc_pingpong, {@link UdPingpong}, {@link XsrqPingpong},
 * {@link Asyncwatch}, perftest's {@link WriteBw}, {@link ReadBw}, {@link SendBw},
 * {@link WriteLat}, {@link AtomicBw}, and this project's {@link InvalidateTest}, {@link Put} and {@link Doctor});
 * the tools share {@link Options}, {@link DeviceLookup}, {@link PeerMemory}, {@link Buffers},
 * {@link Endpoint}, {@link Completions} and perftest's {@link PerftestReport}. Each side of a test
 * is its own simulated process.
 *
 * <p>One component for the fourteen tools, not one each: the service is the command
 * registration (Gogo finds a function by its name on the registered object), and what it binds,
 * the device list, the kernel, the peer memory clients and the IOMMU, every tool needs alike; so
 * it binds them once into the {@link ToolEnv} the tools share. Fourteen components would repeat
 * the same references fourteen times (each list of peer clients kept apart, each updated on
 * its own as a client bundle comes and goes), and the tools would come and go one by one when
 * the device list or the kernel does, where now {@code rdma:*} is there or not as a whole.
 */
@Component(service = RdmaTools.class, property = {"osgi.command.scope=rdma", "osgi.command.function=devices",
        "osgi.command.function=devinfo", "osgi.command.function=pingpong", "osgi.command.function=write_bw",
        "osgi.command.function=read_bw", "osgi.command.function=send_bw", "osgi.command.function=write_lat", "osgi.command.function=atomic_bw",
        "osgi.command.function=invalidate_test", "osgi.command.function=put", "osgi.command.function=ud_pingpong", "osgi.command.function=xsrq_pingpong",
        "osgi.command.function=asyncwatch", "osgi.command.function=doctor"})
public final class RdmaTools {

    private static final String ARGS = "options; --help lists them";

    private final ToolEnv env;

    @Activate
    public RdmaTools(@Reference IbvDeviceList devices, @Reference Mm mm) {
        this.env = new ToolEnv(devices, mm);
    }

    @Reference(cardinality = ReferenceCardinality.MULTIPLE, policy = ReferencePolicy.DYNAMIC,
            policyOption = ReferencePolicyOption.GREEDY, unbind = "removeAllocator")
    void addAllocator(PeerMemoryAllocator a) {
        env.addAllocator(a);
    }

    void removeAllocator(PeerMemoryAllocator a) {
        env.removeAllocator(a);
    }

    /** Outside OSGi (tests): offer a peer device's memory to --mem. */
    public void addAllocatorForTests(PeerMemoryAllocator a) {
        env.addAllocator(a);
    }

    /** The machine's IOMMU, when there is one: the tools report the bytes that crossed PCI BARs peer to peer. */
    @Reference(cardinality = ReferenceCardinality.OPTIONAL, policy = ReferencePolicy.DYNAMIC, policyOption = ReferencePolicyOption.GREEDY,
            unbind = "unsetIommu")
    void setIommu(Iommu i) {
        env.setIommu(i);
    }

    void unsetIommu(Iommu i) {
        env.unsetIommu(i);
    }

    /** The IB core's umem service: rdma:doctor asks it which peer clients would claim a range. */
    @Reference(cardinality = ReferenceCardinality.OPTIONAL, policy = ReferencePolicy.DYNAMIC, policyOption = ReferencePolicyOption.GREEDY,
            unbind = "unsetUmems")
    void setUmems(UmemService u) {
        env.setUmems(u);
    }

    void unsetUmems(UmemService u) {
        env.unsetUmems(u);
    }

    /** The GPUs' BAR1 (the nvidia driver's, when it is there): rdma:doctor says whether GPU memory would find BAR1 space. */
    @Reference(cardinality = ReferenceCardinality.MULTIPLE, policy = ReferencePolicy.DYNAMIC, policyOption = ReferencePolicyOption.GREEDY,
            unbind = "removeGpuBar1")
    void addGpuBar1(GpuBar1 g) {
        env.addGpuBar1(g);
    }

    void removeGpuBar1(GpuBar1 g) {
        env.removeGpuBar1(g);
    }

    /** Outside OSGi (tests): a GPU BAR1 view rdma:doctor consults ({@link NvidiaBar1} over the test's GPUs). */
    public void addGpuBar1ForTests(GpuBar1 g) {
        env.addGpuBar1(g);
    }

    /** Outside OSGi (tests): the umem service rdma:doctor asks about peer clients. */
    public void setUmemForTests(UmemService u) {
        env.setUmems(u);
    }

    /** Outside OSGi (tests): the IOMMU whose peer-to-peer counters the tools report. */
    public void setIommuForTests(Iommu i) {
        env.setIommu(i);
    }

    @Descriptor(DeviceList.DESCRIPTION)
    public String devices() {
        return new DeviceList(env).run();
    }

    @Descriptor(Devinfo.DESCRIPTION)
    public String devinfo(@Descriptor(ARGS) Object... args) {
        return new Devinfo(env).run(args);
    }

    @Descriptor(RcPingpong.DESCRIPTION)
    public String pingpong(@Descriptor(ARGS) Object... args) throws Exception {
        return new RcPingpong(env).run(args);
    }

    @Descriptor(UdPingpong.DESCRIPTION)
    public String ud_pingpong(@Descriptor(ARGS) Object... args) {
        return new UdPingpong(env).run(args);
    }

    @Descriptor(XsrqPingpong.DESCRIPTION)
    public String xsrq_pingpong(@Descriptor(ARGS) Object... args) {
        return new XsrqPingpong(env).run(args);
    }

    @Descriptor(Asyncwatch.DESCRIPTION)
    public String asyncwatch(@Descriptor(ARGS) Object... args) throws InterruptedException {
        return new Asyncwatch(env).run(args);
    }

    @Descriptor(WriteBw.DESCRIPTION)
    public String write_bw(@Descriptor(ARGS) Object... args) {
        return new WriteBw(env).run(args);
    }

    @Descriptor(ReadBw.DESCRIPTION)
    public String read_bw(@Descriptor(ARGS) Object... args) {
        return new ReadBw(env).run(args);
    }

    @Descriptor(SendBw.DESCRIPTION)
    public String send_bw(@Descriptor(ARGS) Object... args) {
        return new SendBw(env).run(args);
    }

    @Descriptor(AtomicBw.DESCRIPTION)
    public String atomic_bw(@Descriptor(ARGS) Object... args) {
        return new AtomicBw(env).run(args);
    }

    @Descriptor(WriteLat.DESCRIPTION)
    public String write_lat(@Descriptor(ARGS) Object... args) {
        return new WriteLat(env).run(args);
    }

    @Descriptor(Doctor.DESCRIPTION)
    public String doctor(@Descriptor("[-d DEV] PID ADDR LEN [--access FLAGS]; --help explains") Object... args) {
        return new Doctor(env).run(args);
    }

    @Descriptor(InvalidateTest.DESCRIPTION)
    public String invalidate_test(@Descriptor(ARGS) Object... args) {
        return new InvalidateTest(env).run(args);
    }

    @Descriptor(Put.DESCRIPTION)
    public String put(@Descriptor(ARGS) Object... args) {
        return new Put(env).run(args);
    }
}

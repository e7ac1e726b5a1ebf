package org.peerdirect.dpa.samples.dev;

import org.peerdirect.doca.dpa.dev.DocaDpaDev;
import org.peerdirect.dpacc.DpaApp;
import org.peerdirect.dpacc.DpaGlobal;

/**
 * Device code of {@code dpa:sample kernel_launch}: DOCA's {@code dpa_kernel_launch} sample
 * ({@code samples/doca_dpa/dpa_kernel_launch/device/dpa_kernel_launch_kernels_dev.c}, doca-samples
 * 3.3; DPA_MODEL.md §4 scenario 5). One {@code __dpa_global__} kernel that logs one line at INFO.
 * dpacc generates {@code KernelLaunchDevStubs} (the app and {@code HELLO_WORLD}) and links this
 * class with doca-dpa-dev and flexio-dev into {@code META-INF/dpa/dpa_sample_kernel_launch.dpaimg}.
 */
@DpaApp("dpa_sample_kernel_launch")
public final class KernelLaunchDev {

    /** What the kernel prints, without the format's trailing newline (a log line is a line). */
    public static final String HELLO = "Hello from kernel";

    private KernelLaunchDev() {
    }

    /**
     * {@code __dpa_global__ void hello_world(void)}: {@code DOCA_DPA_DEV_LOG_INFO("Hello from kernel\n")}.
     * [model] dpacc's kernels take one {@code long}; the sample's host passes 0, which it ignores.
     */
    @DpaGlobal("hello_world")
    static void helloWorld(long unused) {
        DocaDpaDev.log(DocaDpaDev.LOG_LEVEL_INFO, HELLO);
    }
}

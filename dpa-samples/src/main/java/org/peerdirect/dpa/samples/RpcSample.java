package org.peerdirect.dpa.samples;

import java.time.Duration;

import org.peerdirect.dpa.samples.dev.RpcDevStubs;
import org.peerdirect.flexio.FlexioProcess;
import org.peerdirect.flexio.FlexioStatus;
import org.peerdirect.ib.core.verbs.IbvContext;

/**
 * {@code dpa:sample rpc}: FlexIO's RPC sample ({@code flexio_rpc}; DPA_MODEL.md §4 scenario 1).
 * The host loads {@code dpa_sample_rpc} into a DPA process ({@code flexio_process_create}), calls
 * {@code rpc_calculate} with two numbers ({@code flexio_process_call}) and prints what the device
 * returned; the process is destroyed whatever happened.
 *
 * @see <a href="https://docs.nvidia.com/doca/sdk/flexio+sdk/index.html">flexio_process_call</a>
 */
final class RpcSample {

    static final FlexioProcess.Attr ATTR = new FlexioProcess.Attr(64 * 1024, Duration.ofSeconds(30));

    private RpcSample() {
    }

    static void run(IbvContext ctx, Out out) {
        try (FlexioProcess p = FlexioProcess.create(ctx, RpcDevStubs.APP, ATTR)) {
            out.line("flexio_process_create: process %d of app %s (%d B image, flexio-dev linked), heap %d KiB", p.id(),
                    p.app().name(), p.app().imageSize(), p.processMemInfoGet().size() / 1024);
            for (long[] ab : new long[][] {{7, 35}, {-1, 1L << 40}}) {
                long r = p.call(RpcDevStubs.RPC_CALCULATE, ab[0], ab[1]);
                out.line("rpc_calculate(%d, %d) = %d%s", ab[0], ab[1], r, r == ab[0] + ab[1] ? "" : "  WRONG: expected " + (ab[0] + ab[1]));
            }
            out.line("flexio_err_status_get: %s", Out.errStatus(p.errStatusGet()));
        }
        out.line("flexio_process_destroy: done");
    }
}

package org.peerdirect.interop;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.peerdirect.ib.core.verbs.IbvDevice;
import org.peerdirect.ib.core.verbs.IbvDeviceList;
import org.peerdirect.kernel.mm.KernelException;
import org.peerdirect.mlx4.Mlx4Device;
import org.peerdirect.rdma.tools.RdmaTools;
import org.peerdirect.testkit.HcaDriver;
import org.peerdirect.testkit.Machine;

/**
 * Two "hosts" in one JVM for the tools across hosts: two ConnectX-3 models on the in-JVM fabric
 * (mlx4_0, mlx4_1) with the mlx4 driver, built by the testkit's {@link Machine} (whose close runs
 * the audit), and the rdma:* tools over them; each tool run is its own simulated process, the
 * out-of-band TCP goes over loopback. {@link #both} runs a server and a client command at once.
 */
final class TwoHosts implements AutoCloseable {

    final Machine machine;
    final RdmaTools tools;
    private final List<IbvDevice> devs = new ArrayList<>();

    TwoHosts(Path tmp) {
        machine = Machine.builder(tmp).hcas(2, 1, (i, fn, umems, kmm) -> {
            Mlx4Device d = new Mlx4Device("mlx4_" + i, fn, kmm, umems);
            return new HcaDriver.Probed(d, d::removeHardware);
        }).build();
        for (int i = 0; i < 2; i++) {
            devs.add(machine.device(i));
        }
        tools = new RdmaTools(new IbvDeviceList() {
            @Override
            public List<IbvDevice> devices() {
                return devs.stream().filter(d -> !d.removed()).toList();
            }

            @Override
            public IbvDevice device(String name) {
                return devices().stream().filter(d -> name == null || d.name().equals(name)).findFirst()
                        .orElseThrow(() -> new KernelException(KernelException.Errno.ENODEV, "no device " + name));
            }
        }, machine.mm());
    }

    interface Command {
        String run() throws Exception;
    }

    /** The two outputs of {@code server} (started first, on its own thread) and {@code client}; the first failure ends the test. */
    static String[] both(Command server, Command client) throws Exception {
        CompletableFuture<String> s = new CompletableFuture<>();
        Thread t = Thread.ofPlatform().name("oob-server").start(() -> {
            try {
                s.complete(server.run());
            } catch (Throwable e) {
                s.completeExceptionally(e);
            }
        });
        try {
            String c = client.run();
            return new String[] {s.get(90, TimeUnit.SECONDS), c};
        } catch (Exception | Error e) {
            t.interrupt(); // the server would wait for a client that failed
            t.join(10_000);
            if (s.isCompletedExceptionally()) {
                e.addSuppressed(s.exceptionNow());
            }
            throw e;
        }
    }

    @Override
    public void close() {
        machine.close();
    }
}

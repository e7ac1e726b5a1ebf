package org.peerdirect.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The bad-input suite of issue 10: what a user types wrong, across every command group, in one
 * container (the distribution the build assembled, booted in this JVM). Each bad statement must
 * fail with a message that names the problem (a fragment of it is asserted), in one line, with
 * no stack trace on either stream; afterwards the container is intact: the IOMMU audit is clean,
 * no process or registration is left over, the configuration is unchanged, and a validated
 * ping-pong passes. The launcher's own command-line errors and exit codes are checked through
 * {@link Main#run} in {@link #theLauncherRefusesBadCommandLinesWithItsExitCodes}.
 *
 * <p>All failures are collected and reported together, so one run shows every wrong message.
 */
class BadInputIT {

    @TempDir
    static Path tmp;
    static Container container;
    static GogoSession session;
    static final ByteArrayOutputStream OUT = new ByteArrayOutputStream();
    static final ByteArrayOutputStream ERR = new ByteArrayOutputStream();
    static Path dist;

    @BeforeAll
    static void boot() throws Exception {
        dist = Path.of(System.getProperty("peerdirect.home", "target/peerdirect")).toAbsolutePath();
        container = Container.launch(dist, tmp.resolve("home"), dist.resolve("bundle"), false, false);
        assertEquals(List.of(), container.problems(), "every bundle ACTIVE");
        session = GogoSession.open(container.framework().getBundleContext(), 30_000,
                new PrintStream(OUT, true, StandardCharsets.UTF_8), new PrintStream(ERR, true, StandardCharsets.UTF_8));
    }

    @AfterAll
    static void down() throws Exception {
        if (session != null) {
            session.close();
        }
        if (container != null) {
            container.stop(30_000);
        }
    }

    /** {statement, fragment the message must contain (case-insensitive)}. */
    static final String[][] BAD = {
        // ---- Gogo itself: unknown commands, syntax
        {"nosuch:cmd", "unknown command 'nosuch:cmd'"},
        {"kernel:nosuch", "unknown command 'kernel:nosuch'"},
        {"frobnicate", "unknown command 'frobnicate'"},
        {"echo \"unclosed", "eof"},
        {"{ echo a", "eof"},
        {"kernel:maps (", "eof"},
        {"kernel:maps $undefined_variable", "kernel:maps: expected a process id"},
        // ---- kernel:
        {"kernel:maps", "kernel:maps: expected 1 argument, got none; usage: kernel:maps <process id>; see help kernel:maps"},
        {"kernel:maps abc", "kernel:maps: expected a process id"},
        {"kernel:maps -1", "kernel:maps: a process id must be at least 1, got -1"},
        {"kernel:maps 0", "must be at least 1"},
        {"kernel:maps 99999", "kernel:maps: no process 99999"},
        {"kernel:maps 1 2", "kernel:maps: expected 1 argument, got 2 (1 2)"},
        {"kernel:maps 1.5", "expected a process id"},
        {"kernel:maps 0xZZ", "expected a process id"},
        {"kernel:maps 99999999999999999999", "expected a process id"},
        {"kernel:spawn", "kernel:spawn: expected 1 argument, got none; usage: kernel:spawn <process name>; see help kernel:spawn"},
        {"kernel:spawn ''", "a process name is 1 to 64 characters"},
        {"kernel:spawn " + "n".repeat(65), "1 to 64 characters"},
        {"kernel:mmap $pid", "kernel:mmap: expected 2 or 3 arguments, got 1"},
        {"kernel:mmap $pid abc", "kernel:mmap: expected the length"},
        {"kernel:mmap $pid 0", "kernel:mmap: the length must be from 1"},
        {"kernel:mmap $pid -4096", "the length must be"},
        {"kernel:mmap $pid 1P", "expected the length"},
        {"kernel:mmap $pid 128T", "the length must be"},
        {"kernel:mmap $pid 4096 huge2", "the third argument is one of huge"},
        {"kernel:mmap $pid 4096 HUGE", "the third argument is one of huge"},
        {"kernel:mmap 99999 4096", "kernel:mmap: no process 99999"},
        {"kernel:mmap x 4096", "kernel:mmap: expected a process id"},
        {"kernel:touch $pid $a", "kernel:touch: expected 3 arguments, got 2"},
        {"kernel:touch $pid zz 4096", "kernel:touch: expected an address"},
        {"kernel:touch $pid 0x1000 4096", "sigsegv at 0x1000"},
        {"kernel:touch $pid $a 0", "kernel:touch: the length must be"},
        {"kernel:touch 99999 $a 4096", "no process 99999"},
        {"kernel:pageout $pid $a", "kernel:pageout: expected 3 arguments, got 2"},
        {"kernel:pageout $pid 0x123 4096", "einval"},
        {"kernel:pageout $pid $a abc", "kernel:pageout: expected the length"},
        {"kernel:pageout $pid 0x7f0000000000 4096", "enomem: madvise"},
        {"kernel:kill", "kernel:kill: expected 1 argument, got none"},
        {"kernel:kill abc", "kernel:kill: expected a process id"},
        {"kernel:kill 99999", "kernel:kill: no process 99999"},
        {"kernel:lspci -x", "kernel:lspci: unknown option '-x'"},
        {"kernel:lspci -v -v", "kernel:lspci: expected no arguments or 1 argument, got 2"},
        {"kernel:sysfs /nonexistent", "kernel:sysfs: no such path"},
        {"kernel:sysfs a b", "kernel:sysfs: expected no arguments or 1 argument, got 2 (a b)"},
        {"kernel:meminfo extra", "kernel:meminfo: expected no arguments, got 1 (extra); usage: kernel:meminfo; see help kernel:meminfo"},
        {"kernel:ps extra", "kernel:ps: expected no arguments, got 1"},
        {"kernel:iommu extra", "kernel:iommu: expected no arguments, got 1"},
        // ---- example_peer:
        {"example_peer:alloc", "example_peer:alloc: expected 1 or 2 arguments, got none"},
        {"example_peer:alloc abc", "example_peer:alloc: expected a process id"},
        {"example_peer:alloc 99999", "no process 99999"},
        {"example_peer:alloc $pid 0", "example_peer:alloc: the size must be"},
        {"example_peer:alloc $pid abc", "example_peer:alloc: expected the size"},
        {"example_peer:alloc $pid 2T", "the size must be"},
        {"example_peer:alloc $pid 2G", "enomem"},
        {"example_peer:alloc $pid 1M 5", "example_peer:alloc: expected 1 or 2 arguments, got 3"},
        {"example_peer:free $pid 0x1234", "no allocation at 0x1234"},
        {"example_peer:free $pid zz", "example_peer:free: expected an address"},
        {"example_peer:free 99999 0x1000", "no allocation"},
        {"example_peer:free $pid", "example_peer:free: expected 2 arguments, got 1"},
        {"example_peer:invalidate $pid 0x1234", "no allocation at 0x1234"},
        {"example_peer:invalidate", "example_peer:invalidate: expected 2 arguments, got none"},
        {"example_peer:invalidate $pid nope", "expected an address"},
        {"example_peer:list x", "example_peer:list: expected no arguments, got 1 (x)"},
        // ---- gpu:, ssd:, rdma:put and --dmabuf
        {"gpu:alloc 99999 1M", "no process 99999"},
        {"gpu:free $pid 0x1234", "not a device allocation"},
        {"ssd:read 0", "ssd:read: expected 2 arguments, got 1 (0)"},
        {"ssd:read 64M 4", "ssd:read: OFFSET must be"},
        {"ssd:read 0 5000", "ssd:read: LENGTH must be"},
        {"ssd:write 1G x", "ssd:write: OFFSET must be"},
        {"ssd:flush nvme7", "no SSD nvme7"},
        {"rdma:put --mem ssd_mem", "needs --mem <peer client> and --text"},
        {"rdma:put --mem host --text x", "not host"},
        {"rdma:put --mem nv_mem --text x", "without fixed offsets"},
        {"rdma:put --mem ssd_mem --offset 100 --text x", "must be page-aligned"},
        {"rdma:put --mem ssd_mem --offset 1G --text x", "inside the"},
        {"rdma:pingpong --dmabuf -n 1", "--dmabuf registers peer memory"},
        {"rdma:write_bw --dmabuf -n 5", "--dmabuf registers peer memory"},
        {"rdma:pingpong -d mlx4_0 --mem nv_mem --dmabuf -n 1", "reg_user_mr_dmabuf"},
        {"rdma:pingpong -d mlx4_0 -O -n 1", "isn't supporting implicit ODP"},
        {"rdma:pingpong -O --mem nv_mem -n 1", "on-demand paging (-o) works on host memory"},
        {"rdma:write_bw --odp --mem nv_mem -n 5", "on-demand paging (-o) works on host memory"},
        // ---- umemtest:
        {"umemtest:reg", "umemtest:reg: expected 3 arguments, got none"},
        {"umemtest:reg abc $a 4096", "umemtest:reg: expected a process id"},
        {"umemtest:reg 99999 $a 4096", "umemtest:reg: no process 99999"},
        {"umemtest:reg $pid zz 4096", "umemtest:reg: expected an address"},
        {"umemtest:reg $pid $a abc", "umemtest:reg: expected the length"},
        {"umemtest:reg $pid $a 0", "umemtest:reg: the length must be"},
        {"umemtest:reg $pid 0x7000000000 4096", "efault"},
        {"umemtest:reg $pid $a 1G", "rlimit_memlock"},
        {"umemtest:reg $pid $big 16M", "enomem"},
        {"umemtest:dma", "umemtest:dma: expected 1 argument, got none"},
        {"umemtest:dma abc", "umemtest:dma: expected an mr id"},
        {"umemtest:dma 9999", "umemtest:dma: no mr 9999"},
        {"umemtest:dma -1", "an mr id must be at least 0"},
        {"umemtest:dereg 9999", "umemtest:dereg: no mr 9999"},
        {"umemtest:dereg abc", "expected an mr id"},
        {"umemtest:list x", "umemtest:list: expected no arguments, got 1"},
        // ---- peermem:
        {"peermem:stats nosuch", "peermem:stats: no peer memory client named 'nosuch'"},
        {"peermem:stats a b", "peermem:stats: expected no arguments or 1 argument, got 2"},
        {"peermem:clients x", "peermem:clients: expected no arguments, got 1 (x); usage: peermem:clients; see help peermem:clients"},
        // ---- rdma:
        {"rdma:devices x", "rdma:devices: expected no arguments, got 1 (x); usage: rdma:devices; see help rdma:devices"},
        {"rdma:devinfo -d nosuch", "nosuch"},
        {"rdma:devinfo -i 2", "rdma:devinfo: option -i"},
        {"rdma:devinfo -x", "rdma:devinfo: unknown option '-x'"},
        {"rdma:devinfo -d", "rdma:devinfo: option -d needs a value"},
        {"rdma:pingpong -s", "rdma:pingpong: option -s needs a value"},
        {"rdma:pingpong -s 0", "rdma:pingpong: option -s (message size in bytes (k/m suffixes)) must be from 1"},
        {"rdma:pingpong -s abc", "rdma:pingpong: expected option -s"},
        {"rdma:pingpong -s 32M", "must be from 1 to 16777216"},
        {"rdma:pingpong -n 0", "option -n (round trips) must be"},
        {"rdma:pingpong -n -5", "option -n (round trips) must be"},
        {"rdma:pingpong -d nosuch", "nosuch"},
        {"rdma:pingpong --mem nosuch", "nosuch"},
        {"rdma:pingpong -r 5", "rdma:pingpong: unknown option '-r'"},
        {"rdma:pingpong extra", "rdma:pingpong: unknown option 'extra'"},
        {"rdma:write_bw -q 0", "rdma:write_bw: option -q"},
        {"rdma:write_bw -q 17", "must be from 1 to 16"},
        {"rdma:write_bw -t 0", "option -t"},
        {"rdma:write_bw -t 9000", "must be from 1 to 8192"},
        {"rdma:write_bw -s 9M", "option -s"},
        {"rdma:write_bw -n 4", "option -n"},
        {"rdma:write_bw -d nosuch", "nosuch"},
        {"rdma:write_bw --mem nosuch", "nosuch"},
        {"rdma:write_bw -a -s x", "expected option -s"},
        {"rdma:read_bw -z", "rdma:read_bw: unknown option '-z'"},
        {"rdma:send_bw -q 99", "rdma:send_bw: option -q"},
        {"rdma:write_lat -q 2", "rdma:write_lat: option -q"},
        {"rdma:write_lat -s abc", "rdma:write_lat: expected option -s"},
        {"rdma:invalidate_test --mem host", "must name a peer memory client"},
        {"rdma:invalidate_test -n 1", "rdma:invalidate_test: option -n"},
        {"rdma:invalidate_test -s 4", "rdma:invalidate_test: option -s"},
        {"rdma:invalidate_test --mem nosuch", "nosuch"},
        // ---- bundle commands
        {"start 999", "start: no bundle with id 999"},
        {"stop 999", "stop: no bundle with id 999"},
        {"start no.such.bundle", "start: no bundle named 'no.such.bundle'"},
        {"stop", "stop: expected a bundle"},
        {"start", "start: expected a bundle"},
        {"install", "install: expected a bundle location"},
        {"install file:/nonexistent.jar", "install: cannot install file:/nonexistent.jar: no such file"},
        {"install $garbage", "not a valid bundle: not a jar file"},
        {"install nonsense", "'nonsense' is not a location"},
        {"update 999", "update: no bundle with id 999"},
        {"update org.peerdirect.umem-test file:/nonexistent.jar", "cannot read file:/nonexistent.jar"},
        {"update 1 a b", "update: expected a bundle and at most one location"},
        {"uninstall 999", "uninstall: no bundle with id 999"},
        {"uninstall", "uninstall: expected a bundle"},
        {"stop 0", "bundle 0 is the framework itself"},
        {"uninstall 0", "bundle 0 is the framework itself"},
        {"update 0", "bundle 0 is the framework itself"},
        // issue 45 item 7: the shell's own runtime is refused as bundle 0 is (Gogo ended with a NullPointerException)
        {"stop org.apache.felix.gogo.runtime", "(org.apache.felix.gogo.runtime) is the shell's own runtime and cannot be stopped"},
        {"uninstall org.apache.felix.gogo.jline", "is the shell's own runtime and cannot be uninstalled"},
        {"update org.apache.felix.gogo.runtime", "is the shell's own runtime and cannot be updated"},
        {"update $ibcore $garbage", "(org.peerdirect.ib-core): not a valid bundle: not a jar file"},
        {"start 'Bundle ID: 999'", "start: no bundle with id 999"},
        // issue 45 item 6: a wrong argument count gives the command's usage, for every command (NoArityLeftUnwordedIT sweeps them)
        {"kernel:spawn a b c", "kernel:spawn: expected 1 argument, got 3 (a b c); usage: kernel:spawn <process name>; see help kernel:spawn"},
        {"kernel:mmap", "kernel:mmap: expected 2 or 3 arguments, got none; usage: kernel:mmap <process id> <length in bytes> [huge]; see help kernel:mmap"},
        {"example_peer:alloc 1 2 3", "example_peer:alloc: expected 1 or 2 arguments, got 3 (1 2 3); usage: example_peer:alloc <process id> [<bytes>]"},
        {"refresh x", "refresh: expected no arguments, got 1 (x)"},
        {"sleep", "sleep: expected the seconds"},
        {"sleep -1", "sleep: the seconds must be from 0"},
        // ---- Configuration Admin through peerdirect:config
        {"peerdirect:config nosuch.pid a b", "no peerdirect configuration 'nosuch.pid'"},
        {"peerdirect:config org.peerdirect.kernel.mm nosuch 1", "has no property 'nosuch'"},
        {"peerdirect:config org.peerdirect.kernel.mm memory.size -1", "memory.size = -1 rejected"},
        {"peerdirect:config org.peerdirect.kernel.mm memory.size abc", "expected memory.size"},
        {"peerdirect:config org.peerdirect.kernel.mm memory.size 128G", "memory.size = 128g rejected"},
        {"peerdirect:config org.peerdirect.kernel.mm pid.max 300", "pid.max = 300 rejected"},
        {"peerdirect:config org.peerdirect.kernel.mm poison maybe", "poison is one of true, false"},
        {"peerdirect:config org.peerdirect.kernel.mm swap.size -1", "swap.size = -1 rejected"},
        {"peerdirect:config org.peerdirect.hca.cx3 devices 100", "devices = 100 rejected"},
        {"peerdirect:config org.peerdirect.hca.cx3 devices -1", "devices = -1 rejected"},
        {"peerdirect:config org.peerdirect.hca.cx3 ports 3", "ports = 3 rejected"},
        {"peerdirect:config org.peerdirect.example_peer_mem page.size 12345", "page.size = 12345 rejected"},
        {"peerdirect:config org.peerdirect.example_peer_mem region.size 0", "region.size = 0 rejected"},
        {"peerdirect:config org.peerdirect.kernel.sysfs mirror.interval.ms 1", "mirror.interval.ms = 1 rejected"},
        {"peerdirect:config org.peerdirect.ib.core.peermem close.grace.ms -5", "close.grace.ms = -5 rejected"},
        {"peerdirect:config org.peerdirect.kernel.mm", "peerdirect:config: expected no arguments or 3 arguments, got 1"},
        // ---- a few more of each kind
        {"kernel:touch $pid $a abc", "kernel:touch: expected the length"},
        {"kernel:pageout 99999 0x1000 4096", "no process 99999"},
        {"example_peer:alloc -3", "must be at least 1"},
        {"umemtest:reg $pid $a 4096 extra", "umemtest:reg: expected 3 arguments, got 4"},
        {"rdma:read_bw -s 0", "rdma:read_bw: option -s"},
        {"rdma:send_bw -n abc", "rdma:send_bw: expected option -n"},
        {"refresh extra", "refresh: expected no arguments, got 1 (extra); usage: refresh"},
    };

    @Test
    void everyBadInputGetsAClearErrorAndLeavesTheContainerIntact() throws Exception {
        Path garbage = tmp.resolve("garbage.jar");
        Files.writeString(garbage, "not a jar");
        for (String setup : List.of("pid = (kernel:spawn victim)", "a = (kernel:mmap $pid 64K)", "big = (kernel:mmap $pid 16M)",
                "garbage = '" + garbage.toUri() + "'", "ibcore = org.peerdirect.ib-core")) {
            session.run(setup);
        }
        String settingsBefore = settings(run("peerdirect:config"));
        List<String> wrong = new ArrayList<>();
        int distinct = 0;
        for (String[] bad : BAD) {
            distinct++;
            int errBefore = ERR.size();
            String message;
            try {
                session.run(bad[0]);
                wrong.add(bad[0] + "\n    did not fail");
                continue;
            } catch (Exception e) {
                message = Errors.message(e);
            }
            String printed = ERR.toString(StandardCharsets.UTF_8).substring(errBefore);
            if (!message.toLowerCase(Locale.ROOT).contains(bad[1].toLowerCase(Locale.ROOT))) {
                wrong.add(bad[0] + "\n    message: " + message + "\n    expected to contain: " + bad[1]);
            }
            if (message.contains("\n") || message.contains("\tat ") || printed.contains("\tat ")) {
                wrong.add(bad[0] + "\n    a stack trace or several lines: " + message + printed);
            }
            if (message.contains("Cannot coerce") || message.contains("NumberFormatException")
                    || message.contains("NullPointerException")) {
                wrong.add(bad[0] + "\n    Gogo or JDK text instead of words: " + message);
            }
        }
        assertTrue(wrong.isEmpty(), wrong.size() + " of " + distinct + " bad inputs answered badly:\n  " + String.join("\n  ", wrong));
        assertTrue(distinct >= 150, "at least 150 distinct bad inputs, not " + distinct);

        // intact: configuration unchanged, audit clean, traffic validated, nothing left behind
        assertEquals(settingsBefore, settings(run("peerdirect:config")), "no bad value reached a configuration");
        session.run("kernel:kill $pid");
        assertTrue(run("rdma:pingpong -n 200 -c").contains("no mismatch"));
        String iommu = run("kernel:iommu");
        // the only live mappings are the drivers' own DMA pages: mlx5's (command queue, mailboxes, EQs, firmware pages), mlx4's
        // (mailboxes, EQs, the firmware area and ICM), nvme's admin queue and nvidia's (its queues and the copy staging buffer)
        long mlx5Pages = driverDmaPages("mlx5:pages");
        long mlx4Pages = driverDmaPages("mlx4:pages");
        long nvmePages = driverDmaPages("ssd:info");
        long gpuPages = driverDmaPages("gpu:smi");
        assertTrue(mlx5Pages > 0, run("mlx5:pages"));
        assertTrue(mlx4Pages > 0, run("mlx4:pages"));
        assertTrue(iommu.contains("-> OK") && iommu.contains("live_mappings=" + (mlx5Pages + mlx4Pages + nvmePages + gpuPages) + " "),
                mlx5Pages + " mlx5 pages, " + mlx4Pages + " mlx4 pages, " + nvmePages + " nvme pages, " + gpuPages + " GPU driver pages\n" + iommu);
        assertTrue(run("kernel:ps").lines().count() == 1, "no process left: " + run("kernel:ps"));
        assertTrue(run("umemtest:list").contains("no MRs"));
        assertEquals(2, run("rdma:devices").lines().filter(l -> l.contains("mlx4_")).count(), "both devices still there");
    }

    /** A bad value set directly through Configuration Admin (not our command) is rejected by the guard. */
    @Test
    void aBadValueThroughConfigurationAdminIsRejectedAndTheLastGoodKept() throws Exception {
        session.run("cm = (service (servicereference org.osgi.service.cm.ConfigurationAdmin))");
        String view = rejectedThroughCm("cfg", "org.peerdirect.hca.cx3", "devices", "java.lang.Integer", 100);
        assertTrue(view.contains("keeping 2 (the default)"), view);
        // the guard's delivery reaches the component as an unchanged configuration (@Modified: nothing
        // re-created, ConnectX3ModelTest); the bounded wait only covers Configuration Admin's own thread
        long count = 0;
        long deadline = System.nanoTime() + 10_000_000_000L;
        while ((count = run("rdma:devices").lines().filter(l -> l.contains("mlx4_")).count()) != 2 && System.nanoTime() < deadline) {
            Thread.onSpinWait();
        }
        assertEquals(2, count, "the models run with the last good value");
        assertTrue(run("kernel:meminfo").contains("MemTotal"));
        session.run("$cfg delete");

        // the memory manager: a rejected value put back, and a limit changed, reach it in place (@Modified):
        // it is not re-created, so a process lives on (before, each delivery ended every process)
        session.run("survivor = (kernel:spawn survivor)");
        String memTotal = run("kernel:meminfo").lines().filter(l -> l.startsWith("MemTotal")).findFirst().orElseThrow();
        rejectedThroughCm("mmcfg", "org.peerdirect.kernel.mm", "pid.max", "java.lang.Integer", 5);
        assertTrue(run("peerdirect:config org.peerdirect.kernel.mm memlock 16M").contains("(applied: the component runs with it)"));
        assertTrue(run("peerdirect:config org.peerdirect.kernel.mm memory.size 2G").contains("applies at the next start"));
        assertTrue(run("kernel:ps").contains("survivor"), "the process outlived three deliveries: " + run("kernel:ps"));
        assertTrue(run("kernel:meminfo").contains(memTotal), "the memory size is the boot one until the next start");
        // the peer-memory registry: its timings applied in place, a live peer registration stays mapped
        session.run("pbuf = (example_peer:alloc $survivor 65536)");
        session.run("pmr = (umemtest:reg $survivor $pbuf 65536)");
        assertTrue(run("peerdirect:config org.peerdirect.ib.core.peermem close.grace.ms 1000").contains("(applied"));
        assertTrue(run("umemtest:list").contains("MAPPED"), "the peer registration outlived the change: " + run("umemtest:list"));
        // example_peer_mem under that registration: the region size in place, its identity at the
        // next start; a re-creation would wait in the unregistration for the MR this test holds
        String client = serviceId("org.peerdirect.example.peermem.ExamplePeerMemComponent");
        assertTrue(run("peerdirect:config org.peerdirect.example_peer_mem region.size 2097152").contains("(applied"));
        assertTrue(run("peerdirect:config org.peerdirect.example_peer_mem page.size 65536").contains("applies at the next start"));
        assertEquals(client, serviceId("org.peerdirect.example.peermem.ExamplePeerMemComponent"), "the client is not re-created");
        assertTrue(run("umemtest:list").contains("MAPPED"), "the peer registration outlived both: " + run("umemtest:list"));
        // sysfs: every driver holds a reference to it, so a re-created sysfs restarted them all;
        // a rejected value through Configuration Admin (the guard puts the last good back) and a
        // new interval reach it in place, the root at the next start
        String sysfs = serviceId("org.peerdirect.kernel.sysfs.Sysfs");
        rejectedThroughCm("sfcfg", "org.peerdirect.kernel.sysfs", "mirror.interval.ms", "java.lang.Long", 1);
        assertTrue(run("peerdirect:config org.peerdirect.kernel.sysfs mirror.interval.ms 50").contains("(applied"));
        assertTrue(run("peerdirect:config org.peerdirect.kernel.sysfs root " + tmp.resolve("elsewhere")).contains("applies at the next start"));
        assertEquals(sysfs, serviceId("org.peerdirect.kernel.sysfs.Sysfs"), "sysfs is not re-created");
        assertTrue(run("kernel:ps").contains("survivor"));
        // nvidia_peermem's parameters are 0 or 1 now; an unchanged delivery re-registers nothing
        Exception rejected = org.junit.jupiter.api.Assertions.assertThrows(Exception.class, () -> session.run("peerdirect:config org.peerdirect.nvidia_peermem persistent_api_support 7"));
        assertTrue(rejected.getMessage().contains("persistent_api_support = 7 rejected: greater than maximum"), rejected.getMessage());
        String gpuClients = serviceId("org.peerdirect.gpu.impl.NvPeerMemComponent");
        assertTrue(run("peerdirect:config org.peerdirect.nvidia_peermem peerdirect_support 0").contains("(applied"));
        assertEquals(gpuClients, serviceId("org.peerdirect.gpu.impl.NvPeerMemComponent"), "nvidia_peermem is not re-created");
        session.run("umemtest:dereg $pmr");
        session.run("kernel:kill $survivor");
        session.run("$mmcfg delete");
        session.run("(($cm getConfiguration org.peerdirect.ib.core.peermem '?') delete)");
        session.run("(($cm getConfiguration org.peerdirect.example_peer_mem '?') delete)");
        session.run("(($cm getConfiguration org.peerdirect.nvidia_peermem '?') delete)");
        session.run("$sfcfg delete");
    }

    /**
     * Sets {@code property} of {@code pid} to {@code value} through Configuration Admin directly
     * (as a management agent would; the configuration in Gogo variable {@code var}), then waits,
     * bounded, until {@code peerdirect:config} lists the guard's rejection (Configuration Admin
     * delivers asynchronously). Returns that view.
     */
    private static String rejectedThroughCm(String var, String pid, String property, String type, long value) throws Exception {
        session.run(var + " = ($cm getConfiguration " + pid + " '?')");
        session.run(var + "props = (new java.util.Hashtable)");
        session.run("$" + var + "props put " + property + " (new " + type + " " + value + ")");
        session.run("$" + var + " update $" + var + "props");
        String rejection = pid + ": " + property + " = " + value + " rejected";
        String view = "";
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (!view.contains(rejection) && System.nanoTime() < deadline) {
            view = run("peerdirect:config");
        }
        assertTrue(view.contains(rejection), view);
        return view;
    }

    /** The id of the service registered under {@code type} (the highest ranked), as Gogo prints it. */
    private static String serviceId(String type) throws Exception {
        session.run("sref = (servicereference " + type + ")");
        return run("$sref getProperty service.id").trim();
    }

    /** Every project command has @Descriptor help (Gogo printed "parameters: Object[]" and nothing else). */
    @Test
    void everyProjectCommandHasHelp() throws Exception {
        String[] commands = {"kernel:meminfo", "kernel:iommu", "kernel:ps", "kernel:maps", "kernel:spawn", "kernel:mmap",
            "kernel:touch", "kernel:pageout", "kernel:kill", "kernel:lspci", "kernel:sysfs", "example_peer:alloc",
            "example_peer:free", "example_peer:invalidate", "example_peer:list", "umemtest:reg", "umemtest:dereg",
            "umemtest:dma", "umemtest:list", "peermem:clients", "peermem:stats", "rdma:devices", "rdma:devinfo",
            "rdma:pingpong", "rdma:write_bw", "rdma:read_bw", "rdma:send_bw", "rdma:write_lat", "rdma:invalidate_test",
            "peerdirect:config"};
        List<String> bare = new ArrayList<>();
        for (String c : commands) {
            String help = run("help " + c);
            String name = c.substring(c.indexOf(':') + 1);
            // "name - description" on the first line of each form
            if (!help.matches("(?s)\\s*" + java.util.regex.Pattern.quote(name) + " - \\S.*")) {
                bare.add(c + ":\n" + help);
            }
        }
        assertTrue(bare.isEmpty(), "commands without a description:\n" + String.join("\n", bare));
        String usage = run("rdma:write_bw --help");
        assertTrue(usage.contains("-q QPS") && usage.contains("(default=1)"), usage);
    }

    /** The settings table of the peerdirect:config view, without its list of rejections. */
    private static String settings(String view) {
        return view.replaceAll("(?s)\\n(no )?rejected values.*", "");
    }

    private static String run(String statement) throws Exception {
        int before = OUT.size();
        session.run(statement);
        return OUT.toString(StandardCharsets.UTF_8).substring(before);
    }

    @Test
    void theLauncherRefusesBadCommandLinesWithItsExitCodes() throws Exception {
        assertEquals(Main.USAGE, Main.run("--frobnicate"));
        assertEquals(Main.USAGE, Main.run("-c"));
        assertEquals(Main.USAGE, Main.run("-c", ""));
        assertEquals(Main.USAGE, Main.run("-c", "  ;  "));
        assertEquals(Main.USAGE, Main.run("--home"));
        assertEquals(Main.USAGE, Main.run("demo", "-c", "lb"));
        assertEquals(Main.USAGE, Main.run("extra-word"));
        Path home = tmp.resolve("second");
        try (RunLock held = RunLock.acquire(home)) {
            assertEquals(Main.BROKEN, Main.run("--home", home.toString(), "-c", "lb"), "a second container on the same home");
        }
        assertEquals(Main.BROKEN, Main.run("--home", tmp.resolve("empty").toString(), "--bundles",
                tmp.resolve("no-bundles").toString(), "-c", "lb"), "no bundles");
        // a failing background job fails the run (it used to report only "done")
        assertEquals(Main.COMMAND_FAILED, Main.run("--home", tmp.resolve("jobs").toString(), "-c", "kernel:maps 99999 &; echo after"));
        // a failed hot-load fails the run (Felix's install printed the error and exited 0)
        assertEquals(Main.COMMAND_FAILED, Main.run("--home", tmp.resolve("hotload").toString(), "-c", "install file:/nonexistent.jar"));
    }

    /**
     * Ctrl-C in a -c run: the running tool is interrupted, the container stops cleanly and the
     * exit code is 130 (it exited 1 after a racing half-stop, leaving the swap file behind).
     */
    @Test
    void ctrlCStopsTheRunningToolAndExits130() throws Exception {
        String javaBin = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        Path home = tmp.resolve("sigint");
        ProcessBuilder pb = new ProcessBuilder(javaBin, "--enable-native-access=ALL-UNNAMED",
                "-Dpeerdirect.home=" + dist, "-cp", System.getProperty("java.class.path"),
                "org.peerdirect.launcher.Main", "--home", home.toString(), "-c", "echo started; rdma:write_bw -n 100000000");
        pb.redirectErrorStream(true);
        Process p = pb.start();
        var reader = new java.io.BufferedReader(new java.io.InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
        StringBuilder seen = new StringBuilder();
        // read until "started", bounded: a child that hangs before it is killed after 60 s
        var started = java.util.concurrent.CompletableFuture.supplyAsync(() -> {
            try {
                for (String line; (line = reader.readLine()) != null;) {
                    seen.append(line).append('\n');
                    if (line.equals("started")) {
                        return true;
                    }
                }
                return false;
            } catch (java.io.IOException e) {
                return false;
            }
        });
        boolean up;
        try {
            up = started.get(60, java.util.concurrent.TimeUnit.SECONDS);
        } catch (java.util.concurrent.TimeoutException e) {
            p.destroyForcibly();
            up = false;
        }
        assertTrue(up, "the child container came up: " + seen);
        new ProcessBuilder("kill", "-INT", Long.toString(p.pid())).start().waitFor();
        boolean ended = p.waitFor(30, java.util.concurrent.TimeUnit.SECONDS);
        String rest = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(ended, "the container ended after SIGINT: " + seen + rest);
        assertEquals(Main.INTERRUPTED, p.exitValue(), seen + rest);
        try (var left = Files.newDirectoryStream(Path.of(System.getProperty("java.io.tmpdir")), "peerdirect-swap-" + p.pid() + "-*")) {
            assertTrue(!left.iterator().hasNext(), "no swap file left behind");
        }
    }

    /** The sum of the "DMA pages live N" lines a driver's status command prints. */
    private static long driverDmaPages(String command) throws Exception {
        return java.util.regex.Pattern.compile("DMA pages live (\\d+)").matcher(run(command)).results()
                .mapToLong(m -> Long.parseLong(m.group(1))).sum();
    }
}

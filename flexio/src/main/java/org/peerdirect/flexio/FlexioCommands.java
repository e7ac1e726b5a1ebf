package org.peerdirect.flexio;

import org.apache.felix.service.command.Descriptor;
import org.apache.felix.service.command.Parameter;
import org.osgi.service.component.annotations.Component;

/**
 * {@code dpa:msg}: the message streams' lines as the host library received them, beside the
 * silicon's {@code dpa:} commands (hca-sim's {@code DpaCommands}). It lives here because the lines
 * are the host library's: the silicon sees only window DMA, and it imports nothing of FlexIO.
 */
@Component(service = FlexioCommands.class, property = {"osgi.command.scope=dpa", "osgi.command.function=msg"})
public final class FlexioCommands {

    @Descriptor("the lines each FlexIO message stream (flexio_msg_stream_create) received, live streams and the last "
            + FlexioMsgLog.KEEP_DESTROYED + " destroyed ones: the last N per stream (-n, default 20), of one DPA process (its id "
            + "as dpa:ps shows it) or all. Example: dpa:msg -n 5")
    public String msg(@Descriptor("lines per stream") @Parameter(names = "-n", absentValue = "20") int n) {
        return String.join("\n", FlexioMsgLog.describe(n, -1));
    }

    @Descriptor("the lines of the message streams of DPA process ID. Example: dpa:msg -n 5 3")
    public String msg(@Descriptor("lines per stream") @Parameter(names = "-n", absentValue = "20") int n,
            @Descriptor("DPA process id") int process) {
        return String.join("\n", FlexioMsgLog.describe(n, process));
    }
}

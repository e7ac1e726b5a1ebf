package org.peerdirect.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.net.ServerSocket;
import java.util.List;

import org.junit.jupiter.api.Test;

/** {@code --web [[HOST:]PORT]}: its value is optional, bad values and unsafe addresses are refused in words. */
class WebOptionTest {

    @Test
    void thePortIsOptionalAndTheNextArgumentStaysAnArgument() {
        CommandLine cl = CommandLine.parse("--web", "-c", "lb");
        assertEquals(new WebOption("127.0.0.1", WebOption.DEFAULT_PORT), cl.web());
        assertEquals(List.of("lb"), cl.commands());
        cl = CommandLine.parse("--web", "9000", "demo");
        assertEquals(new WebOption("127.0.0.1", 9000), cl.web());
        assertTrue(cl.demo());
        assertEquals(new WebOption("localhost", 9001), CommandLine.parse("--web", "localhost:9001").web());
        assertEquals(null, CommandLine.parse("-c", "lb").web());
    }

    @Test
    void aBadPortIsAUsageErrorNamingIt() {
        var e = assertThrows(CommandLine.UsageException.class, () -> CommandLine.parse("--web", "70000"));
        assertTrue(e.getMessage().contains("'70000'") && e.getMessage().contains("1 to 65535"), e.getMessage());
        assertThrows(CommandLine.UsageException.class, () -> CommandLine.parse("--web", "0"));
    }

    @Test
    void anotherAddressWithoutCredentialsIsRefusedSayingHowToSetThem() {
        assertTrue(System.getProperty(WebOption.PASSWORD) == null, "the test JVM has no Web Console password set");
        var e = assertThrows(CommandLine.UsageException.class, () -> CommandLine.parse("--web", "0.0.0.0:9000"));
        assertTrue(e.getMessage().contains("-Dfelix.webconsole.username=") && e.getMessage().contains("-Dfelix.webconsole.password="), e.getMessage());
        assertTrue(new WebOption("127.0.0.1", 9000).frameworkConfig().containsKey(WebOption.LOOPBACK_PROPERTY), "loopback: no password");
    }

    @Test
    void aPortInUseIsRefusedAtStartNotOnlyLogged() throws Exception {
        try (ServerSocket taken = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            WebOption w = new WebOption("127.0.0.1", taken.getLocalPort());
            var e = assertThrows(IllegalStateException.class, w::checkPortFree);
            assertTrue(e.getMessage().contains("cannot listen on 127.0.0.1:" + taken.getLocalPort()), e.getMessage());
        }
    }
}

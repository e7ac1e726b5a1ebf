package org.peerdirect.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import org.apache.felix.service.command.CommandSession;
import org.apache.felix.service.command.Descriptor;
import org.junit.jupiter.api.Test;

/** The usage line and the wrong-arguments answer, read from a command's methods and their {@code @Descriptor}s. */
class CommandUsageTest {

    /** Shaped as the project's command classes are. */
    public static final class Sample {
        @Descriptor("maps memory")
        public String mmap(@Descriptor("process id (kernel:ps lists them)") String pid, @Descriptor("length in bytes, rounded up") String len) {
            return pid + len;
        }

        @Descriptor("maps memory")
        public String mmap(@Descriptor("process id") String pid, @Descriptor("length in bytes") String len,
                @Descriptor("'huge' for a hugetlb mapping") String kind) {
            return pid + len + kind;
        }

        public String config() {
            return "";
        }

        public String config(@Descriptor("configuration PID") String pid, @Descriptor("property name") String p, @Descriptor("new value") String v) {
            return pid + p + v;
        }

        public String fails(CommandSession s, @Descriptor("text") String text, @Descriptor("the statement") String... statement) {
            return text;
        }

        public String pingpong(@Descriptor("[-d DEV] [-n ITERS]") String... options) {
            return "";
        }

        public String spawn(String name) {
            return name;
        }
    }

    @Test
    void formsFollowTheDescriptors() {
        var mmap = CommandUsage.forms(Sample.class, "mmap");
        assertEquals(List.of("<process id>", "<length in bytes>"), mmap.getFirst().placeholders());
        assertEquals("kernel:mmap <process id> <length in bytes> [huge]", CommandUsage.usage("kernel:mmap", mmap));
        assertEquals("2 or 3 arguments", CommandUsage.arity(mmap));
        var config = CommandUsage.forms(Sample.class, "config");
        assertEquals("peerdirect:config [<configuration PID> <property name> <new value>]", CommandUsage.usage("peerdirect:config", config));
        assertEquals("no arguments or 3 arguments", CommandUsage.arity(config));
        var fails = CommandUsage.forms(Sample.class, "fails");
        assertEquals("peerdirect:fails <text> [<the statement>...]", CommandUsage.usage("peerdirect:fails", fails), "the session is Gogo's");
        assertEquals("at least 1 argument", CommandUsage.arity(fails));
        assertEquals("rdma:pingpong [-d DEV] [-n ITERS]", CommandUsage.usage("rdma:pingpong", CommandUsage.forms(Sample.class, "pingpong")));
        assertEquals("<string>", CommandUsage.forms(Sample.class, "spawn").getFirst().text(), "no descriptor: the type");
    }

    @Test
    void theAnswerNamesWhatWasExpectedAndGot() {
        var mmap = CommandUsage.forms(Sample.class, "mmap");
        assertEquals("kernel:mmap: expected 2 or 3 arguments, got 1 (7); usage: kernel:mmap <process id> <length in bytes> [huge]; "
                + "see help kernel:mmap", CommandUsage.wrongArguments("kernel:mmap", mmap, List.of("7")));
        assertEquals("kernel:mmap: these arguments fit no form of the command (got 2 (a b)); usage: kernel:mmap <process id> "
                + "<length in bytes> [huge]; see help kernel:mmap", CommandUsage.wrongArguments("kernel:mmap", mmap, List.of("a", "b")));
        assertEquals("refresh: expected no arguments, got 1 (x); usage: refresh",
                CommandUsage.wrongArguments("refresh", List.of(new CommandUsage.Form(List.of(), 0, 0)), List.of("x"), false));
        assertEquals("the message", new CommandUsage.WrongArguments("the message", null).toString(), "the prompt prints toString()");
    }

    @Test
    void onlyGogosOwnCoercionFailureIsReworded() {
        IllegalArgumentException gogo = new IllegalArgumentException("Cannot coerce spawn() to any of [(String)]");
        gogo.setStackTrace(new StackTraceElement[] {new StackTraceElement("org.apache.felix.gogo.runtime.Reflective", "invoke", null, 1)});
        assertTrue(CommandUsage.isGogoCoercion(gogo, "spawn"));
        assertFalse(CommandUsage.isGogoCoercion(gogo, "mmap"), "another command's coercion, from inside this one");
        IllegalArgumentException own = new IllegalArgumentException("Cannot coerce spawn() to any of [(String)]");
        assertFalse(CommandUsage.isGogoCoercion(own, "spawn"), "thrown by the command itself, not by Gogo's Reflective");
    }
}

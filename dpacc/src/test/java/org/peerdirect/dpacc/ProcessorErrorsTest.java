package org.peerdirect.dpacc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.stream.Stream;

import javax.tools.Diagnostic;
import javax.tools.JavaFileObject;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Mistakes in annotated code are compile errors on the element at fault (its line), naming it;
 * an app with a mistake gets no stubs. Each case is one class {@code p.App} whose line marked
 * {@code // <-} holds the element the error must be reported on.
 */
class ProcessorErrorsTest {

    @TempDir
    Path dir;

    static Stream<Arguments> mistakes() {
        return Stream.of(
                Arguments.of("@DpaRpc long notStatic(long a) { return a; } // <-", "@DpaRpc notStatic must be static"),
                Arguments.of("@DpaRpc static int wrongReturn(long a) { return 0; } // <-", "@DpaRpc wrongReturn must return long"),
                Arguments.of("@DpaGlobal static long handler(long a) { return a; } // <-", "@DpaGlobal handler handler must return void"),
                Arguments.of("@DpaGlobal static void twoArgs(long a, long b) { } // <-", "@DpaGlobal handler twoArgs must take exactly one long"),
                Arguments.of("@DpaGlobal void instance(long a) { } // <-", "@DpaGlobal handler instance must be static"),
                Arguments.of("@DpaRpc private static long hidden(long a) { return a; } // <-", "@DpaRpc hidden must not be private"),
                Arguments.of("@DpaRpc static long dbl(int k,\n double x) { return k; } // <-", "@DpaRpc dbl parameter x has unsupported type double"),
                Arguments.of("@DpaRpc static long str(String s) { return 0; } // <-", "@DpaRpc str parameter s has unsupported type java.lang.String"),
                Arguments.of("record Plain(int a) { }\n@DpaRpc static long plain(Plain v) { return 0; } // <-",
                        "@DpaRpc plain parameter v: record p.App.Plain is not @DpaGlobal"),
                Arguments.of("@DpaGlobal record F(int a, float f) { }\n@DpaRpc static long fl(F v) { return 0; } // <-",
                        "@DpaRpc fl parameter v (F.f) has unsupported type float"),
                Arguments.of("@DpaRpc static long same(long a) { return a; }\n@DpaRpc(\"same\") static long other(long a) { return a; } // <-",
                        "duplicate symbol same in @DpaApp errs: other and same"),
                Arguments.of("@DpaRpc(\"not-an-id\") static long badSym(long a) { return a; } // <-", "symbol \"not-an-id\" is not an identifier"),
                Arguments.of("@DpaGlobal static class NotRecord { } // <-", "@DpaGlobal on class NotRecord: only a record"),
                Arguments.of("@DpaRpc static long le32(long a) { return a; } // <-",
                        "symbol le32's stub constant LE32 clashes with a name the stub class uses itself"),
                Arguments.of("@DpaRpc @DpaGlobal static long both(long a) { return a; } // <-", "both is both @DpaGlobal and @DpaRpc"));
    }

    @ParameterizedTest
    @MethodSource("mistakes")
    void aMistakeIsACompileErrorNamingTheElement(String members, String expected) throws Exception {
        String src = """
                package p;

                import org.peerdirect.dpacc.*;

                @DpaApp("errs")
                public final class App {
                %s
                }
                """.formatted(members);
        Javac.Result r = Javac.compile(dir, Map.of("p.App", src));
        assertFalse(r.ok(), "compiled: " + r.diagnostics());
        assertEquals(1, r.errors().size(), () -> "one error: " + r.errors());
        Diagnostic<? extends JavaFileObject> d = r.errors().get(0);
        assertTrue(d.getMessage(null).contains(expected), () -> d.getMessage(null) + "\n does not contain: " + expected);
        assertEquals(lineOf(src, "// <-"), d.getLineNumber(), () -> "reported on the element's line: " + d);
        assertFalse(Files.exists(r.generated().resolve("p/AppStubs.java")), "no stubs for an app with a mistake");
    }

    @Test
    void anEntryPointOutsideADpaAppClassIsAnError() throws Exception {
        String src = """
                package p;

                import org.peerdirect.dpacc.DpaRpc;

                public final class Loose {
                    @DpaRpc static long stray(long a) { return a; } // <-
                }
                """;
        Javac.Result r = Javac.compile(dir, Map.of("p.Loose", src));
        assertFalse(r.ok());
        Diagnostic<? extends JavaFileObject> d = r.errors().get(0);
        assertTrue(d.getMessage(null).contains("@DpaRpc stray is in Loose, which is not a @DpaApp class"), d.getMessage(null));
        assertEquals(lineOf(src, "// <-"), d.getLineNumber());
    }

    @Test
    void twoAppsMayNotShareAName() throws Exception {
        String a = "package p;\n@org.peerdirect.dpacc.DpaApp(\"twice\")\npublic final class A { }\n";
        String b = "package p;\n@org.peerdirect.dpacc.DpaApp(\"twice\")\npublic final class B { }\n";
        Javac.Result r = Javac.compile(dir, Map.of("p.A", a, "p.B", b));
        assertFalse(r.ok());
        assertTrue(r.errors().get(0).getMessage(null).contains("@DpaApp name \"twice\""), r.errors().toString());
    }

    @Test
    void aCorrectAppCompilesWithItsStubsTrampolinesAndDescriptor() throws Exception {
        // parameters named like the generated code's own names must not break it
        String src = """
                package p;

                import org.peerdirect.dpacc.*;

                @DpaApp("fine")
                public final class App {
                    @DpaGlobal public record Ctx(int cqn, long ring) { }
                    @DpaRpc static long init(Ctx c, long data, int b, short s, byte LE32) { return c.ring() + data; }
                    @DpaGlobal static void handler(long arg) { }
                }
                """;
        Javac.Result r = Javac.compile(dir, Map.of("p.App", src));
        assertTrue(r.ok(), () -> r.diagnostics().toString());
        assertTrue(Files.exists(r.classes().resolve("p/AppStubs.class")));
        assertTrue(Files.exists(r.classes().resolve("p/AppTrampolines.class")));
        String desc = Files.readString(r.classes().resolve("META-INF/dpa/fine.dpaapp"));
        assertTrue(desc.contains("symbol.0=RPC init 32") && desc.contains("symbol.1=GLOBAL handler 8"), desc);
    }

    static long lineOf(String src, String marker) {
        String[] lines = src.split("\n", -1);
        for (int i = 0; i < lines.length; i++) {
            if (lines[i].contains(marker)) {
                return i + 1;
            }
        }
        throw new IllegalArgumentException(marker);
    }
}

package org.peerdirect.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import org.junit.jupiter.api.Test;

class CommandSplitterTest {

    @Test
    void splitsAtTopLevelSemicolonsAndNewlines() {
        assertEquals(List.of("lb", "scr:list", "kernel:meminfo"), CommandSplitter.split(" lb;scr:list\n kernel:meminfo ;; "));
    }

    @Test
    void keepsSemicolonsInsideQuotesAndBlocks() {
        assertEquals(List.of("echo \"a; b\"", "each [1 2] { echo $it; echo x }", "echo 'c;d'"),
                CommandSplitter.split("echo \"a; b\"; each [1 2] { echo $it; echo x }; echo 'c;d'"));
    }

    @Test
    void commentsRunToTheEndOfTheirLine() {
        assertEquals(List.of("lb", "echo \"# not a comment\""),
                CommandSplitter.split("# heading; with a semicolon\nlb\n  # indented comment\necho \"# not a comment\""));
    }

    @Test
    void anUnterminatedQuoteIsAUsageError() {
        var e = assertThrows(CommandLine.UsageException.class, () -> CommandSplitter.split("echo \"oops"));
        assertTrue(e.getMessage().contains("unterminated"), e.getMessage());
    }

    @Test
    void commandLineCollectsRepeatedCommandsAndRejectsUnknownOptions() {
        CommandLine cl = CommandLine.parse("-c", "lb; scr:list", "--keep-cache", "-c", "kernel:meminfo");
        assertEquals(List.of("lb", "scr:list", "kernel:meminfo"), cl.commands());
        assertTrue(cl.keepCache());
        assertTrue(CommandLine.parse().interactive());
        var e = assertThrows(CommandLine.UsageException.class, () -> CommandLine.parse("--frobnicate"));
        assertTrue(e.getMessage().contains("--frobnicate"), e.getMessage());
        assertThrows(CommandLine.UsageException.class, () -> CommandLine.parse("-c"));
        assertThrows(CommandLine.UsageException.class, () -> CommandLine.parse("demo", "-c", "lb"));
    }

    @Test
    void theBannerNamesTheRuntimeVersionsFromCnf() {
        // target/classes carries the bnd-generated manifest when Maven runs the tests
        String banner = Main.banner();
        assertTrue(banner.matches("peerdirect \\S+ on Felix 7\\..*SCR .*jline .*"), banner);
    }

    @Test
    void theDemoScriptShipsWithTheLauncherAndParses() throws Exception {
        List<String> demo = Main.demoScript();
        assertTrue(demo.contains("lb"), demo::toString);
        assertTrue(demo.stream().noneMatch(s -> s.startsWith("#")), demo::toString);
    }
}

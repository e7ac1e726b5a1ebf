package org.peerdirect.rdma.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import org.junit.jupiter.api.Test;
import org.peerdirect.kernel.shell.UsageException;

/** The tools' shared option parser: defaults, sizes with suffixes, errors naming the option and the value, {@code --help}. */
class OptionsTest {

    private static Options parse(Object... args) {
        return new Options("rdma:t", "a test tool", args, List.of(
                Options.value("-s", "SIZE", "message size", 4096),
                Options.value("-n", "ITERS", "round trips", 1000),
                Options.value("-d", "DEVICE", "client device", null),
                Options.flag("-c", "validate")));
    }

    @Test
    void optionsNotGivenTakeTheirDeclaredDefaults() {
        Options o = parse();
        assertEquals(4096, o.number("-s", 1, 1 << 24));
        assertEquals(1000, o.number("-n", 1, 100_000));
        assertNull(o.string("-d"));
        assertFalse(o.flag("-c"));
        assertFalse(o.help());
        assertEquals("rdma:t", o.tool());
    }

    @Test
    void givenValuesAndFlagsAreRead() {
        Options o = parse("-d", "mlx5_1", "-c", "-n", 7L); // Gogo hands numbers as numbers
        assertEquals("mlx5_1", o.string("-d"));
        assertTrue(o.flag("-c"));
        assertEquals(7, o.number("-n", 1, 100));
        assertEquals(3, parse("-n", "5", "-n", "3").number("-n", 1, 100), "the last of a repeated option counts");
    }

    @Test
    void sizesTakeKMGSuffixesAndHex() {
        assertEquals(64 << 10, parse("-s", "64K").number("-s", 1, Long.MAX_VALUE));
        assertEquals(4 << 10, parse("-s", "4k").number("-s", 1, Long.MAX_VALUE));
        assertEquals(1 << 20, parse("-s", "1M").number("-s", 1, Long.MAX_VALUE));
        assertEquals(2L << 30, parse("-s", "2G").number("-s", 1, Long.MAX_VALUE));
        assertEquals(0x1000, parse("-s", "0x1000").number("-s", 1, Long.MAX_VALUE));
    }

    @Test
    void aValueThatIsNoNumberIsNamedWithItsOption() {
        UsageException e = assertThrows(UsageException.class, () -> parse("-s", "abc").number("-s", 1, 1 << 24));
        assertEquals("rdma:t: expected option -s (message size) (an integer, 0x hex, or with a K/M/G/T suffix), got 'abc'", e.getMessage());
        e = assertThrows(UsageException.class, () -> parse("-s", "4Q").number("-s", 1, 1 << 24));
        assertTrue(e.getMessage().contains("option -s") && e.getMessage().contains("'4Q'"), e.getMessage());
    }

    @Test
    void aValueOutOfRangeIsNamedWithTheRange() {
        UsageException e = assertThrows(UsageException.class, () -> parse("-s", "32M").number("-s", 1, 1 << 24));
        assertEquals("rdma:t: option -s (message size) must be from 1 to 16777216, got 32M", e.getMessage());
        e = assertThrows(UsageException.class, () -> parse("-n", "0").number("-n", 1, Integer.MAX_VALUE));
        assertEquals("rdma:t: option -n (round trips) must be at least 1, got 0", e.getMessage());
        e = assertThrows(UsageException.class, () -> parse("-n", "-5").number("-n", 1, 100));
        assertEquals("rdma:t: option -n (round trips) must be from 1 to 100, got -5", e.getMessage());
    }

    @Test
    void aDefaultOutsideTheRangeAskedIsAnErrorToo() {
        // the declared default of -n (1000) is checked like a given value: a tool's table and its bounds must agree
        UsageException e = assertThrows(UsageException.class, () -> parse().number("-n", 1, 10));
        assertEquals("rdma:t: option -n (round trips) must be from 1 to 10, got 1000", e.getMessage());
    }

    @Test
    void unknownOptionsAndStrayWordsAreNamed() {
        UsageException e = assertThrows(UsageException.class, () -> parse("-x"));
        assertEquals("rdma:t: unknown option '-x' (rdma:t --help lists its options)", e.getMessage());
        e = assertThrows(UsageException.class, () -> parse("-c", "extra"));
        assertEquals("rdma:t: unknown option 'extra' (rdma:t --help lists its options)", e.getMessage());
    }

    @Test
    void anOptionWithoutItsValueSaysWhatItNeeds() {
        UsageException e = assertThrows(UsageException.class, () -> parse("-c", "-s"));
        assertEquals("rdma:t: option -s needs a value (SIZE: message size)", e.getMessage());
    }

    @Test
    void helpListsEveryOptionWithItsDefault() {
        for (String h : List.of("--help", "-h", "-?")) {
            assertTrue(parse(h).help(), h);
        }
        // the first two lines end in \n, the option lines in %n (the layout gogo.jline's completion reads)
        String expected = "usage: rdma:t [OPTIONS]\n  a test tool\n" + String.format(
                "  -s SIZE          message size (default=4096)%n"
                + "  -n ITERS         round trips (default=1000)%n"
                + "  -d DEVICE        client device%n"
                + "  -c               validate%n"
                + "  -? --help        show this help%n");
        assertEquals(expected, parse("--help").usage());
    }
}

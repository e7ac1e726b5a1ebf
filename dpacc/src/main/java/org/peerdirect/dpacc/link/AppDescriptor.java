package org.peerdirect.dpacc.link;

import java.io.IOException;
import java.io.InputStream;
import java.io.Reader;
import java.io.StringReader;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;

/**
 * What the processor tells the packager about one app, in {@code META-INF/dpa/<name>.dpaapp}
 * beside the classes: the app's class (the root the image's classes are reached from), the
 * trampoline class, and the symbol table. The processor knows the annotations; the packager
 * knows only class files and this.
 *
 * @param name        the app's name (the image's file name)
 * @param appClass    binary name of the {@code @DpaApp} class
 * @param trampolines binary name of the generated trampoline class; every symbol names its method of the symbol's name
 * @param symbols     the entry points, in declaration order
 */
public record AppDescriptor(String name, String appClass, String trampolines, List<Symbol> symbols) {

    /** Where descriptors and images live among the classes (the same as {@code FlexioApp.IMAGE_RESOURCE_DIR}). */
    public static final String DIR = "META-INF/dpa/";
    public static final String SUFFIX = ".dpaapp";
    public static final String IMAGE_SUFFIX = ".dpaimg";

    /** One symbol table entry: kind, name (= the trampoline's method), argument buffer size. */
    public record Symbol(String name, boolean rpc, int argbufSize) {
    }

    public AppDescriptor {
        symbols = List.copyOf(symbols);
    }

    public String format() {
        StringBuilder b = new StringBuilder("# dpacc app descriptor v1 (generated; the packager reads it)\n");
        b.append("name=").append(name).append('\n');
        b.append("app=").append(appClass).append('\n');
        b.append("trampolines=").append(trampolines).append('\n');
        b.append("symbols=").append(symbols.size()).append('\n');
        for (int i = 0; i < symbols.size(); i++) {
            Symbol s = symbols.get(i);
            b.append("symbol.").append(i).append('=').append(s.rpc() ? "RPC " : "GLOBAL ").append(s.name()).append(' ')
                    .append(s.argbufSize()).append('\n');
        }
        return b.toString();
    }

    /** @throws IOException naming the key when the descriptor is incomplete or malformed */
    public static AppDescriptor parse(InputStream in, String where) throws IOException {
        Properties p = new Properties();
        p.load(in);
        return of(p, where);
    }

    static AppDescriptor parse(String text, String where) throws IOException {
        Properties p = new Properties();
        try (Reader r = new StringReader(text)) {
            p.load(r);
        }
        return of(p, where);
    }

    private static AppDescriptor of(Properties p, String where) throws IOException {
        List<Symbol> syms = new ArrayList<>();
        try {
            int n = Integer.parseInt(get(p, "symbols", where));
            for (int i = 0; i < n; i++) {
                String[] f = get(p, "symbol." + i, where).trim().split(" ");
                if (f.length != 3 || !(f[0].equals("RPC") || f[0].equals("GLOBAL"))) {
                    throw new IOException(where + ": symbol." + i + " is not 'RPC|GLOBAL name size'");
                }
                syms.add(new Symbol(f[1], f[0].equals("RPC"), Integer.parseInt(f[2])));
            }
        } catch (NumberFormatException e) {
            throw new IOException(where + ": a count or size is not a number: " + e.getMessage(), e);
        }
        return new AppDescriptor(get(p, "name", where), get(p, "app", where), get(p, "trampolines", where), syms);
    }

    private static String get(Properties p, String key, String where) throws IOException {
        String v = p.getProperty(key);
        if (v == null || v.isBlank()) {
            throw new IOException(where + ": no " + key + " (not a dpacc app descriptor v1?)");
        }
        return v.trim();
    }
}

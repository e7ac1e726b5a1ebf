package org.peerdirect.webconsole;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.function.Consumer;
import java.util.function.Supplier;

import org.peerdirect.kernel.sysfs.Sysfs;

/** A sysfs tree in a map (attributes only; a directory is any prefix), enough for ConsoleData. */
final class MapSysfs implements Sysfs {

    final Map<String, Supplier<String>> attrs = new ConcurrentSkipListMap<>();

    @Override
    public Path root() {
        return Path.of("/nonexistent");
    }

    @Override
    public void attribute(String path, Supplier<String> show) {
        attrs.put(path, show);
    }

    @Override
    public void attributeOnDemand(String path, Supplier<String> show) {
        attrs.put(path, show);
    }

    @Override
    public void attribute(String path, Supplier<String> show, Consumer<String> store) {
        attrs.put(path, show);
    }

    @Override
    public void mkdir(String path) {
        // directories exist through their entries
    }

    @Override
    public String read(String path) {
        Supplier<String> s = attrs.get(path);
        if (s == null) {
            throw new IllegalArgumentException("no attribute " + path);
        }
        return s.get() + "\n";
    }

    @Override
    public void write(String path, String value) {
        throw new UnsupportedOperationException();
    }

    @Override
    public List<String> list(String dir) {
        String p = dir.isEmpty() ? "" : dir + "/";
        return attrs.keySet().stream().filter(k -> k.startsWith(p)).map(k -> k.substring(p.length()).split("/")[0]).distinct().sorted().toList();
    }

    @Override
    public boolean exists(String path) {
        return attrs.containsKey(path) || isDirectory(path);
    }

    @Override
    public boolean isDirectory(String path) {
        return attrs.keySet().stream().anyMatch(k -> k.startsWith(path + "/"));
    }

    @Override
    public void remove(String path) {
        attrs.keySet().removeIf(k -> k.equals(path) || k.startsWith(path + "/"));
    }

    @Override
    public void sync() {
    }

    @Override
    public void freezeMirror() {
    }
}

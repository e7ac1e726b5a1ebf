package org.peerdirect.launcher;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.text.ParseException;

import jdk.jfr.Configuration;
import jdk.jfr.Recording;

/**
 * {@code ./peerdirect --jfr FILE}: a flight recording of the whole session, from before the
 * container starts (so the devices' bring-up commands are in it) until after it stopped, written
 * to FILE when the session ends. It uses the JDK's {@code default} settings, in which the
 * project's own {@code org.peerdirect.*} events (each bundle's, enabled by default) are all
 * recorded; {@code jfr print --categories peerdirect FILE} or JDK Mission Control show them.
 */
final class JfrRecording implements AutoCloseable {

    private final Recording recording;
    private final Path file;

    private JfrRecording(Recording recording, Path file) {
        this.recording = recording;
        this.file = file;
    }

    /**
     * Starts the recording to {@code file}; a file whose folder does not exist, or a folder, is a
     * usage error before anything starts.
     */
    static JfrRecording start(String file) {
        Path f = Path.of(file).toAbsolutePath().normalize();
        if (!Files.isDirectory(f.getParent())) {
            throw new CommandLine.UsageException("--jfr " + file + ": the folder " + f.getParent() + " does not exist");
        }
        if (Files.isDirectory(f)) {
            throw new CommandLine.UsageException("--jfr " + file + " is a folder; give a file name, for example session.jfr");
        }
        Recording r;
        try {
            r = new Recording(Configuration.getConfiguration("default"));
        } catch (IOException | ParseException e) {
            throw new IllegalStateException("the JDK's default JFR settings cannot be read: " + e.getMessage(), e);
        }
        r.setName("peerdirect");
        r.setToDisk(true);
        try {
            r.setDestination(f);
        } catch (IOException e) {
            r.close();
            throw new CommandLine.UsageException("--jfr " + file + ": " + e.getMessage());
        }
        r.start();
        return new JfrRecording(r, f);
    }

    Path file() {
        return file;
    }

    /** Stops the recording, which writes it to the file. */
    @Override
    public void close() {
        try {
            recording.stop();
            System.err.println("peerdirect: flight recording written to " + file + " (jfr print --categories peerdirect " + file + ")");
        } catch (IllegalStateException e) {
            System.err.println("peerdirect: the flight recording could not be written to " + file + ": " + e.getMessage());
        } finally {
            recording.close();
        }
    }
}

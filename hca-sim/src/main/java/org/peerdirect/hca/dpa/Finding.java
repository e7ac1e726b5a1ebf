package org.peerdirect.hca.dpa;

/**
 * One memory-model finding (what {@code dpa:mm} lists).
 *
 * @param check the check's name ({@code C1}..{@code C8})
 * @param process the DPA process id
 * @param thread the DPA thread id (0 when the NIC found it outside any thread)
 * @param site the handler's source line ({@code Class.method:line}), or "?" when unknown
 * @param message what happened, with the other sites involved
 */
public record Finding(String check, int process, int thread, String site, String message) {

    @Override
    public String toString() {
        return check + " process " + process + " thread " + thread + " at " + site + ": " + message;
    }
}

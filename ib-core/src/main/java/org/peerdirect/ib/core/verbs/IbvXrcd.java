package org.peerdirect.ib.core.verbs;

import org.osgi.annotation.versioning.ProviderType;

/**
 * {@code struct ibv_xrcd}: an XRC domain ({@link IbvContext#openXrcd}). XRC SRQs and XRC receive
 * QPs belong to one; a message an XRC send QP sends reaches a receive QP of some domain and is
 * received by the XRC SRQ of that domain it names. Opened through a file descriptor, the domain
 * is the one every process opening the same file on the same device shares (the kernel's
 * inode-keyed {@code xrcd_table}).
 *
 * @since 0.10
 */
@ProviderType
public interface IbvXrcd {
    /** {@code O_CREAT} (Linux, octal 0100): create the domain of the file if it has none. */
    int O_CREAT = 0100;
    /** {@code O_EXCL} (octal 0200): with {@link #O_CREAT}, fail (EINVAL) when the file already has a domain. */
    int O_EXCL = 0200;

    IbvContext context();

    /**
     * {@code ibv_close_xrcd}. A domain opened without a file: EBUSY while an XRC SRQ or receive QP
     * uses it. One opened through a file: this opening goes; the domain itself goes with the last
     * opening once nothing uses it. Idempotent.
     */
    void close();
}

package org.peerdirect.doca.verbs;

import org.peerdirect.doca.DocaError;
import org.peerdirect.doca.DocaException;
import org.peerdirect.doca.dev.DocaDev;

/**
 * {@code struct doca_verbs_ah_attr}: the address a connected QP's primary path goes to
 * ({@code doca_verbs_qp_attr_set_ah_attr} at INIT→RTR): the remote GID, the address type, the
 * source GID index, hop limit and traffic class.
 *
 * <p>The ports are RoCE v2: the GID is required (an {@link #ADDR_TYPE_IB_NO_GRH} path is refused by
 * the device at RTR) and the source GID index is 0 (the only one the model's ports send from).
 */
public final class DocaVerbsAhAttr {

    /** {@code enum doca_verbs_addr_type} [model values]. */
    public static final int ADDR_TYPE_IPV4 = 0, ADDR_TYPE_IPV6 = 1, ADDR_TYPE_IB_GRH = 2, ADDR_TYPE_IB_NO_GRH = 3;
    /** {@code DOCA_GID_BYTE_LENGTH}. */
    public static final int GID_BYTE_LENGTH = 16;

    final DocaDev dev;
    byte[] gid;
    int addrType = ADDR_TYPE_IPV4;
    int sgidIndex;
    int hopLimit = 64;
    int trafficClass;
    private boolean destroyed;

    private DocaVerbsAhAttr(DocaDev dev) {
        this.dev = dev;
    }

    /** {@code doca_verbs_ah_attr_create} on a device (DOCA: a verbs context; [model] the DOCA device stands for it). */
    public static DocaVerbsAhAttr create(DocaDev dev) {
        DocaException.check(dev != null, DocaError.DOCA_ERROR_INVALID_VALUE, "doca_verbs_ah_attr_create: null device");
        dev.checkOpen("doca_verbs_ah_attr_create");
        return new DocaVerbsAhAttr(dev);
    }

    /** {@code doca_verbs_ah_attr_set_gid}: the remote port's 16-byte GID. */
    public void setGid(byte[] gid) {
        live("doca_verbs_ah_attr_set_gid");
        DocaException.check(gid != null && gid.length == GID_BYTE_LENGTH, DocaError.DOCA_ERROR_INVALID_VALUE,
                "doca_verbs_ah_attr_set_gid: a GID is " + GID_BYTE_LENGTH + " bytes, not " + (gid == null ? "null" : gid.length));
        this.gid = gid.clone();
    }

    /** {@code doca_verbs_ah_attr_set_addr_type}. */
    public void setAddrType(int type) {
        live("doca_verbs_ah_attr_set_addr_type");
        DocaException.check(type >= ADDR_TYPE_IPV4 && type <= ADDR_TYPE_IB_NO_GRH, DocaError.DOCA_ERROR_INVALID_VALUE,
                "doca_verbs_ah_attr_set_addr_type: " + type + " is no doca_verbs_addr_type");
        addrType = type;
    }

    /** {@code doca_verbs_ah_attr_set_sgid_index}. */
    public void setSgidIndex(int index) {
        live("doca_verbs_ah_attr_set_sgid_index");
        DocaException.check(index >= 0 && index < 256, DocaError.DOCA_ERROR_INVALID_VALUE, "doca_verbs_ah_attr_set_sgid_index: " + index + " (0..255)");
        sgidIndex = index;
    }

    /** {@code doca_verbs_ah_attr_set_hop_limit}. */
    public void setHopLimit(int hops) {
        live("doca_verbs_ah_attr_set_hop_limit");
        DocaException.check(hops >= 0 && hops < 256, DocaError.DOCA_ERROR_INVALID_VALUE, "doca_verbs_ah_attr_set_hop_limit: " + hops + " (0..255)");
        hopLimit = hops;
    }

    /** {@code doca_verbs_ah_attr_set_traffic_class}. */
    public void setTrafficClass(int tc) {
        live("doca_verbs_ah_attr_set_traffic_class");
        DocaException.check(tc >= 0 && tc < 256, DocaError.DOCA_ERROR_INVALID_VALUE, "doca_verbs_ah_attr_set_traffic_class: " + tc + " (0..255)");
        trafficClass = tc;
    }

    /** {@code doca_verbs_ah_attr_destroy}: INVALID_VALUE the second time. */
    public void destroy() {
        live("doca_verbs_ah_attr_destroy");
        destroyed = true;
    }

    private void live(String w) {
        DocaException.check(!destroyed, DocaError.DOCA_ERROR_INVALID_VALUE, w + ": the AH attributes were destroyed");
    }
}

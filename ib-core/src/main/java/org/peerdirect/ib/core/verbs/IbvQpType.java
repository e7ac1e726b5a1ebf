package org.peerdirect.ib.core.verbs;

/** {@code enum ibv_qp_type} (the types this stack implements). */
public enum IbvQpType {
    RC, UD
}

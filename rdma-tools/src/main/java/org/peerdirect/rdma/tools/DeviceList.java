package org.peerdirect.rdma.tools;

import org.peerdirect.ib.core.verbs.IbvDevice;

/**
 * {@code rdma:devices}: the RDMA devices with their node GUIDs, as {@code ibv_devices}
 * (rdma-core {@code libibverbs/examples/device_list.c}).
 */
final class DeviceList {

    static final String DESCRIPTION = "the RDMA devices with their node GUIDs, as ibv_devices";

    private final ToolEnv env;

    DeviceList(ToolEnv env) {
        this.env = env;
    }

    String run() {
        StringBuilder sb = new StringBuilder("    device          \t   node GUID\n    ------          \t----------------\n");
        for (IbvDevice d : env.devices().devices()) {
            sb.append(String.format("    %-16s\t%016x%n", d.name(), d.nodeGuid()));
        }
        return sb.toString().stripTrailing();
    }
}

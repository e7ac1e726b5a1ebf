package org.peerdirect.hca.cx4;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.peerdirect.hca.dpa.DpaUnitView;
import org.peerdirect.hca.dpaview.DpaView;

/**
 * The BlueField-3 DPAs as {@link DpaView} publishes them to a console: the same state
 * {@code dpa:caps} and {@code dpa:ps} print (see {@link DpaCommands}), as values. Read-only; it
 * holds no state of its own, every call looks at the models plugged in now.
 */
@Component(service = DpaView.class)
public final class DpaViewService implements DpaView {

    private final ConnectX4Model model;

    @Activate
    public DpaViewService(@Reference ConnectX4Model model) {
        this.model = model;
    }

    @Override
    public List<String> functions() {
        List<String> out = new ArrayList<>();
        model.devices().forEach((bdf, dev) -> {
            if (dev.hasDpa()) {
                out.add(bdf);
            }
        });
        return out;
    }

    @Override
    public Map<String, Long> caps(String bdf) {
        return new LinkedHashMap<>(device(bdf).dpaCapValues());
    }

    @Override
    public Dpa dpa(String bdf) {
        ConnectX4Device dev = device(bdf);
        FirmwareDpa fw;
        try {
            fw = dev.dpa();
        } catch (IllegalStateException notPowered) {
            return DpaUnitView.read(bdf, null);
        }
        return DpaUnitView.read(bdf, fw.unitIfAny());
    }

    private ConnectX4Device device(String bdf) {
        ConnectX4Device dev = model.devices().get(bdf);
        if (dev == null || !dev.hasDpa()) {
            throw new IllegalArgumentException("no BlueField-3 at " + bdf + " (BlueField-3s plugged in: " + functions() + ")");
        }
        return dev;
    }
}

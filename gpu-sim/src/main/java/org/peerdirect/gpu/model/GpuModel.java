package org.peerdirect.gpu.model;

import java.util.ArrayList;
import java.util.List;

import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Deactivate;
import org.osgi.service.component.annotations.Modified;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.metatype.annotations.AttributeDefinition;
import org.osgi.service.metatype.annotations.Designate;
import org.osgi.service.metatype.annotations.ObjectClassDefinition;
import org.peerdirect.kernel.pci.PciBus;
import org.peerdirect.kernel.pci.PciFunction;

/**
 * Plugs GPU models into the PCI bus (Configuration Admin PID {@code org.peerdirect.gpu}:
 * {@code gpus}, {@code vram.size}, {@code bar1.size}). Stopping the bundle pulls the cards: the
 * functions leave the bus (the driver unbinds on this thread), then the video memory is freed.
 */
@Component(immediate = true, configurationPid = GpuModel.PID)
@Designate(ocd = GpuModel.Config.class)
public final class GpuModel {

    public static final String PID = "org.peerdirect.gpu";

    @ObjectClassDefinition(name = "GPU models", description = "How many GPUs sit on the PCI bus, their video memory and BAR1 aperture")
    @interface Config {
        @AttributeDefinition(min = "0", max = "8", description = "number of GPUs (0 to 8)")
        int gpus() default 1;

        @AttributeDefinition(description = "video memory per GPU in bytes: a multiple of 2 MiB up to 64 GiB (committed on first use)")
        long vram_size() default 1L << 30;

        @AttributeDefinition(description = "BAR1 aperture per GPU in bytes: a power of two from 64 KiB to 64 GiB")
        long bar1_size() default 256L << 20;
    }

    private record Card(GpuBoard board, PciFunction fn) {
    }

    /** Guarded by this. */
    private final List<Card> cards = new ArrayList<>();
    private final PciBus bus;
    /** Guarded by this: the video memory and aperture of every card plugged in. */
    private long vram;
    private long bar1;

    @Activate
    public GpuModel(@Reference PciBus bus, Config c) {
        this.bus = bus;
        modified(c);
    }

    /**
     * A configuration change plugs in or removes only the difference in {@code gpus} (the newest
     * first), the other cards and what processes hold on them stay; a change of the memory sizes
     * re-creates every card (they are the board's); a delivery that changes nothing (the guard
     * putting back a rejected value) touches nothing.
     */
    @Modified
    synchronized void modified(Config c) {
        if (c.gpus() < 0 || c.gpus() > 8) {
            throw new IllegalArgumentException(PID + ": gpus must be 0..8, not " + c.gpus());
        }
        if (c.vram_size() != vram || c.bar1_size() != bar1) {
            GpuBoard.checkSizes(c.vram_size(), c.bar1_size()); // a size no board can have leaves the cards as they are
            deactivate();
            vram = c.vram_size();
            bar1 = c.bar1_size();
        }
        while (cards.size() > c.gpus()) {
            unplug(cards.get(cards.size() - 1));
        }
        while (cards.size() < c.gpus()) {
            GpuBoard b = new GpuBoard("NVIDIA A100-PCIE-40GB", vram, bar1);
            try {
                cards.add(new Card(b, bus.register(b.spec())));
            } catch (RuntimeException e) {
                b.close();
                throw e;
            }
        }
    }

    private void unplug(Card c) {
        assert Thread.holdsLock(this);
        cards.remove(c);
        c.fn.remove(); // the driver unbinds here, freeing what processes had
        c.board.close();
    }

    @Deactivate
    synchronized void deactivate() {
        while (!cards.isEmpty()) {
            unplug(cards.get(cards.size() - 1));
        }
    }
}

package org.sparkccl.core.memory;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.ServiceConfigurationError;
import java.util.ServiceLoader;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Chooses the host memory for gradient buffers: the available {@link HostMemorySource} with the
 * highest priority among those registered with {@link ServiceLoader} (pinned CUDA memory, where
 * the GPU backend registers one and a GPU is present), else plain off-heap memory.
 */
public final class HostMemorySources {
    private static final Logger LOG = LoggerFactory.getLogger(HostMemorySources.class);
    private static final OffHeapMemorySource OFF_HEAP = new OffHeapMemorySource();
    private static volatile HostMemorySource preferred;

    private HostMemorySources() {
    }

    /** Plain off-heap memory, one shared instance. */
    public static HostMemorySource offHeap() {
        return OFF_HEAP;
    }

    /** The best source available in this process, chosen once and then kept. */
    public static HostMemorySource preferred() {
        HostMemorySource p = preferred;
        if (p == null) {
            synchronized (HostMemorySources.class) {
                p = preferred;
                if (p == null) {
                    p = choose(registered());
                    preferred = p;
                }
            }
        }
        return p;
    }

    /** The available source of highest priority among {@code candidates}, else {@link #offHeap()}. */
    public static HostMemorySource choose(List<HostMemorySource> candidates) {
        HostMemorySource best = OFF_HEAP;
        for (HostMemorySource s : candidates) {
            String why = s.unavailableReason();
            if (why != null) {
                LOG.info("sparkccl: host memory source {} not used: {}", s.name(), why);
            } else if (s.priority() > best.priority()) {
                best = s;
            }
        }
        LOG.info("sparkccl: gradient buffers use {} host memory", best.name());
        return best;
    }

    private static List<HostMemorySource> registered() {
        List<HostMemorySource> list = new ArrayList<>();
        Iterator<HostMemorySource> it =
                ServiceLoader.load(HostMemorySource.class, HostMemorySources.class.getClassLoader()).iterator();
        while (true) {
            try {
                if (!it.hasNext()) {
                    return list;
                }
                list.add(it.next());
            } catch (ServiceConfigurationError e) {
                // A broken registration must not stop training: plain off-heap memory always works.
                LOG.warn("sparkccl: a registered host memory source could not be loaded, skipped: {}", e.toString());
            }
        }
    }
}

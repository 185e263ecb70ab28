package org.sparkccl.core.topo;

import java.nio.file.Path;
import org.sparkccl.core.param.Params;

/** Where a rank gets its topology: sysfs, a topology file laid over it, or a whole saved topology. */
public final class TopologySource {
    public static final Path DEFAULT_SYSFS = Path.of("/sys");

    private TopologySource() {
    }

    /** {@code SPARKCCL_TOPO_FILE} when set (whole, or NVLink laid over /sys), else /sys. */
    public static Topology load(Params params) {
        String file = params.get(Params.TOPO_FILE);
        return load(DEFAULT_SYSFS, file.isBlank() ? null : Path.of(file));
    }

    /** sysfs under {@code sysfsRoot}, with {@code topoFile} (may be null) laid over it or replacing it. */
    public static Topology load(Path sysfsRoot, Path topoFile) {
        if (topoFile == null) {
            return SysfsReader.read(sysfsRoot);
        }
        return TopologyFile.overlay(topoFile, () -> SysfsReader.read(sysfsRoot));
    }
}

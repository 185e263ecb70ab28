package org.sparkccl.core.log;

/** Log subsystems, as NCCL_DEBUG_SUBSYS names them. */
public enum Subsys {
    INIT, GRAPH, TUNING, P2P, SHM, NET, COLL
}

package org.sparkccl.tools.reliability;

/**
 * Where {@link KillRank}'s victim dies, and the parameters (algorithm, protocol, count) that put the
 * survivors in that part of the code when it does.
 */
enum KillPoint {
    /** After the group formed, while the others exchange rank descriptions through the bootstrap. */
    BOOTSTRAP("auto", "auto", 1000, false),
    /** At a random moment while the communicator is being built (segments created, mapped, connected). */
    CONNECT("auto", "auto", 1000, false),
    /** Inside small one-shot all-reduces. */
    ONE_SHOT("OneShot", "LL", 1000, false),
    /** Inside ring all-reduces with the LL protocol. */
    MID_LL("Ring", "LL", 100_003, false),
    /** Inside ring all-reduces with the Simple protocol. */
    MID_SIMPLE("Ring", "Simple", 1_000_003, false),
    /** Inside direct all-reduces of buffers from allocateShared. */
    DIRECT("Direct", "auto", 1_000_003, true);

    final String algo;
    final String proto;
    final int count;
    final boolean shared;

    KillPoint(String algo, String proto, int count, boolean shared) {
        this.algo = algo;
        this.proto = proto;
        this.count = count;
        this.shared = shared;
    }
}

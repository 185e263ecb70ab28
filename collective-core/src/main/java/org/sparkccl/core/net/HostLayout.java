package org.sparkccl.core.net;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.sparkccl.core.transport.RankInfo;

/**
 * Which ranks run on which host, from the bootstrap round's descriptions alone (so every rank computes
 * the same): hosts in the order of their lowest rank, each host's ranks in rank order. The two-level
 * engines run over it when every host has the same number of ranks.
 */
public final class HostLayout {
    /** byHost[h][l]: the global rank of host h's l-th rank. */
    private final int[][] byHost;

    private HostLayout(int[][] byHost) {
        this.byHost = byHost;
    }

    public static HostLayout of(RankInfo[] all) {
        Map<String, List<Integer>> hosts = new LinkedHashMap<>();
        for (RankInfo info : all) {
            hosts.computeIfAbsent(info.hostId(), h -> new ArrayList<>()).add(info.rank());
        }
        int[][] byHost = new int[hosts.size()][];
        int h = 0;
        for (List<Integer> ranks : hosts.values()) {
            byHost[h++] = ranks.stream().mapToInt(Integer::intValue).toArray();
        }
        return new HostLayout(byHost);
    }

    /** Every rank a group of its own: the layout of one ring over every rank. */
    public static HostLayout eachRankAlone(int size) {
        int[][] alone = new int[size][];
        for (int r = 0; r < size; r++) {
            alone[r] = new int[] {r};
        }
        return new HostLayout(alone);
    }

    public int hosts() {
        return byHost.length;
    }

    /** Every host runs the same number of ranks. */
    public boolean even() {
        return Arrays.stream(byHost).allMatch(ranks -> ranks.length == byHost[0].length);
    }

    /** Ranks per host; that of the first host where {@link #even()} is false. */
    public int perHost() {
        return byHost[0].length;
    }

    /** A copy of byHost[h][l], the global rank of host h's l-th rank. */
    public int[][] byHost() {
        int[][] copy = new int[byHost.length][];
        for (int h = 0; h < byHost.length; h++) {
            copy[h] = byHost[h].clone();
        }
        return copy;
    }

    /** The global ranks of host h, in rank order. */
    public int[] ranksOf(int host) {
        return byHost[host].clone();
    }

    /** Host and local index of a global rank: {host, local}. */
    public int[] place(int rank) {
        for (int h = 0; h < byHost.length; h++) {
            for (int l = 0; l < byHost[h].length; l++) {
                if (byHost[h][l] == rank) {
                    return new int[] {h, l};
                }
            }
        }
        throw new IllegalArgumentException("rank " + rank + " is on no host of " + this);
    }

    /** The l-th rank of every host, in host order: the cross-host ring of local index l. */
    public int[] crossGroup(int local) {
        int[] group = new int[byHost.length];
        for (int h = 0; h < byHost.length; h++) {
            group[h] = byHost[h][local];
        }
        return group;
    }

    /** For logs and errors: {@code host 0: [0, 1], host 1: [2, 3]}. */
    @Override
    public String toString() {
        StringBuilder s = new StringBuilder();
        for (int h = 0; h < byHost.length; h++) {
            s.append(h == 0 ? "" : ", ").append("host ").append(h).append(": ").append(Arrays.toString(byHost[h]));
        }
        return s.toString();
    }
}

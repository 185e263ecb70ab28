#!/usr/bin/env bash
# socket-bench-device.sh - socket-bench.sh's comparison on a machine with cores to spare (the GPU
# machine's 16: no rank or I/O thread shares a core, unlike the project's 2-core VM), CPU only, from
# packaged jars, over loopback, float32 sum, out-of-place busbw:
#   OpenMPI's TCP path (mpirun --mca btl tcp,self; scripts/openmpi-bundle.sh) at 2 and 4 ranks;
#   sparkccl's allreduce-perf with --transport socket at 2 and 4 ranks (one TCP ring) and at 4 ranks
#   two-level (--pretend-hosts 2: shared memory inside each pretend host, TCP across);
# interleaved per round, every sparkccl layout once per VARIANT (env settings joined by commas, or
# "default"; by default the small all-reduce by recursive doubling against the ring alone). Every run
# checks its results (#wrong must be 0, else the script fails). Prints per layout and size the rounds'
# busbw, their median and the ratio of medians to OpenMPI's, then the same for the time of a call (us).
# Usage (on the device, from the repository root; carry the folders):
#   scripts/gpu-package.sh .device && scripts/openmpi-bundle.sh .device     (here, once)
#   ROUNDS=3 VARIANTS="default SPARKCCL_SOCKET_SMALL_BYTES=0" bash scripts/socket-bench-device.sh .device .device
#   Small calls (issue 25): per round also OpenMPI TCP (-S 1) and sparkccl's socket ring (--call-stats) at
#   1-64 KB with SMALL_ITERS (default -w 50 -n 1000), and a table of the slower rank's median call beside
#   the mean (SMALL=0 skips it).
#   FIRST_CALLS=1 (default) adds a fresh JVM's first 100 calls of 1 KB (allreduce-perf --first-calls 100,
#   tiered JIT as a Spark executor) over shared memory and over TCP, 2 ranks, without and with the
#   communicator's warm-up (SPARKCCL_WARMUP_CALLS), and OpenMPI's shared-memory 1 KB beside them.
#   PKG: scripts/gpu-package.sh's folder (lib/*.jar, jre.tgz); OMPI_DIR: holds openmpi.tgz. A PKG without
#   jre.tgz runs the java on PATH (JAVA=... picks another).
set -uo pipefail
pkg=${1:?PKG}; ompi=${2:?OMPI_DIR}
rounds=${ROUNDS:-3}; variants=${VARIANTS:-default SPARKCCL_SOCKET_SMALL_BYTES=0}; sizes=${SIZES:--b 1K -e 64M -f 4}
iters=${ITERS:--w 10 -n 30}
small_iters=${SMALL_ITERS:--w 50 -n 1000}
work=${WORK:-/tmp/socket-bench}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"
java=${JAVA:-}
if [ -z "$java" ] && [ -f "$pkg/jre.tgz" ]; then
    [ -x "$work/jre/bin/java" ] || { mkdir -p "$work/jre-x" && tar xzf "$pkg/jre.tgz" -C "$work/jre-x" && mv "$work/jre-x"/* "$work/jre"; }
    java=$work/jre/bin/java
fi
java=${java:-java}
[ -d "$work/openmpi" ] || tar xzf "$ompi/openmpi.tgz" -C "$work"
# shellcheck disable=SC1091
source "$work/openmpi/env.sh"
mapfile -t jvm < "$here/spark-jvm-options"
cp=$(ls "$pkg"/lib/*.jar | tr '\n' ':')
export SPARKCCL_SOCKET_ADDRESS=127.0.0.1
log=$work/runs.txt
: > "$log"
: > "$work/small.txt"
status=0
medians() { # name file: one line per size: name size slower rank's median call (us) and the mean
    sed 's/^\[rank [0-9]*\] //' "$2" | awk -v name="$1" '
        /# calls rank [0-9]+ [0-9]+ B out-of-place/ { for (i = 1; i <= NF; i++) if ($i == "median") m = $(i + 1); if (m + 0 > med[$5]) med[$5] = m + 0 }
        /^ +[0-9]+ +[0-9]+ +float/ { mean[$1] = $6; if ($9 != 0) bad = 1 }
        END { for (s in mean) printf "%s|%s|%.1f|%s\n", name, s, med[s], mean[s]; exit bad }' >> "$work/small.txt" \
        || { echo "socket-bench-device: WRONG ELEMENTS in $1 (small calls)" >&2; status=1; }
}
report() { # name file: one line per size: name size busbw time
    awk -v name="$1" '/^ +[0-9]+ / {printf "%s|%s|%s|%s\n", name, $1, $8, $6; if ($9 != 0) bad = 1} END {exit bad}' "$2" >> "$log" \
        || { echo "socket-bench-device: WRONG ELEMENTS in $1" >&2; status=1; }
}
echo "machine: $(nproc) cores,$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2); load at start $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq 1 "$rounds"); do
    for np in 2 4; do
        # shellcheck disable=SC2086
        timeout 300 orterun --oversubscribe --mca btl tcp,self --mca btl_tcp_if_include lo -np $np \
            mpi_allreduce $sizes $iters -c 1 > "$work/out.txt" 2> "$work/err.txt" \
            || { echo "openmpi np$np failed" >&2; tail -5 "$work/err.txt" >&2; status=1; }
        report "$round|np$np|OpenMPI TCP" "$work/out.txt"
        layouts=("socket")
        [ "$np" = 4 ] && layouts+=("two-level")
        for layout in "${layouts[@]}"; do
            args=(--transport socket); [ "$layout" = two-level ] && args=(--pretend-hosts 2)
            for v in $variants; do
                envs=(SPARKCCL_BENCH_VARIANT="$v"); [ "$v" = default ] || envs+=(${v//,/ })
                # shellcheck disable=SC2086
                env "${envs[@]}" timeout 300 "$java" "${jvm[@]}" -cp "$cp" org.sparkccl.tools.perf.AllReducePerf \
                    -g $np "${args[@]}" --device cpu $sizes $iters -c 1 -d float -o sum > "$work/out.txt" 2>&1 \
                    || { echo "sparkccl $layout np$np $v failed" >&2; tail -5 "$work/out.txt" >&2; status=1; }
                report "$round|np$np|sparkccl $layout $v" "$work/out.txt"
            done
        done
    done
done
if [ "${SMALL:-1}" = 1 ]; then
    # Small calls by the median as well as the mean: one stall of milliseconds moves a mean of 1000 calls.
    for round in $(seq 1 "$rounds"); do
        for np in 2 4; do
            # shellcheck disable=SC2086
            timeout 300 orterun --oversubscribe --mca btl tcp,self --mca btl_tcp_if_include lo -np $np \
                mpi_allreduce -b 1K -e 64K -f 4 $small_iters -c 1 -S 1 > "$work/out.txt" 2>&1 \
                || { echo "openmpi np$np small failed" >&2; status=1; }
            medians "np$np|OpenMPI TCP" "$work/out.txt"
            # shellcheck disable=SC2086
            timeout 300 "$java" "${jvm[@]}" -cp "$cp" org.sparkccl.tools.perf.AllReducePerf -g $np --transport socket \
                --device cpu -b 1K -e 64K -f 4 $small_iters -c 1 -d float -o sum --call-stats > "$work/out.txt" 2>&1 \
                || { echo "sparkccl np$np small failed" >&2; status=1; }
            medians "np$np|sparkccl socket" "$work/out.txt"
        done
    done
    python3 - "$work/small.txt" <<'PY'
import collections, statistics, sys
med, mean = collections.defaultdict(list), collections.defaultdict(list)
for line in open(sys.argv[1]):
    np, name, size, m, a = line.strip().split("|")
    med[(np, name, int(size))].append(float(m))
    mean[(np, name, int(size))].append(float(a))
for np in sorted({k[0] for k in med}):
    print(f"\n{np}: small calls, slower rank's median call / mean call (us) per round; medians of the rounds, ratio to OpenMPI's\n")
    print("| size | OpenMPI TCP median | sparkccl median | OpenMPI TCP mean | sparkccl mean |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for size in sorted({k[2] for k in med if k[0] == np}):
        cells = []
        for d in (med, mean):
            ref = statistics.median(d[(np, "OpenMPI TCP", size)])
            ours = statistics.median(d[(np, "sparkccl socket", size)])
            cells += [" / ".join(f"{x:.0f}" for x in d[(np, "OpenMPI TCP", size)]) + f" ({ref:.0f})",
                      " / ".join(f"{x:.0f}" for x in d[(np, "sparkccl socket", size)]) + f" ({ours:.0f}; {ours / ref:.2f}x)"]
        print(f"| {size >> 10} KB | {cells[0]} | {cells[1]} | {cells[2]} | {cells[3]} |")
PY
fi
if [ "${FIRST_CALLS:-1}" = 1 ]; then
    # 2 ranks, 1 KB: a fresh JVM's first 100 calls (tiered JIT, as a Spark executor) over shared memory
    # and over TCP, without and with the communicator's warm-up, against the steady state of the same run.
    for round in $(seq 1 "$rounds"); do
        for t in shm socket; do
            for w in 0 default; do
                envs=(SPARKCCL_BENCH_VARIANT=warmup-$w); [ "$w" = 0 ] && envs+=(SPARKCCL_WARMUP_CALLS=0)
                env "${envs[@]}" timeout 300 "$java" "${jvm[@]}" -cp "$cp" org.sparkccl.tools.perf.AllReducePerf -g 2 \
                    --device cpu --transport $t -b 1K -e 1K -w 1000 -n 20000 -c 1 -d float -o sum --first-calls 100 \
                    --tiered-jit > "$work/out.txt" 2>&1 || { echo "first calls ($t, warm-up $w) failed" >&2; status=1; }
                echo "first calls, round $round, $t, warm-up $w: $(grep -E '^# first' "$work/out.txt" | sed 's/^# //')"
                echo "  steady state: $(awk '/^ +1024 /{print "out of place", $6, "us, in place", $10, "us"}' "$work/out.txt")"
            done
        done
        orterun --oversubscribe -np 2 mpi_allreduce -b 1K -e 1K -w 1000 -n 20000 -c 1 2>/dev/null \
            | awk '/^ +1024 /{print "  OpenMPI shared memory 1 KB: out of place", $6, "us, in place", $10, "us"}'
    done
fi
echo "load at end $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$log" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)
times = collections.defaultdict(list)
for line in open(sys.argv[1]):
    _, np, name, size, busbw, us = line.strip().split("|")
    runs[(np, name, int(size))].append(float(busbw))
    times[(np, name, int(size))].append(float(us))
def human(n):
    return f"{n >> 20} MB" if n >= 1 << 20 else f"{n >> 10} KB"
def table(np, title, data, fmt):
    names = [n for n in dict.fromkeys(k[1] for k in data if k[0] == np) if n != "OpenMPI TCP"]
    print(f"\n{np}: {title} per round (median; ratio of medians to OpenMPI's)\n")
    print("| size | OpenMPI TCP | " + " | ".join(names) + " |")
    print("| ---: | ---: |" + " ---: |" * len(names))
    for size in sorted({k[2] for k in data if k[0] == np}):
        ref = statistics.median(data[(np, "OpenMPI TCP", size)])
        cells = [" / ".join(fmt.format(x) for x in data[(np, "OpenMPI TCP", size)]) + " (" + fmt.format(ref) + ")"]
        for n in names:
            xs = data[(np, n, size)]
            m = statistics.median(xs)
            cells.append(" / ".join(fmt.format(x) for x in xs) + " (" + fmt.format(m) + f"; {m / ref:.2f}x)")
        print(f"| {human(size)} | " + " | ".join(cells) + " |")
for np in sorted({k[0] for k in runs}):
    table(np, "busbw GB/s", runs, "{:.2f}")
    table(np, "time of a call, us,", times, "{:.0f}")
PY
exit $status

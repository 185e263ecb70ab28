#!/usr/bin/env bash
# socket-bench.sh - sparkccl's socket transport against OpenMPI's TCP path (issue 16).
#
# Runs in one go on this machine, over loopback, float32 sum, 1K..64M x4:
#   - OpenMPI's MPI_Allreduce (bench/mpi_allreduce.c) with TCP only: mpirun --mca btl tcp,self,
#   - bin/allreduce-perf --transport socket (one TCP ring between the rank processes),
#   - bin/allreduce-perf --pretend-hosts 2 at 4 ranks (two-level: shared memory inside each pretend
#     host, TCP across),
# each --rounds times interleaved (default 2; the report takes each side's best round, size by size),
# and writes the table (busbw, ratio to OpenMPI) to docs/perf/socket-allreduce.md.
#
# Usage: scripts/socket-bench.sh [--rounds N]
# Raw outputs stay in target/socket-bench/ (ignored by git).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$ROOT/target/socket-bench
REPORT=$ROOT/docs/perf/socket-allreduce.md
SIZES=(-b 1K -e 64M -f 4)
ITERS=(-w 5 -n 20)
rounds=2
while [[ $# -gt 0 ]]; do
    case $1 in
        --rounds) rounds=$2; shift 2 ;;
        *) echo "socket-bench.sh: unknown argument $1 (known: --rounds N)" >&2; exit 2 ;;
    esac
done

if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
    echo "socket-bench: installing openmpi-bin libopenmpi-dev (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq openmpi-bin libopenmpi-dev >/dev/null
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# TCP only, on loopback (OpenMPI leaves lo out of its TCP interfaces unless told).
MPIRUN=(mpirun --oversubscribe --mca btl tcp,self --mca btl_tcp_if_include lo)
export SPARKCCL_SOCKET_ADDRESS=127.0.0.1

mkdir -p "$OUT" "$(dirname "$REPORT")"
rm -f "$OUT"/*.txt "$OUT"/*.cmd
mpicc -O3 -march=native -Wall -o "$OUT/mpi_allreduce" "$ROOT/bench/mpi_allreduce.c" -lm
cut -d' ' -f1-3 /proc/loadavg > "$OUT/load-start.txt"

run() {
    local name=$1; shift
    echo "socket-bench: $name: $*"
    echo "$*" | sed "s|$OUT/||g; s|$ROOT/||g" > "$OUT/$name.cmd"
    if ! timeout 900 "$@" > "$OUT/$name.txt" 2> "$OUT/$name.err"; then
        echo "socket-bench: $name failed; output in $OUT/$name.txt, $OUT/$name.err" >&2
        tail -20 "$OUT/$name.err" >&2
        exit 1
    fi
}

for round in $(seq 1 "$rounds"); do
    for np in 2 4; do
        run "mpi-tcp-np$np-r$round" "${MPIRUN[@]}" -np $np "$OUT/mpi_allreduce" "${SIZES[@]}" "${ITERS[@]}" -c 1
        run "socket-np$np-r$round" "$ROOT/bin/allreduce-perf" -g $np --device cpu --transport socket "${SIZES[@]}" \
            "${ITERS[@]}" -d float -o sum -c 1
    done
    run "twolevel-np4-r$round" "$ROOT/bin/allreduce-perf" -g 4 --device cpu --pretend-hosts 2 "${SIZES[@]}" \
        "${ITERS[@]}" -d float -o sum -c 1
done
cut -d' ' -f1-3 /proc/loadavg > "$OUT/load-end.txt"

python3 - "$OUT" "$REPORT" "$rounds" <<'PY'
import glob, os, platform, subprocess, sys
out, report, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])

def table(path):
    rows = {}
    for line in open(path):
        f = line.split()
        if len(f) >= 9 and f[0].isdigit():
            wrong = int(f[8])
            if wrong != 0:
                raise SystemExit(f"{path}: {wrong} wrong elements at {f[0]} B")
            rows[int(f[0])] = float(f[7])  # out-of-place busbw, GB/s
    return rows

def best(prefix):
    merged = {}
    for r in range(1, rounds + 1):
        for size, bw in table(f"{out}/{prefix}-r{r}.txt").items():
            merged[size] = max(bw, merged.get(size, 0.0))
    return merged

def human(n):
    for unit, div in (("M", 1 << 20), ("K", 1 << 10)):
        if n >= div:
            return f"{n // div} {unit}B"
    return f"{n} B"

cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
ompi = subprocess.run(["mpirun", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
load = open(f"{out}/load-start.txt").read().strip(), open(f"{out}/load-end.txt").read().strip()
cmds = {os.path.basename(p)[:-4]: open(p).read().strip() for p in sorted(glob.glob(f"{out}/*-r1.cmd"))}

lines = ["# Socket transport: all-reduce over TCP against OpenMPI's TCP path", "",
         "Written by `scripts/socket-bench.sh` (do not edit by hand). Loopback (127.0.0.1), float32 sum,",
         f"out-of-place busbw in GB/s (nccl-tests' definition: algbw x 2(n-1)/n), best of {rounds} interleaved rounds",
         "per size, every result checked against the float64 reference (#wrong 0). What the numbers say, and",
         "what they do not: [socket-allreduce-notes.md](socket-allreduce-notes.md).", "",
         f"Machine: {cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}; {ompi}; {java};",
         f"load average at start {load[0]}, at end {load[1]} (the machine is shared: numbers move).", "",
         "Commands (round 1):", ""]
lines += [f"    {cmds[k]}" for k in sorted(cmds)]
for np in (2, 4):
    mpi, ours = best(f"mpi-tcp-np{np}"), best(f"socket-np{np}")
    two = best("twolevel-np4") if np == 4 else None
    lines += ["", f"## {np} ranks", ""]
    head = "| size | OpenMPI TCP | sparkccl socket | socket / OpenMPI |"
    sep = "| ---: | ---: | ---: | ---: |"
    if two:
        head += " sparkccl two-level (2 pretend hosts x 2) | two-level / OpenMPI |"
        sep += " ---: | ---: |"
    lines += [head, sep]
    for size in sorted(mpi):
        row = f"| {human(size)} | {mpi[size]:.2f} | {ours.get(size, 0):.2f} | {ours.get(size, 0) / mpi[size]:.2f} |" \
            if mpi[size] > 0 else f"| {human(size)} | {mpi[size]:.2f} | {ours.get(size, 0):.2f} | - |"
        if two:
            row += f" {two.get(size, 0):.2f} | {two.get(size, 0) / mpi[size]:.2f} |" if mpi[size] > 0 else " - | - |"
        lines.append(row)
open(report, "w").write("\n".join(lines) + "\n")
print(f"socket-bench: wrote {report}")
PY

#!/usr/bin/env bash
# Issue 25, the small-call breakdown in one device call (2 ranks as threads of one JVM on one H200):
# the floors (stream memory operations among them; PyTorch's), the build in BASE_DIR (jars only, the same
# dependencies) and this build side by side, this build with programmatic dependent launch off, this build again with SPARKCCL_PROBE=1 (the GPU's own
# stamps of every one-shot call: GpuProbes), the stream-resident kernel on and off, bfloat16, 128 / 256 MB, then the gpu-tagged tests named
# in SELECT (default: the collectives, stream-ordered, LL128 and cross-process tests; SELECT=all: every
# gpu-tagged test).
# Usage: bash DEV/gpu-i25-probe.sh DEV [BASE_DIR]   (VARIANTS, RESIDENT_THREADS_SWEEP, BLOCK_BYTES_SWEEP, RESIDENT_MAX_SWEEP, SELECT: see below)
set -u
dev=${1:-.device}
base=${2:-}
out=${OUT:-$PWD/gpu-out}
logs=$out/logs
mkdir -p "$logs"
export NCCL_NVLS_ENABLE=0 SPARKCCL_TIMEOUT_MS=15000 CUDA_DEVICE_MAX_CONNECTIONS=32
[ -x /tmp/jre/bin/java ] || tar xzf "$dev/jre.tgz" -C /tmp
java=/tmp/jre/bin/java
mapfile -t jvm < scripts/spark-jvm-options
cpn="$(ls "$dev"/lib/*.jar | tr '\n' ':')"
# ONLY_JUNIT=1: the tests alone (a device call of its own when the whole run would not fit one); SELECT=none:
# no tests.
if [ -z "${ONLY_JUNIT:-}" ]; then
echo "== floors $(date -u +%T), clock source $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null)"
timeout 120 "$java" "${jvm[@]}" -cp "$cpn" org.sparkccl.tools.perf.GpuFloorsBench -n 2000 -w 500 > "$logs/floors-java.log" 2>&1
echo "exit $?" >> "$logs/floors-java.log"
[ -n "${LEAN:-}" ] || timeout 100 python3 "$dev/gpu_floors.py" 2000 > "$logs/floors-torch.log" 2>&1; echo "exit $?" >> "$logs/floors-torch.log"
# The launch floor from C++ (scripts/launch_floor.cu, built by gpu-package.sh where nvcc is).
[ ! -x "$dev/launch_floor" ] || { timeout 60 "$dev/launch_floor"; echo "exit $?"; } > "$logs/floors-c.log" 2>&1
grep -hE "^FLOOR|^CFLOOR|exit [1-9]|Exception" "$logs/floors-java.log" "$logs/floors-torch.log" "$logs/floors-c.log" | sed 's/  */ /g; s/^FLOOR //' | cut -c1-190
b() { # label classpath env... -- args
  local label=$1 cp=$2; shift 2; local envs=(); while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" timeout 150 "$java" "${jvm[@]}" -cp "$cp" org.sparkccl.tools.perf.GpuAllReduceBench "$@" > "$logs/bench-$label.log" 2>&1
  echo "---- $label: exit $? $(date -u +%T)"; grep -vE "^# settings|^WARNING|^PROBE|^STREAM" "$logs/bench-$label.log" | sed 's/  */ /g' | cut -c1-190
}
probes() { # file: its PROBE lines, shortened
  grep "^PROBE" "$1" | sed 's/calls, us from start: //; s/ (ranks on one GPU.*//' | cut -c1-230
}
# 2000 warm-up calls per size and mode: the first sizes of a run with -w 20 still ran the host side before
# C2 (3-4 us of host time at 8 B, against about 1 us after).
A="-b 8 -e 4M -f 4 -n 200 -w ${WARMUP:-2000} -g 1 --ranks-per-gpu 2 --threads"
if [ -n "$base" ]; then
  cpb="$(ls "$base"/*.jar | tr '\n' ':')$(ls "$dev"/lib/*.jar | grep -vE '/(collective-core|ipc|train|tools)-[0-9]' | tr '\n' ':')"
  b base-float "$cpb" -- $A
fi
b new-float "$cpn" -- $A
grep "^STREAM rank 0" "$logs/bench-new-float.log" | cut -c1-120
# VARIANTS="SPARKCCL_STREAM_LAUNCH=graph ...": this build again with those settings (commas join several), run
# here and once more after bfloat16, interleaved with the default.
variants() {
  for v in ${VARIANTS:-}; do
    local name=new-$(echo "$v" | tr -c 'A-Za-z0-9\n' '_')$1
    b "$name" "$cpn" ${v//,/ } -- $A
    grep "^STREAM rank 0" "$logs/bench-$name.log" | cut -c1-120
  done
}
variants ""
# 64 KB, which the x4 series above steps over (32 KB, 128 KB): the top of the issue's 8 B-64 KB range.
S64="-b 64K -e 64K -n 200 -w ${WARMUP:-2000} -g 1 --ranks-per-gpu 2 --threads"
if [ -n "$base" ]; then b base-64k "$cpb" -- $S64; fi
b new-64k "$cpn" -- $S64
b new-bf16 "$cpn" -- $A -d bfloat16
variants 2
# LEAN=1: the above, 128 / 256 MB and the tests only (a call that must fit a small budget).
if [ -z "${LEAN:-}" ]; then
# Programmatic dependent launch off (small one-shot kernels launched plainly), in the same run.
b new-nopdl "$cpn" SPARKCCL_PDL_MAX_BLOCKS=0 -- $A
b new-probe "$cpn" SPARKCCL_PROBE=1 -- $A
probes "$logs/bench-new-probe.log"
if [ -n "$base" ]; then b base-probe "$cpb" SPARKCCL_PROBE=1 -- $A; probes "$logs/bench-base-probe.log"; fi
# STREAM_RESIDENT=1: the stream-resident kernel (auto leaves it off where two ranks share a GPU, as here),
# with the probes: its calls' kernel time and the gap the stream's memory operations leave between them.
if [ -n "${STREAM_RESIDENT:-}" ]; then
  b new-stream-resident-probe "$cpn" SPARKCCL_STREAM_RESIDENT=1 SPARKCCL_PROBE=1 -- -b 8 -e 16K -f 4 -n 200 -w 20 -g 1 --ranks-per-gpu 2 --threads
  probes "$logs/bench-new-stream-resident-probe.log"
fi
# RESIDENT_THREADS_SWEEP="64 128 256 512": the resident kernels' block size (SPARKCCL_RESIDENT_THREADS),
# 8 B - 16 KB (the resident kernel's range), with the probes on, after 3000 warm-up calls per size (the
# first sizes of a run with -w 20 still run the host side before C2: 4-5 us of host time at 8 B).
for t in ${RESIDENT_THREADS_SWEEP:-}; do
  b threads-$t "$cpn" SPARKCCL_RESIDENT_THREADS=$t SPARKCCL_PROBE=1 -- -b 8 -e 16K -f ${SWEEP_F:-4} -n 1000 -w 3000 -g 1 --ranks-per-gpu 2 --threads
  probes "$logs/bench-threads-$t.log" | grep "rank 0"
done
# BLOCK_BYTES_SWEEP="2048 8192": one-shot blocks of other sizes (SPARKCCL_ONESHOT_BLOCK_BYTES; default 2048).
for x in ${BLOCK_BYTES_SWEEP:-}; do
  b new-bb$x "$cpn" SPARKCCL_ONESHOT_BLOCK_BYTES=$x -- -b 8 -e 256K -f 4 -n 200 -w ${WARMUP:-2000} -g 1 --ranks-per-gpu 2 --threads
done
# RESIDENT_MAX_SWEEP="64K": blocking calls of 8-64 KB with the resident kernel taking up to that size
# (SPARKCCL_RESIDENT_MAX_BYTES; default 32K, larger calls launch), beside this build's default.
for x in ${RESIDENT_MAX_SWEEP:-}; do
  b new-rmax$x "$cpn" SPARKCCL_RESIDENT_MAX_BYTES=$x -- -b 8K -e 64K -f 2 -n 200 -w ${WARMUP:-2000} -g 1 --ranks-per-gpu 2 --threads --blocking-only
done
if [ -n "$base" ]; then b base-float2 "$cpb" -- $A; fi
b new-float2 "$cpn" -- $A
b new-nopdl2 "$cpn" SPARKCCL_PDL_MAX_BLOCKS=0 -- $A
fi
L="-b 128M -e 256M -f 2 -n 20 -w 5 -g 1 --ranks-per-gpu 2 --threads --blocking-only"
if [ -n "$base" ]; then b base-large "$cpb" -- $L; fi
b new-large "$cpn" -- $L
if [ -z "${LEAN:-}" ]; then
# One rank per process (2 processes on the one GPU: their contexts time-slice, so correctness only), and
# allreduce-perf's CUDA-graph mode (-G, as nccl-tests) there.
b procs "$cpn" -- -b 8 -e 64K -f 8 -n 5 -w 2 -g 1 --ranks-per-gpu 2
timeout 90 "$java" "${jvm[@]}" -cp "$cpn" org.sparkccl.tools.perf.AllReducePerf --device gpu -g 1 --ranks-per-gpu 2 \
  -b 8 -e 64K -f 8 -n 5 -w 2 -c 1 -G 2 > "$logs/allreduce-perf-G.log" 2>&1; echo "exit $?" >> "$logs/allreduce-perf-G.log"
echo "---- allreduce-perf -G 2 (2 processes)"; grep -vE "^\[|^WARNING" "$logs/allreduce-perf-G.log" | tail -12
fi
fi
if [ "${SELECT:-}" != none ]; then
echo "== JUnit $(date -u +%T)"
sel=()
if [ "${SELECT:-}" = all ]; then
  sel=(--scan-class-path "$dev/test-classes" --include-tag gpu)
else
  # A name without a package is in org.sparkccl.ipc.gpu (e.g. org.sparkccl.tools.multiprocess.GpuKillTrialsTest is not).
  for c in ${SELECT:-GpuCollectivesTest GpuStreamOrderedTest GpuStreamResidentTest GpuLl128Test GpuCrossProcessTest}; do
    case $c in *.*) ;; *) c=org.sparkccl.ipc.gpu.$c ;; esac
    sel+=(--select-class "$c")
  done
fi
start=$(date +%s)
timeout "${JUNIT_TIMEOUT:-200}" "$java" "${jvm[@]}" -cp "$dev/test-classes:${cpn}$dev/junit-console.jar" org.junit.platform.console.ConsoleLauncher execute \
  "${sel[@]}" --details=tree --disable-banner --disable-ansi-colors --reports-dir "$logs/junit" > "$logs/junit.log" 2>&1
echo "junit exit $? after $(( $(date +%s) - start )) s"
grep -E "tests (successful|failed|aborted|skipped)|✘|MEASURED|trial |lost" "$logs/junit.log" | cut -c1-220 | head -40
grep -m1 -B2 -A20 -E "^\s+=> |Exception in thread" "$logs/junit.log" | grep -vE "^\s+at (java|jdk|org\.junit)\." | head -24
fi
tar czf "$out/logs.tgz" -C "$out" logs && rm -rf "$logs"

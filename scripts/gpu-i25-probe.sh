#!/usr/bin/env bash
# Issue 25, the small-call breakdown in one device call (2 ranks as threads of one JVM on one H200):
# the floors (stream memory operations among them), the build in BASE_DIR (jars only, the same
# dependencies) and this build side by side, this build again with SPARKCCL_PROBE=1 (the GPU's own
# stamps of every one-shot call: GpuProbes), the stream-resident kernel on and off, bfloat16, 128 / 256 MB, then the gpu-tagged tests named
# in SELECT (default: the collectives, stream-ordered, LL128 and cross-process tests; SELECT=all: every
# gpu-tagged test).
# Usage: bash DEV/gpu-i25-probe.sh DEV [BASE_DIR]   (RESIDENT_THREADS_SWEEP, SELECT: see below)
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
echo "== floors $(date -u +%T)"
timeout 120 "$java" "${jvm[@]}" -cp "$cpn" org.sparkccl.tools.perf.GpuFloorsBench -n 2000 -w 500 > "$logs/floors-java.log" 2>&1
echo "exit $?" >> "$logs/floors-java.log"
grep -hE "^FLOOR|exit [1-9]|Exception" "$logs/floors-java.log" | sed 's/  */ /g; s/FLOOR //' | cut -c1-190
b() { # label classpath env... -- args
  local label=$1 cp=$2; shift 2; local envs=(); while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" timeout 150 "$java" "${jvm[@]}" -cp "$cp" org.sparkccl.tools.perf.GpuAllReduceBench "$@" > "$logs/bench-$label.log" 2>&1
  echo "---- $label: exit $? $(date -u +%T)"; grep -vE "^# settings|^WARNING|^PROBE" "$logs/bench-$label.log" | sed 's/  */ /g' | cut -c1-190
}
probes() { # file: its PROBE lines, shortened
  grep "^PROBE" "$1" | sed 's/calls, us from start: //; s/ (ranks on one GPU.*//' | cut -c1-230
}
A="-b 8 -e 4M -f 4 -n 200 -w 20 -g 1 --ranks-per-gpu 2 --threads"
if [ -n "$base" ]; then
  cpb="$(ls "$base"/*.jar | tr '\n' ':')$(ls "$dev"/lib/*.jar | grep -vE '/(collective-core|ipc|train|tools)-[0-9]' | tr '\n' ':')"
  b base-float "$cpb" -- $A
fi
b new-float "$cpn" -- $A
# The stream-resident kernel (auto leaves it off where two ranks share a GPU, as here), interleaved with
# the launched stream-ordered calls above and below.
b new-stream-resident "$cpn" SPARKCCL_STREAM_RESIDENT=1 -- $A
b new-probe "$cpn" SPARKCCL_PROBE=1 -- $A
probes "$logs/bench-new-probe.log"
# RESIDENT_THREADS_SWEEP="64 128 256 512": the resident kernels' block size (SPARKCCL_RESIDENT_THREADS),
# 8 B - 16 KB (the resident kernel's range), with the probes on, after 3000 warm-up calls per size (the
# first sizes of a run with -w 20 still run the host side before C2: 4-5 us of host time at 8 B).
for t in ${RESIDENT_THREADS_SWEEP:-}; do
  b threads-$t "$cpn" SPARKCCL_RESIDENT_THREADS=$t SPARKCCL_PROBE=1 -- -b 8 -e 16K -f ${SWEEP_F:-4} -n 1000 -w 3000 -g 1 --ranks-per-gpu 2 --threads
  probes "$logs/bench-threads-$t.log" | grep "rank 0"
done
if [ -n "$base" ]; then b base-float2 "$cpb" -- $A; fi
b new-float2 "$cpn" -- $A
b new-stream-resident2 "$cpn" SPARKCCL_STREAM_RESIDENT=1 -- $A
b new-stream-resident-bf16 "$cpn" SPARKCCL_STREAM_RESIDENT=1 -- $A -d bfloat16
b new-bf16 "$cpn" -- $A -d bfloat16
b new-large "$cpn" -- -b 128M -e 256M -f 2 -n 20 -w 5 -g 1 --ranks-per-gpu 2 --threads --blocking-only
echo "== JUnit $(date -u +%T)"
sel=()
if [ "${SELECT:-}" = all ]; then
  sel=(--scan-class-path "$dev/test-classes" --include-tag gpu)
else
  for c in ${SELECT:-GpuCollectivesTest GpuStreamOrderedTest GpuStreamResidentTest GpuLl128Test GpuCrossProcessTest}; do sel+=(--select-class "org.sparkccl.ipc.gpu.$c"); done
fi
start=$(date +%s)
timeout "${JUNIT_TIMEOUT:-200}" "$java" "${jvm[@]}" -cp "$dev/test-classes:${cpn}$dev/junit-console.jar" org.junit.platform.console.ConsoleLauncher execute \
  "${sel[@]}" --details=tree --disable-banner --disable-ansi-colors --reports-dir "$logs/junit" > "$logs/junit.log" 2>&1
echo "junit exit $? after $(( $(date +%s) - start )) s"
grep -E "tests (successful|failed|aborted|skipped)|✘|MEASURED|trial |lost" "$logs/junit.log" | cut -c1-220 | head -40
grep -m1 -B2 -A20 -E "^\s+=> |Exception in thread" "$logs/junit.log" | grep -vE "^\s+at (java|jdk|org\.junit)\." | head -24
tar czf "$out/logs.tgz" -C "$out" logs && rm -rf "$logs"

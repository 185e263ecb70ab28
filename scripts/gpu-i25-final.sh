#!/usr/bin/env bash
# Issue 25's closing device run in one call (2 ranks as threads of one JVM on one H200 unless said):
# the floors; old (OLD_DIR's jars, if there) and new small calls 8 B - 4 MB, float32 and bfloat16;
# 128 / 256 MB; one rank per process (2 processes, time-sliced: correctness); allreduce-perf -G;
# then every gpu-tagged test (the stream-ordered hang fix, kill trials, soak, LL128 among them).
# Usage: bash DEV/gpu-i25-final.sh DEV [OLD_DIR]
set -u
dev=${1:-.device}
old=${2:-}
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 SPARKCCL_TIMEOUT_MS=15000 CUDA_DEVICE_MAX_CONNECTIONS=32
[ -x /tmp/jre/bin/java ] || tar xzf "$dev/jre.tgz" -C /tmp
java=/tmp/jre/bin/java
mapfile -t jvm < scripts/spark-jvm-options
cpn="$(ls "$dev"/lib/*.jar | tr '\n' ':')"
logs=$out/logs
mkdir -p "$logs"
echo "== floors $(date -u +%T)"
timeout 100 "$java" "${jvm[@]}" -cp "$cpn" org.sparkccl.tools.perf.GpuFloorsBench -n 2000 -w 500 > "$logs/floors-java.log" 2>&1; echo "exit $?" >> "$logs/floors-java.log"
timeout 100 python3 "$dev/gpu_floors.py" 2000 > "$logs/floors-torch.log" 2>&1; echo "exit $?" >> "$logs/floors-torch.log"
grep -hE "^FLOOR|exit [1-9]|Exception" "$logs/floors-java.log" "$logs/floors-torch.log" | sed 's/  */ /g; s/FLOOR //' | cut -c1-170
b() { # label classpath env... -- args
  local label=$1 cp=$2; shift 2; local envs=(); while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" timeout 120 "$java" "${jvm[@]}" -cp "$cp" org.sparkccl.tools.perf.GpuAllReduceBench "$@" > "$logs/bench-$label.log" 2>&1
  echo "---- $label: exit $? $(date -u +%T)"; grep -vE "^# settings|^WARNING" "$logs/bench-$label.log" | sed 's/  */ /g' | cut -c1-170
}
A="-b 8 -e 4M -f 2 -n 100 -w 10 -g 1 --ranks-per-gpu 2 --threads"
L="-b 128M -e 256M -f 2 -n 20 -w 5 -g 1 --ranks-per-gpu 2 --threads --blocking-only"
if [ -n "$old" ]; then
  cpo="$(ls "$old"/lib/*.jar | tr '\n' ':')"
  b old-float "$cpo" -- $A
  b old-large "$cpo" -- $L
fi
b new-float "$cpn" -- $A
b new-bf16 "$cpn" -- $A -d bfloat16
b new-large "$cpn" -- $L
b procs "$cpn" -- -b 8 -e 64K -f 8 -n 5 -w 2 -g 1 --ranks-per-gpu 2
timeout 90 "$java" "${jvm[@]}" -cp "$cpn" org.sparkccl.tools.perf.AllReducePerf --device gpu -g 1 --ranks-per-gpu 2 \
  -b 8 -e 64K -f 8 -n 5 -w 2 -c 1 -G 2 > "$logs/allreduce-perf-G.log" 2>&1; echo "exit $?" >> "$logs/allreduce-perf-G.log"
echo "---- allreduce-perf -G 2 (2 processes)"; grep -vE "^\[|^WARNING" "$logs/allreduce-perf-G.log" | tail -12
echo "== JUnit (gpu tag) $(date -u +%T)"
start=$(date +%s)
timeout "${JUNIT_TIMEOUT:-330}" "$java" "${jvm[@]}" -cp "$dev/test-classes:${cpn}$dev/junit-console.jar" org.junit.platform.console.ConsoleLauncher execute \
  --scan-class-path "$dev/test-classes" --include-tag gpu --details=tree --disable-banner --disable-ansi-colors \
  --reports-dir "$logs/junit" > "$logs/junit.log" 2>&1
echo "junit exit $? after $(( $(date +%s) - start )) s"
grep -E "tests (successful|failed|aborted|skipped)|✘|MEASURED|trial |lost" "$logs/junit.log" | cut -c1-220 | head -40
grep -m1 -B2 -A20 -E "^\s+=> |Exception in thread" "$logs/junit.log" | grep -vE "^\s+at (java|jdk|org\.junit)\." | head -24
tar czf "$out/logs.tgz" -C "$out" logs && rm -rf "$logs"

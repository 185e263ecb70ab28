#!/usr/bin/env bash
# Runs on the GPU machine (from the checkout root, .device carried along, as gpu-test.sh): the
# collective kernels under compute-sanitizer, memcheck then racecheck, on a short sweep of two
# ranks as threads of one JVM (LL and Simple sizes). Logs under $OUT; prints each tool's summary.
# Usage: bash scripts/gpu-sanitize.sh [SECONDS_PER_TOOL] [DEVICE_DIR]
set -uo pipefail
limit=${1:-60}
dev=${2:-.device}
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
export SPARKCCL_TIMEOUT_MS=120000 CUDA_DEVICE_MAX_CONNECTIONS=32
[ -x /tmp/jre/bin/java ] || tar xzf "$dev/jre.tgz" -C /tmp
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
cp="$(ls "$dev"/lib/*.jar | tr '\n' ':')"
mapfile -t jvm < scripts/spark-jvm-options # what Spark gives executors, nothing more
for tool in memcheck racecheck; do
  timeout "$limit" "$sanitizer" --tool "$tool" --print-limit 20 /tmp/jre/bin/java \
    "${jvm[@]}" -cp "$cp" org.sparkccl.tools.perf.GpuAllReduceBench \
    -b 8 -e 2M -f 512 -n 1 -w 0 --threads > "$out/sanitize-$tool.log" 2>&1
  echo "== $tool: exit $?"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Invalid|Race|wrong|float" "$out/sanitize-$tool.log" | head -12
done

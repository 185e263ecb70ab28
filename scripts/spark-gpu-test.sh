#!/usr/bin/env bash
# Spark on the GPU machine, as users run it (issue 12). Runs from the repository root after every
# part made by scripts/spark-gpu-package.sh reached .device/spark (back-to-back device calls):
#   1. SparkGpuTest (spark-plugin, tag gpu): local-cluster executors launched by Spark's workers with
#      GPUs from discovery scripts; one executor per GPU, one executor with every GPU, two ranks on
#      one GPU; every type and op, a count mismatch, TrainJob on the GPUs, checkpoint and resume;
#      per-step 64 MB all-reduce inside the barrier task (MEASURED lines);
#   2. allreduce-perf --device gpu at 64 MB in the same run, and the ratio of the two;
#   3. TrainJob as bin/train runs it (embedded local Spark): on the GPUs, and refused with more ranks
#      than GPUs;
#   4. spark-submit of the application jar (TrainJob) to a standalone Master and Worker, the Worker
#      with the real GPU discovery script (scripts/getGpusResources.sh); then the same with two Workers
#      on pretend hosts (SPARKCCL_HOST_ID each), so that the GPU ranks all-reduce across hosts;
#   5. with "all": ipc's gpu-tagged tests too.
# With "classes SELECTOR...": only those JUnit classes (or CLASS#method; tag gpu), each in a JUnit run of
# its own, in that order, to fit one device call (a copy of this script in .device/spark/app, run from the
# repository root, works too).
# Every JVM gets exactly Spark's options (scripts/spark-jvm-options) and nothing of ours.
# Logs under $OUT (or ./gpu-out); a short summary is printed last.
# Usage: bash scripts/spark-gpu-test.sh [spark|all|standalone|ipc|classes SELECTOR...]
#        (standalone: step 4 only; ipc: step 5 only)
set -uo pipefail
what=${1:-spark}
[ $# -gt 0 ] && shift
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# A hung collective must fail in seconds here, not after the 10-minute default.
export SPARKCCL_TIMEOUT_MS=${SPARKCCL_TIMEOUT_MS:-30000}
b=/tmp/spark-bundle
if [ ! -x "$b/jre/bin/java" ]; then
  parts=(.device/spark/part-*)
  echo "== reassembling ${#parts[@]} parts"
  if command -v xz >/dev/null; then cat "${parts[@]}" | xz -d | tar x -C /tmp
  else cat "${parts[@]}" | python3 -c 'import lzma,sys; sys.stdout.buffer.write(lzma.decompress(sys.stdin.buffer.read()))' | tar x -C /tmp; fi
fi
export JAVA_HOME=$b/jre
java=$JAVA_HOME/bin/java
mapfile -t jvm < scripts/spark-jvm-options
app=$PWD/.device/spark/app
cp="$b/jars/*:$app/*:$app/spark-plugin-test-classes:$app/ipc-test-classes"
export SPARK_HOME=/tmp/spark-home SPARK_SCALA_VERSION=2.13 SPARK_LOCAL_IP=127.0.0.1
mkdir -p "$SPARK_HOME/jars"
{ nvidia-smi; nvidia-smi topo -m; } > "$out/nvidia-smi.txt" 2>&1
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
echo "== $ngpu GPU(s)"

junit() { # label, class-path folder to scan (empty: the classes selected in the extra args), extra args...
  local label=$1 dir=$2; shift 2
  local start; start=$(date +%s)
  timeout "${JUNIT_TIMEOUT:-420}" "$java" "${jvm[@]}" -cp "$cp" org.junit.platform.console.ConsoleLauncher execute \
    ${dir:+--scan-class-path "$dir"} --include-tag gpu --details=tree --disable-banner --disable-ansi-colors \
    --reports-dir "$out/junit-$label" "$@" > "$out/junit-$label.log" 2>&1
  echo "== JUnit $label: exit $? after $(( $(date +%s) - start )) s"
  grep -E "tests (successful|failed|aborted|skipped)|✘" "$out/junit-$label.log" | head -20
  grep -m1 -B2 -A25 -E "^\s+=> |Exception in thread" "$out/junit-$label.log" | grep -vE "^\s+at (java|jdk|org\.junit)\." | head -30
}

if [ "$what" = classes ]; then
  for selected in "$@"; do # a class, or CLASS#method
    label=$(echo "${selected##*.}" | tr '#' '-')
    select=--select-class; case "$selected" in *'#'*) select=--select-method ;; esac
    # ipc's tests put several ranks of one JVM on a GPU: each needs a hardware queue of its own (step 5).
    case "$selected" in org.sparkccl.ipc.*) queues=32 ;; *) queues=${CUDA_DEVICE_MAX_CONNECTIONS:-8} ;; esac
    CUDA_DEVICE_MAX_CONNECTIONS=$queues junit "$label" "" "$select" "$selected"
    grep -hE "^(LAYOUT|MEASURED|CANCEL)" "$out/junit-$label.log"
  done
  exit 0
fi

if [ "$what" = spark ] || [ "$what" = all ]; then
  junit spark "$app/spark-plugin-test-classes"
  grep -hE "^(LAYOUT|MEASURED)" "$out/junit-spark.log"

  echo "== allreduce-perf --device gpu -g 2 at 64 MB"
  if [ "$ngpu" -ge 2 ]; then
    timeout 180 "$java" -cp "$cp" org.sparkccl.tools.perf.AllReducePerf --device gpu -g 2 -b 64M -e 64M -n 20 -w 5 -c 1 \
      > "$out/allreduce-perf-64M.log" 2>&1
    echo "exit $?"; grep -vE "^#\s*$" "$out/allreduce-perf-64M.log" | tail -8
    # busbw of the out-of-place row (nccl-tests' column 8) against the in-task measurement.
    perf=$(awk '$1 ~ /^[0-9]+$/ && $1 == 67108864 {print $8; exit}' "$out/allreduce-perf-64M.log")
    task=$(grep -hE "^MEASURED executor-per-gpu device-memory 64MB rank 0" "$out/junit-spark.log" | sed -E 's/.*busbw ([0-9.]+).*/\1/')
    [ -n "$perf" ] && [ -n "$task" ] && python3 -c "print('64 MB busbw: in the Spark task %s GB/s, allreduce-perf %s GB/s: %.2f' % ('$task', '$perf', $task / $perf))"
  else
    echo "(needs 2 GPUs)"
  fi

  echo "== TrainJob as bin/train runs it (embedded local Spark, $ngpu ranks)"
  timeout 240 "$java" "${jvm[@]}" -cp "$cp" org.sparkccl.train.TrainJob --ranks "$ngpu" --steps 200 \
    > "$out/train.log" 2>&1
  echo "exit $?"; grep -E "TrainJob|trained steps|on GPU|on the CPU|refus" "$out/train.log" | head -8
  echo "== bin/train with more ranks than GPUs ($((ngpu + 1)))"
  timeout 120 "$java" "${jvm[@]}" -cp "$cp" org.sparkccl.train.TrainJob --ranks $((ngpu + 1)) --steps 20 \
    > "$out/train-too-many.log" 2>&1
  echo "exit $? (must not be 0)"; grep -iE "GPU|Exception" "$out/train-too-many.log" | head -4

fi

standalone() { # hosts: 1 (one Worker with the GPUs) or 2 (two Workers on pretend hosts, one rank each)
  local hosts=${1:-1}
  local home=/tmp/spark-standalone conf=/tmp/spark-standalone/worker.conf ranks task_gpus=1 shared=false
  local log=$out/standalone-driver.log
  [ "$hosts" = 2 ] && log=$out/standalone-2hosts-driver.log
  rm -rf "$home"; mkdir -p "$home/jars" "$home/work"
  # Spark's jars only: what the application jar carries (sparkccl, Agrona, picocli, JNA, JCuda) stays out.
  for j in "$b"/jars/*.jar; do
    case "$(basename "$j")" in agrona-*|picocli-*|jna-*|jcuda-*|junit-platform-console-*) ;; *) ln -s "$j" "$home/jars/" ;; esac
  done
  ranks=$ngpu
  if [ "$ngpu" -lt 2 ]; then ranks=2; task_gpus=0.5; shared=true; fi
  local exec_gpus=$ngpu worker_cores=$ranks
  # Pretend hosts: each Worker (and so its executor, which inherits the Worker's environment) has its own
  # SPARKCCL_HOST_ID; one executor with one task and one GPU per host. Where there is one GPU both use it.
  if [ "$hosts" = 2 ]; then ranks=2; task_gpus=1; exec_gpus=1; worker_cores=1; shared=true; fi
  printf 'spark.worker.resource.gpu.amount %s\nspark.worker.resource.gpu.discoveryScript %s\n' "$ngpu" \
    "$PWD/scripts/getGpusResources.sh" > "$conf"
  local scp="$home/jars/*"
  SPARK_HOME=$home "$java" "${jvm[@]}" -cp "$scp" org.apache.spark.deploy.master.Master --host 127.0.0.1 \
    --port 7077 --webui-port 18080 > "$out/standalone-master.log" 2>&1 &
  local pids=($!)
  local h
  for h in $(seq "$hosts"); do
    local wlog=$out/standalone-worker.log
    [ "$hosts" = 2 ] && wlog=$out/standalone-worker-host$h.log
    mkdir -p "$home/work/$h"
    env $([ "$hosts" = 2 ] && echo "SPARKCCL_HOST_ID=pretend-host-$h SPARKCCL_DEBUG=INFO SPARKCCL_DEBUG_SUBSYS=INIT") \
      SPARK_HOME=$home "$java" "${jvm[@]}" -cp "$scp" org.apache.spark.deploy.worker.Worker spark://127.0.0.1:7077 \
      --host 127.0.0.1 --cores "$worker_cores" --memory 16g --work-dir "$home/work/$h" --properties-file "$conf" \
      --webui-port $((18080 + h)) > "$wlog" 2>&1 &
    pids+=($!)
    for _ in $(seq 60); do grep -q "Successfully registered with master" "$wlog" && break; sleep 1; done
  done
  SPARK_HOME=$home timeout 240 "$java" "${jvm[@]}" -cp "$scp" org.apache.spark.deploy.SparkSubmit \
    --master spark://127.0.0.1:7077 --class org.sparkccl.train.TrainJob \
    --conf spark.plugins=org.sparkccl.spark.SparkCclPlugin \
    --conf spark.executor.resource.gpu.amount="$exec_gpus" \
    --conf spark.executor.resource.gpu.discoveryScript="$PWD/scripts/getGpusResources.sh" \
    --conf spark.task.resource.gpu.amount=$task_gpus --conf spark.sparkccl.allowSharedGpu=$shared \
    --conf spark.executor.cores="$worker_cores" --conf spark.driver.host=127.0.0.1 \
    --conf spark.scheduler.barrier.maxConcurrentTasksCheck.interval=1s \
    .device/spark/submit/sparkccl-spark-app-*.jar --ranks "$ranks" --steps 200 --log-every 50 \
    > "$log" 2>&1
  echo "spark-submit exit $?"
  grep -E "trained steps|TrainJob:" "$log" | head -3
  grep -hE "training steps run|ready on|two-level|over TCP" "$home"/work/*/app-*/*/stdout "$home"/work/*/app-*/*/stderr \
    2>/dev/null | sed 's/^.*\(sparkccl rank\|ranks on\|two-level\)/\1/' | cut -c1-300 | head -8
  kill "${pids[@]}" 2>/dev/null; wait "${pids[@]}" 2>/dev/null
  pkill -f CoarseGrainedExecutorBackend 2>/dev/null
  cp -r "$home/work" "$out/standalone-work-$hosts" 2>/dev/null
}
if [ "$what" != ipc ]; then
  echo "== spark-submit of the application jar to a standalone cluster (Master, Worker, GPUs from getGpusResources.sh)"
  standalone 1
  echo "== the same on 2 pretend hosts (a Worker each, SPARKCCL_HOST_ID): the GPU ranks all-reduce across hosts over TCP"
  standalone 2
  # The same job on one host and across two must train to the same model (the sums' order differs, so the
  # last digits may too: compare the printed loss and accuracy).
  one=$(grep -o "whole training set: loss [0-9.]*, accuracy [0-9.]*" "$out/standalone-driver.log")
  two=$(grep -o "whole training set: loss [0-9.]*, accuracy [0-9.]*" "$out/standalone-2hosts-driver.log")
  if [ -n "$one" ] && [ "$one" = "$two" ]; then echo "TWO HOSTS MATCH ONE HOST: $two"
  else echo "TWO HOSTS DIFFER FROM ONE HOST: '$two' against '$one'"; fi
fi

if [ "$what" = all ] || [ "$what" = ipc ]; then
  # ipc's tests put up to 8 ranks of one JVM on a GPU: each needs a hardware queue of its own (see
  # gpu-test.sh). The Spark runs above leave CUDA's default, as users have it.
  CUDA_DEVICE_MAX_CONNECTIONS=32 junit ipc "$app/ipc-test-classes"
fi

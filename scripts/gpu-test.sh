#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, with the folder scripts/gpu-package.sh filled
# (default .device) carried along: the gpu-tagged JUnit tests, then sparkccl's GPU AllReduce
# benchmark and NCCL's (through PyTorch) side by side. Full logs go to $OUT (or ./gpu-out); a short
# table is printed last.
# Usage: bash .device/gpu-test.sh [tests|bench|all|select|twolevel|vmm|vmm-kill|...] [DEVICE_DIR]
set -uo pipefail
what=${1:-all}
dev=${2:-.device}
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# A hung collective must fail in seconds here, not after the 10-minute default.
export SPARKCCL_TIMEOUT_MS=${SPARKCCL_TIMEOUT_MS:-15000}
# Up to 8 ranks of one JVM share a GPU in the tests: each needs its own hardware work queue, or a
# persistent kernel can queue behind a peer's that waits for it (CUDA's default is 8 queues).
export CUDA_DEVICE_MAX_CONNECTIONS=32
if [ ! -x /tmp/jre/bin/java ]; then
  tar xzf "$dev/jre.tgz" -C /tmp
fi
java=/tmp/jre/bin/java
cp="$dev/test-classes:$(ls "$dev"/lib/*.jar | tr '\n' ':')$dev/junit-console.jar"
# Exactly the JVM options Spark gives its executors (scripts/spark-jvm-options), nothing of our own:
# a flag only this script added once hid a failure of every Spark executor on GPUs.
mapfile -t jvm < scripts/spark-jvm-options
{ nvidia-smi; nvidia-smi topo -m; } > "$out/nvidia-smi.txt" 2>&1
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
echo "== $ngpu GPU(s)"

if [ "$what" = all ] || [ "$what" = tests ]; then
  echo "== JUnit (gpu tag)"
  start=$(date +%s)
  timeout "${JUNIT_TIMEOUT:-420}" "$java" "${jvm[@]}" -cp "$cp" org.junit.platform.console.ConsoleLauncher execute \
    --scan-class-path "$dev/test-classes" --include-tag gpu --details=tree --disable-banner --disable-ansi-colors \
    --reports-dir "$out/junit" > "$out/junit.log" 2>&1
  rc=$?
  echo "junit exit $rc after $(( $(date +%s) - start )) s"
  grep -E "tests (successful|failed|aborted|skipped)|WRONG|✘|✔" "$out/junit.log" | head -40
  # The first stack trace, in short.
  grep -m1 -B2 -A25 -E "^\s+=> |Exception in thread" "$out/junit.log" | grep -vE "^\s+at (java|jdk|org\.junit)\." | head -30
fi

if [ "$what" = select ]; then
  # Only the gpu-tagged tests named in $SELECT (classes, or Class#method), e.g.
  # SELECT="org.sparkccl.tools.reliability.GpuSoakTest org.sparkccl.tools.multiprocess.GpuKillTrialsTest".
  echo "== JUnit (selected: ${SELECT:-})"
  selectors=()
  for s in ${SELECT:-}; do
    case "$s" in *#*) selectors+=(--select-method "$s") ;; *) selectors+=(--select-class "$s") ;; esac
  done
  start=$(date +%s)
  # TEST_PROPS: the tests' own settings (-Dsparkccl.killTrials=.., -Dsparkccl.gpuSoakCalls=..), not JVM flags.
  timeout "${JUNIT_TIMEOUT:-420}" "$java" "${jvm[@]}" ${TEST_PROPS:-} -cp "$cp" org.junit.platform.console.ConsoleLauncher execute \
    --class-path "$dev/test-classes" "${selectors[@]}" --include-tag gpu --details=tree --disable-banner \
    --disable-ansi-colors --reports-dir "$out/junit" > "$out/junit.log" 2>&1
  echo "junit exit $? after $(( $(date +%s) - start )) s"
  grep -E "tests (successful|failed|aborted|skipped)|WRONG|✘|✔|random collectives|GPU memory in use|trial |MEASURED|first sample" "$out/junit.log" | cut -c1-300 | head -90
  grep -m1 -B2 -A25 -E "^\s+=> |Exception in thread" "$out/junit.log" | grep -vE "^\s+at (java|jdk|org\.junit)\." | head -30
fi

bench() { # label, env..., then args after --
  local label=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  echo "== sparkccl $label" >> "$out/bench.log"
  env "${envs[@]}" timeout 240 "$java" "${jvm[@]}" -cp "$cp" org.sparkccl.tools.perf.GpuAllReduceBench "$@" \
    > "$out/bench-$label.log" 2>&1
  echo "exit $?" >> "$out/bench-$label.log"
}

if [ "$what" = stream ]; then
  # Stream-ordered calls and CUDA graphs: their tests, the collective tests the kernel change touches, the
  # trainer's (its MLP steps overlap two bucket all-reduces with the backward pass), then the three modes
  # timed (2 ranks as threads: on one GPU they run concurrently) and allreduce-perf -z 0.
  echo "== JUnit (stream-ordered, collectives)"
  start=$(date +%s)
  timeout "${JUNIT_TIMEOUT:-150}" "$java" "${jvm[@]}" -cp "$cp" org.junit.platform.console.ConsoleLauncher execute \
    --class-path "$dev/test-classes" --select-class org.sparkccl.ipc.gpu.GpuStreamOrderedTest \
    --select-class org.sparkccl.ipc.gpu.GpuCollectivesTest --select-class org.sparkccl.train.gpu.GpuModelTrainerTest \
    --include-tag gpu --details=tree --disable-banner \
    --disable-ansi-colors --reports-dir "$out/junit" > "$out/junit.log" 2>&1
  echo "junit exit $? after $(( $(date +%s) - start )) s"
  grep -E "tests (successful|failed|aborted|skipped)|WRONG|✘|✔" "$out/junit.log" | head -40
  grep -m1 -B2 -A25 -E "^\s+=> |Exception in thread" "$out/junit.log" | grep -vE "^\s+at (java|jdk|org\.junit)\." | head -30
  bench modes -- -b 8 -e 128M -f 4 -n 50 -w 10 --threads --ranks-per-gpu 2
  timeout 60 "$java" "${jvm[@]}" -cp "$cp" org.sparkccl.tools.perf.AllReducePerf --device gpu -g 1 --ranks-per-gpu 2 \
    -b 8 -e 8M -f 32 -n 20 -w 5 -c 1 -z 0 > "$out/allreduce-perf-z0.log" 2>&1; echo "exit $?" >> "$out/allreduce-perf-z0.log"
  cat "$out/allreduce-perf-z0.log"
  cat "$out/bench-modes.log"
fi

if [ "$what" = floors ] || [ "$what" = latency ]; then
  # Issue 25: the floors a small call builds on (GpuFloorsBench: a null kernel through JCuda and through JNA,
  # a doorbell round trip to a running kernel, a flag round trip between two blocks; gpu_floors.py: the
  # null kernel through PyTorch), measured in the same run as the small calls.
  echo "== floors"
  timeout 120 "$java" "${jvm[@]}" -cp "$cp" org.sparkccl.tools.perf.GpuFloorsBench -n 2000 -w 500 > "$out/floors-java.log" 2>&1
  echo "exit $?" >> "$out/floors-java.log"
  timeout 120 python3 "$dev/gpu_floors.py" 2000 > "$out/floors-torch.log" 2>&1
  echo "exit $?" >> "$out/floors-torch.log"
  grep -hE "^FLOOR|^#|exit|Exception|rror" "$out/floors-java.log" "$out/floors-torch.log" | cut -c1-220
fi

if [ "$what" = latency ]; then
  # 2 ranks as threads of one JVM on one GPU: blocking, stream-ordered and graph-replayed, float32 and
  # bfloat16, 8 B - 4 MB (LAT_SETS: extra runs as "label:VAR=value,VAR=value" words).
  for d in float bfloat16; do
    bench "lat-$d" -- -b 8 -e 4M -f 4 -n 200 -w 20 -g 1 --ranks-per-gpu 2 --threads -d $d
    echo "---- latency $d"; grep -vE "^# settings" "$out/bench-lat-$d.log" | cut -c1-200
  done
  for set in ${LAT_SETS:-}; do
    label=${set%%:*}; vars=${set#*:}
    IFS=, read -r -a envs <<< "$vars"
    bench "lat-$label" "${envs[@]}" -- -b 8 -e 4M -f 4 -n 200 -w 20 -g 1 --ranks-per-gpu 2 --threads
    echo "---- latency $label ($vars)"; grep -vE "^# settings" "$out/bench-lat-$label.log" | cut -c1-200
  done
fi

if [ "$what" = twolevel ]; then
  # Across hosts (issue 16): the two-level GPU tests (4 ranks as threads on 2 pretend hosts; every type
  # and op, the other collectives, uneven layouts, a mismatch), a rank killed on a pretend host (4
  # processes), then allreduce-perf on 2 pretend hosts of one GPU rank each against one host.
  echo "== JUnit (two-level GPU)"
  start=$(date +%s)
  timeout "${JUNIT_TIMEOUT:-170}" "$java" "${jvm[@]}" -cp "$cp" org.junit.platform.console.ConsoleLauncher execute \
    --class-path "$dev/test-classes" --select-class org.sparkccl.ipc.gpu.GpuTwoLevelTest \
    --select-method org.sparkccl.tools.multiprocess.GpuKillTrialsTest#aKilledGpuRankOnAnotherPretendHostIsNamed \
    --include-tag gpu --details=tree --disable-banner --disable-ansi-colors \
    --reports-dir "$out/junit" > "$out/junit.log" 2>&1
  echo "junit exit $? after $(( $(date +%s) - start )) s"
  grep -E "tests (successful|failed|aborted|skipped)|WRONG|✘|✔|ranks: host|failed as it should|trial [0-9]" "$out/junit.log" | cut -c1-400 | head -60
  grep -m1 -B2 -A25 -E "^\s+=> |Exception in thread" "$out/junit.log" | grep -vE "^\s+at (java|jdk|org\.junit)\." | head -30
  for h in 2 0; do
    SPARKCCL_DEBUG=INFO timeout 45 "$java" "${jvm[@]}" -cp "$cp" org.sparkccl.tools.perf.AllReducePerf --device gpu -g 2 \
      --pretend-hosts $h -b 8 -e 64M -f 4 -n 10 -w 3 -c 1 > "$out/allreduce-perf-hosts$h.log" 2>&1
    echo "exit $?" >> "$out/allreduce-perf-hosts$h.log"
    echo "---- allreduce-perf --device gpu -g 2 --pretend-hosts $h"
    grep -vE "^\[|INFO|^#  Rank" "$out/allreduce-perf-hosts$h.log" | head -30
    grep -E "via NET/Socket|via P2P|two-level|pretend|hosts" "$out/allreduce-perf-hosts$h.log" | cut -c1-300 | head -8
  done
  bench threads -- -b 8 -e 64M -f 4 -n 10 -w 3 -g 1 --ranks-per-gpu 2 --threads
  grep -v "^# settings" "$out/bench-threads.log"
fi

if [ "$what" = vmm ]; then
  # Issue 15 (GPU windows as CUDA virtual memory, shared by file descriptor): the owner-dies check, the
  # kill trials, the cross-process collectives, the thread collectives, then the other gpu-tagged tests;
  # each a JUnit run of its own, all within one deadline (VMM_SECONDS), so that one that runs long still
  # leaves the others' results.
  deadline=$(( $(date +%s) + ${VMM_SECONDS:-280} ))
  for cls in tools.multiprocess.GpuWindowOwnerDiesTest tools.multiprocess.GpuKillTrialsTest ipc.gpu.GpuCrossProcessTest \
      ipc.gpu.GpuCollectivesTest ipc.gpu.GpuForcedRingsTest ipc.gpu.GpuStreamOrderedTest ipc.gpu.GpuLl128Test \
      train.gpu.GpuModelTrainerTest; do
    name=${cls##*.}
    left=$(( deadline - $(date +%s) ))
    if [ "$left" -le 10 ]; then echo "== $name: no time left"; continue; fi
    start=$(date +%s)
    timeout "$left" "$java" "${jvm[@]}" -cp "$cp" org.junit.platform.console.ConsoleLauncher execute \
      --class-path "$dev/test-classes" --select-class "org.sparkccl.$cls" --include-tag gpu --details=tree \
      --disable-banner --disable-ansi-colors --reports-dir "$out/junit-$name" > "$out/junit-$name.log" 2>&1
    echo "== $name: exit $? after $(( $(date +%s) - start )) s"
    grep -E "tests (successful|failed|aborted)|MEASURED|✘" "$out/junit-$name.log" | head -12
    grep -m1 -B2 -A20 -E "^\s+=> |Exception in thread" "$out/junit-$name.log" | grep -vE "^\s+at (java|jdk|org\.junit)\." | head -24
  done
fi

if [ "$what" = vmm-kill ]; then
  # Where the survivor's CUDA context still goes (issue 15): kill trials of 16 MB Simple calls only, with GPU
  # windows as CUDA virtual memory and through CUDA IPC, then the default mix; the kernel log's Xid lines last.
  kill_trials() { # label, trials, counts, env...
    local label=$1 trials=$2 counts=$3; shift 3
    local start=$(date +%s)
    env "$@" timeout "${KILL_SECONDS:-80}" "$java" "${jvm[@]}" -Dsparkccl.killTrials="$trials" \
      -Dsparkccl.killCounts="$counts" -cp "$cp" org.junit.platform.console.ConsoleLauncher execute \
      --class-path "$dev/test-classes" --select-class org.sparkccl.tools.multiprocess.GpuKillTrialsTest \
      --include-tag gpu --details=tree --disable-banner --disable-ansi-colors > "$out/kill-$label.log" 2>&1
    echo "== kill trials $label: exit $? after $(( $(date +%s) - start )) s"
    grep -E "^trial [0-9]+: SURVIVOR|MEASURED" "$out/kill-$label.log" | cut -c1-230
  }
  kill_trials simple-cumem 10 4194307 SPARKCCL_CUMEM_ENABLE=1
  kill_trials simple-ipc 10 4194307 SPARKCCL_CUMEM_ENABLE=0
  KILL_SECONDS=110 kill_trials mix-cumem 20 "" SPARKCCL_CUMEM_ENABLE=1
  { dmesg 2>&1 | grep -iE "xid|nvrm" | tail -40; } > "$out/dmesg.txt" 2>&1
  echo "== kernel log (Xid)"; tail -20 "$out/dmesg.txt"
fi

if [ "$what" = quick ]; then
  bench auto -- -b 8 -e 64M -f 8 -n 20 -w 5
  bench threads -- -b 8 -e 64M -f 8 -n 20 -w 5 --threads
  for f in "$out"/bench-*.log; do echo "---- $(basename "$f")"; cat "$f"; done
fi

if [ "$what" = ll128 ]; then
  # LL128: its tests, the LL and Simple matrices (same kernel file), then LL vs LL128 vs Simple per size
  # on the ring (one-shot off), 2 ranks as threads on GPU 0 (ranks share it where there is one GPU).
  echo "== JUnit (LL128, and the P2P LL / Simple matrices)"
  start=$(date +%s)
  timeout "${JUNIT_TIMEOUT:-150}" "$java" "${jvm[@]}" -cp "$cp" org.junit.platform.console.ConsoleLauncher execute \
    --select-class org.sparkccl.ipc.gpu.GpuLl128Test \
    --select-method org.sparkccl.ipc.gpu.GpuCollectivesTest#everyTypeAndOpOnTwoGpusP2pLl \
    --select-method org.sparkccl.ipc.gpu.GpuCollectivesTest#everyTypeAndOpOnTwoGpusP2pSimple \
    --include-tag gpu --details=tree --disable-banner --disable-ansi-colors \
    --reports-dir "$out/junit" > "$out/junit.log" 2>&1
  echo "junit exit $? after $(( $(date +%s) - start )) s"
  grep -E "tests (successful|failed|aborted|skipped)|WRONG|✘|LL128:" "$out/junit.log" | head -40
  grep -m1 -B2 -A25 -E "^\s+=> |Exception in thread" "$out/junit.log" | grep -vE "^\s+at (java|jdk|org\.junit)\." | head -30
  for p in LL LL128 Simple; do
    bench "ring-$p" SPARKCCL_ALGO=Ring SPARKCCL_PROTO=$p -- -b 1K -e 32M -f 2 -n 20 -w 5 -g 1 --ranks-per-gpu 2 --threads
  done
  bench auto -- -b 1K -e 32M -f 4 -n 20 -w 5 -g 1 --ranks-per-gpu 2 --threads
  for f in "$out"/bench-*.log; do echo "---- $(basename "$f")"; grep -v "^# settings" "$f"; done
fi

if [ "$what" = ll128-verify ]; then
  # Every gpu-tagged test of this package, then the three protocols on the ring again (one call, so
  # that their ratios compare), 2 ranks as threads on GPU 0.
  echo "== JUnit (gpu tag)"
  start=$(date +%s)
  timeout "${JUNIT_TIMEOUT:-150}" "$java" "${jvm[@]}" -cp "$cp" org.junit.platform.console.ConsoleLauncher execute \
    --scan-class-path "$dev/test-classes" --include-tag gpu --details=tree --disable-banner --disable-ansi-colors \
    --reports-dir "$out/junit" > "$out/junit.log" 2>&1
  echo "junit exit $? after $(( $(date +%s) - start )) s"
  grep -E "tests (successful|failed|aborted|skipped)|WRONG|✘" "$out/junit.log" | head -40
  grep -m1 -B2 -A25 -E "^\s+=> |Exception in thread" "$out/junit.log" | grep -vE "^\s+at (java|jdk|org\.junit)\." | head -30
  bench ring-LL128 SPARKCCL_ALGO=Ring SPARKCCL_PROTO=LL128 -- -b 1K -e 32M -f 2 -n 20 -w 5 -g 1 --ranks-per-gpu 2 --threads
  for p in LL Simple; do
    bench "ring-$p" SPARKCCL_ALGO=Ring SPARKCCL_PROTO=$p -- -b 1K -e 32M -f 4 -n 20 -w 5 -g 1 --ranks-per-gpu 2 --threads
  done
  for f in "$out"/bench-*.log; do echo "---- $(basename "$f")"; grep -v "^# settings" "$f"; done
fi

if [ "$what" = sweep ]; then
  # Channel counts for large messages, P2P and staged; the default is what the tuner picks.
  # (Each size's first call is checked against a float64 reference made in Java: big sizes cost seconds.)
  # Small sizes three ways: auto (one-shot up to the threshold), ring only, one-shot forced up to 1 MB.
  bench small-auto -- -b 8 -e 1M -f 2 -n 200 -w 50
  bench small-ring SPARKCCL_ALGO=Ring -- -b 8 -e 1M -f 2 -n 200 -w 50
  bench small-1shot SPARKCCL_ALGO=OneShot SPARKCCL_ONESHOT_THRESHOLD=1M -- -b 8 -e 1M -f 2 -n 200 -w 50
  for c in ${SWEEP_CHANNELS:-32 48 64}; do
    bench "p2p-ch$c" SPARKCCL_NCHANNELS=$c -- -b 128M -e 256M -f 2 -n 10 -w 3
  done
  for f in "$out"/bench-*.log; do echo "---- $(basename "$f")"; grep -v "^# settings" "$f"; done
fi

if [ "$what" = resident ]; then
  # Small calls through the resident kernel against a launch per call, 2 ranks and 4 (threads).
  bench resident -- -b 8 -e 256K -f 4 -n 200 -w 50
  bench launched SPARKCCL_RESIDENT=0 -- -b 8 -e 256K -f 4 -n 200 -w 50
  bench threads4 -- -b 8 -e 256K -f 8 -n 100 -w 20 --threads --ranks-per-gpu 2
  for f in "$out"/bench-*.log; do echo "---- $(basename "$f")"; grep -v "^# settings" "$f"; done
fi

if [ "$what" = all ] || [ "$what" = bench ]; then
  echo "== benchmarks"
  bench auto -- -b 8 -e 256M -f 2 -n 100 -w 20
  bench staged SPARKCCL_P2P_DISABLE=1 -- -b 1M -e 128M -f 2 -n 10 -w 3
  timeout 200 python3 "$dev/nccl_allreduce_bench.py" --label default --iters 100 --warmup 20 \
    --json "$out/nccl-default.json" \
    > "$out/nccl-default.log" 2>&1
  NCCL_P2P_DISABLE=1 timeout 150 python3 "$dev/nccl_allreduce_bench.py" --label p2p-disabled --min 1048576 \
    --max 134217728 --iters 10 --json "$out/nccl-p2p-disabled.json" > "$out/nccl-p2p-disabled.log" 2>&1
  # Small calls with a kernel launched per call instead of the resident kernel.
  bench small-launched SPARKCCL_RESIDENT=0 -- -b 8 -e 64K -f 8 -n 100 -w 20
  # Where one-shot stops paying: forced one-shot against the ring from 256 KB to 8 MB.
  bench mid-1shot SPARKCCL_ALGO=OneShot SPARKCCL_ONESHOT_THRESHOLD=8M -- -b 256K -e 8M -f 2 -n 50 -w 10
  bench mid-ring SPARKCCL_ALGO=Ring -- -b 256K -e 8M -f 2 -n 50 -w 10
  # The user's tool: nccl-tests' columns, one process per GPU, every size checked.
  timeout 120 "$java" "${jvm[@]}" -cp "$cp" org.sparkccl.tools.perf.AllReducePerf --device gpu -g "$ngpu" \
    -b 8 -e 64M -f 8 -n 20 -w 5 -c 1 > "$out/allreduce-perf-gpu.log" 2>&1
  echo "exit $?" >> "$out/allreduce-perf-gpu.log"
  # 4 ranks on the 2 GPUs: threads of one JVM (timed), and processes (time-sliced: correctness only).
  bench threads4 -- -b 8 -e 64M -f 8 -n 20 -w 5 --threads --ranks-per-gpu 2
  timeout 120 "$java" "${jvm[@]}" -cp "$cp" org.sparkccl.tools.perf.AllReducePerf --device gpu -g "$ngpu" \
    --ranks-per-gpu 2 -b 8 -e 4M -f 16 -n 5 -w 2 -c 1 -d all -o sum > "$out/allreduce-perf-gpu-4ranks.log" 2>&1
  echo "exit $?" >> "$out/allreduce-perf-gpu-4ranks.log"
  if [ "$what" = all ]; then
    bench ll SPARKCCL_PROTO=LL -- -b 8 -e 4M -f 4 -n 20 -w 5
    bench simple SPARKCCL_PROTO=Simple -- -b 8 -e 256M -f 4 -n 20 -w 5
    bench threads -- -b 8 -e 64K -f 8 -n 50 -w 10 --threads
  fi
  for f in "$out"/bench-*.log "$out"/nccl-*.log "$out"/allreduce-perf-gpu*.log; do echo "---- $(basename "$f")"; cat "$f"; done
  echo "== sparkccl vs NCCL (float sum, $ngpu GPUs)"
  python3 "$dev/gpu_report.py" "$out"
fi

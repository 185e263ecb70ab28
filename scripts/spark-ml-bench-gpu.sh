#!/usr/bin/env bash
# spark-ml-bench on the GPU machine (no Maven, Java or network there): from the repository root, after
# every part made by scripts/spark-gpu-package.sh reached .device/spark (back-to-back device calls).
# sparkccl on 1 GPU rank against MLlib on local[4], then 4 ranks sharing the GPU (sparkccl only).
# Results (CSV, stdout, logs) under $OUT; redraw the chart here: bin/spark-ml-bench --from-csv FILE --plot PNG.
# Not yet run there (issue 26: the session's device time ran out after the first part's upload).
set -uo pipefail
b=/tmp/spark-bundle
if [ ! -x "$b/jre/bin/java" ]; then cat .device/spark/part-* | xz -d | tar x -C /tmp || cat .device/spark/part-* | python3 -c 'import lzma,sys; sys.stdout.buffer.write(lzma.decompress(sys.stdin.buffer.read()))' | tar x -C /tmp; fi
mapfile -t jvm < scripts/spark-jvm-options
app=$PWD/.device/spark/app
cp="$b/jars/*:$app/*"
export SPARK_LOCAL_IP=127.0.0.1 SPARK_HOME=/tmp/spark-home SPARK_SCALA_VERSION=2.13 NCCL_NVLS_ENABLE=0
mkdir -p $SPARK_HOME/jars
nvidia-smi -L; nproc
echo "== 1 GPU rank (sparkccl) vs MLlib, local[4]"
timeout 330 $b/jre/bin/java "${jvm[@]}" -cp "$cp" org.sparkccl.tools.spark.SparkMlBench --ranks 1 --master 'local[4]' --csv $OUT/gpu-1rank.csv > $OUT/out-1rank.txt 2> $OUT/err-1rank.txt; echo "exit $?"
grep -E "fit|loss|faster|rows|cores" $OUT/out-1rank.txt
grep -h "training steps run\|ready on" $OUT/err-1rank.txt | sort | uniq -c | head -5
echo "== 4 ranks on the GPU (allowSharedGpu), sparkccl only"
timeout 150 $b/jre/bin/java "${jvm[@]}" -Dspark.sparkccl.allowSharedGpu=true -cp "$cp" org.sparkccl.tools.spark.SparkMlBench --ranks 4 --methods sparkccl --csv $OUT/gpu-4ranks.csv > $OUT/out-4ranks.txt 2> $OUT/err-4ranks.txt; echo "exit $?"
grep -E "fit|loss|rows" $OUT/out-4ranks.txt
grep -h "training steps run\|ready on" $OUT/err-4ranks.txt | sed 's/rank [0-9]/rank N/g' | sort | uniq -c | head -5
tail -c 3000 $OUT/err-1rank.txt | grep -v "^\s*at " | tail -15

#!/usr/bin/env bash
# Two builds of allreduce-perf side by side on the CPU, in interleaved rounds (A, B, A, B, ...), so that
# a change that should not move the numbers (a restructure) can be checked against noise of the same run.
# Usage: scripts/cpu-perf-ab.sh 'A_CLASSPATH' A_MAIN_CLASS 'B_CLASSPATH' B_MAIN_CLASS [ROUNDS] [JAVA]
#   e.g. scripts/cpu-perf-ab.sh '/tmp/old/*' org.sparkccl.ipc.perf.AllReducePerf \
#        'tools/target/tools-0.1.0-SNAPSHOT.jar:tools/target/lib/*' org.sparkccl.tools.perf.AllReducePerf
# Prints one line per (rank count, size, round, build) with the out-of-place and in-place times in us,
# then the median of each over the rounds and B / A.
set -euo pipefail
a_cp=$1 a_main=$2 b_cp=$3 b_main=$4
rounds=${5:-3}
java=${6:-java}
sizes=(1024 1048576 16777216)
declare -A times
for g in 2 4; do
  for round in $(seq "$rounds"); do
    for build in A B; do
      if [ "$build" = A ]; then cp=$a_cp main=$a_main; else cp=$b_cp main=$b_main; fi
      # -c 1: every element checked against the float64 reference; a wrong one fails the run.
      out=$("$java" -cp "$cp" "$main" -g "$g" --device cpu -b 1K -e 16M -f 4 -n 50 -w 20 -c 1 -d float -o sum 2>&1) || {
        echo "build $build, $g ranks failed:"; echo "$out"; exit 1; }
      for size in "${sizes[@]}"; do
        line=$(awk -v s="$size" '$1 == s {print $6, $10, $9, $13}' <<< "$out")
        read -r oop ip wrong1 wrong2 <<< "$line"
        [ "$wrong1" = 0 ] && [ "$wrong2" = 0 ] || { echo "build $build, $g ranks, $size B: wrong elements"; exit 1; }
        echo "g=$g size=$size round=$round build=$build oop_us=$oop ip_us=$ip"
        times[$g,$size,$build,oop]+="$oop "
        times[$g,$size,$build,ip]+="$ip "
      done
    done
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
echo
echo "| ranks | size | A out-of-place us | B out-of-place us | B/A | A in-place us | B in-place us | B/A |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for g in 2 4; do
  for size in "${sizes[@]}"; do
    ao=$(median <<< "${times[$g,$size,A,oop]}"); bo=$(median <<< "${times[$g,$size,B,oop]}")
    ai=$(median <<< "${times[$g,$size,A,ip]}"); bi=$(median <<< "${times[$g,$size,B,ip]}")
    awk -v g="$g" -v s="$size" -v ao="$ao" -v bo="$bo" -v ai="$ai" -v bi="$bi" \
      'BEGIN {printf "| %d | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", g, s, ao, bo, bo/ao, ai, bi, bi/ai}'
  done
done

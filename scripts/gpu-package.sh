#!/usr/bin/env bash
# Packages what scripts/gpu-test.sh needs on the GPU machine (which has no Java, no Maven and no
# network) into a git-ignored folder: the ipc and core jars with their runtime dependencies (JCuda's
# natives trimmed to the driver binding), the ipc test classes, JUnit's console launcher and a
# trimmed JRE. Everything must stay under the 64 MiB a device call may carry.
# Usage: scripts/gpu-package.sh [DEST]      (default: .device under the repository root)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# Absolute: the Maven runs below work in each module's folder, where a relative DEST would scatter the
# jars (scripts/gpu-package.sh .device once left lib/ without JCuda's jars, in collective-core/.device).
mkdir -p "${1:-$root/.device}"
dest=$(cd "${1:-$root/.device}" && pwd)
junit_console_version=1.14.4
cd "$root"
rm -rf "$dest/lib" "$dest/test-classes"
mkdir -p "$dest/lib" "$dest/test-classes"
# Package and copy in one reactor run: ipc's dependency on collective-core then resolves to this
# build's, never to a stale copy in ~/.m2 (which once lacked a new dependency of collective-core).
# The GPU engine's runtime jars (ipc's dependencies: no Spark, which would not fit one run), then
# sparkccl's jars up to tools (allreduce-perf, the GPU benchmark, the GPU training kernels) and the
# two libraries tools and train add that the GPU runs use (picocli, JFreeChart).
mvn -o -B -q package -pl tools -am -DskipTests
mvn -o -B -q package dependency:copy-dependencies -pl ipc -am -DskipTests -DincludeScope=runtime -DoutputDirectory="$dest/lib"
cp collective-core/target/collective-core-*.jar ipc/target/ipc-*.jar train/target/train-*.jar \
   tools/target/tools-*.jar "$dest/lib/"
cp tools/target/lib/picocli-*.jar tools/target/lib/jfreechart-*.jar "$dest/lib/"
rm -f "$dest"/lib/*-tests.jar "$dest"/lib/*-sources.jar
# JCuda's natives jar carries 26 MB of libraries; the GPU code needs only the driver binding.
natives=$(ls "$dest"/lib/jcuda-natives-*-linux-x86_64.jar)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && unzip -q "$natives" 'lib/libJCudaDriver-*' 'META-INF/*' && rm -f "$natives" && zip -q -r "$natives" .)
for m in collective-core ipc train tools; do cp -r $m/target/test-classes/. "$dest/test-classes/"; done
# The Spark tests (train, tools) need Spark, which this package leaves out: spark-gpu-package.sh carries them.
rm -rf "$dest/test-classes/org/sparkccl/spark"
console="$HOME/.m2/repository/org/junit/platform/junit-platform-console-standalone/$junit_console_version/junit-platform-console-standalone-$junit_console_version.jar"
if [ ! -f "$console" ]; then
  mvn -B -q dependency:get -Dartifact="org.junit.platform:junit-platform-console-standalone:$junit_console_version"
fi
cp "$console" "$dest/junit-console.jar"
if [ ! -f "$dest/jre.tgz" ]; then
  # jdk.incubator.vector: Spark's JVM options (scripts/spark-jvm-options) add that module. java.desktop:
  # allreduce-perf draws with JFreeChart (java.beans), and failed without it on the GPU machine.
  bash "$root/scripts/make-jre.sh" "$dest/jre.tgz" jdk.management,jdk.incubator.vector,java.desktop
fi
# The launch floor from C++ (no JVM): beside GpuFloorsBench's JCuda and JNA numbers. Built where nvcc is.
if command -v nvcc > /dev/null; then
  nvcc -O2 -arch=sm_90 -o "$dest/launch_floor" scripts/launch_floor.cu
fi
cp scripts/gpu-test.sh scripts/gpu-i25-final.sh scripts/nccl_allreduce_bench.py scripts/gpu_report.py scripts/gpu_floors.py "$dest/"
du -sh "$dest"

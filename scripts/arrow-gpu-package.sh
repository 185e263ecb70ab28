#!/usr/bin/env bash
# Packages arrow-bridge's gpu-tagged tests (pinned-memory GradientBuffers reduced by GPU
# communicators) for the GPU machine, into .device/arrow (git-ignored), with run.sh beside them.
# Hadoop's jars stay behind (50 MB; the GPU tests do not touch checkpoints). The JRE is the one
# scripts/gpu-package.sh puts at .device/jre.tgz.
# Usage: scripts/arrow-gpu-package.sh, then on the device: run `bash .device/arrow/run.sh`
#        carrying .device/arrow and .device/jre.tgz.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=$root/.device/arrow
junit_console_version=1.14.4
cd "$root"
rm -rf "$dest"
mkdir -p "$dest/lib" "$dest/test-classes"
# One reactor run: the sparkccl modules' dependencies resolve to this build's poms, not to stale
# copies in ~/.m2.
mvn -o -B -q package dependency:copy-dependencies -pl arrow-bridge -am -DskipTests -DincludeScope=runtime \
    -DoutputDirectory="$dest/lib"
# arrow-bridge knows no CUDA: its GPU test brings the GPU engine (ipc, JCuda) from ipc's runtime jars.
mvn -o -B -q package dependency:copy-dependencies -pl ipc -am -DskipTests -DincludeScope=runtime -DoutputDirectory="$dest/lib"
rm -f "$dest"/lib/hadoop-client-* "$dest"/lib/snappy-java-* "$dest"/lib/commons-logging-* "$dest"/lib/jsr305-* \
      "$dest"/lib/collective-core-*.jar "$dest"/lib/ipc-*.jar
cp collective-core/target/collective-core-*.jar ipc/target/ipc-*.jar arrow-bridge/target/arrow-bridge-*.jar "$dest/lib/"
rm -f "$dest"/lib/*-tests.jar "$dest"/lib/*-sources.jar
cp "$HOME/.m2/repository/org/slf4j/slf4j-simple/2.0.20/slf4j-simple-2.0.20.jar" "$dest/lib/"
# JCuda's natives jar carries 26 MB of libraries; the GPU code needs only the driver binding.
natives=$(ls "$dest"/lib/jcuda-natives-*-linux-x86_64.jar)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && unzip -q "$natives" 'lib/libJCudaDriver-*' 'META-INF/*' && rm -f "$natives" && zip -q -r "$natives" .)
cp -r arrow-bridge/target/test-classes/. "$dest/test-classes/"
console="$HOME/.m2/repository/org/junit/platform/junit-platform-console-standalone/$junit_console_version/junit-platform-console-standalone-$junit_console_version.jar"
if [ ! -f "$console" ]; then
  mvn -B -q dependency:get -Dartifact="org.junit.platform:junit-platform-console-standalone:$junit_console_version"
fi
cp "$console" "$dest/junit-console.jar"
cat > "$dest/run.sh" <<'RUN'
#!/usr/bin/env bash
# On the GPU machine, from the repository root: arrow-bridge's gpu-tagged tests; log in $OUT (or ./gpu-out).
set -uo pipefail
out=${OUT:-$PWD/gpu-out}
d=.device/arrow
mkdir -p "$out" /tmp/sparkccl-arrow
[ -x /tmp/jre/bin/java ] || tar xzf .device/jre.tgz -C /tmp
cp="$d/test-classes:$(ls $d/lib/*.jar | tr '\n' ':')$d/junit-console.jar"
nvidia-smi -L
export SPARKCCL_TIMEOUT_MS=${SPARKCCL_TIMEOUT_MS:-30000}
mapfile -t jvm < scripts/spark-jvm-options # what Spark gives executors, nothing more
timeout 300 /tmp/jre/bin/java "${jvm[@]}" -cp "$cp" \
  org.junit.platform.console.ConsoleLauncher execute --scan-class-path "$d/test-classes" --include-tag gpu \
  --details=tree --disable-banner --disable-ansi-colors > "$out/junit-arrow.log" 2>&1
echo "junit exit $?"
grep -E "MEASURED|tests (successful|failed|aborted|skipped)|✘|SKIPPED" "$out/junit-arrow.log" | head -40
RUN
chmod +x "$dest/run.sh"
du -sh "$dest"

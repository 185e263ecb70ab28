#!/usr/bin/env bash
# Packs what scripts/spark-gpu-test.sh needs on the GPU machine (no Java, no Maven, no network there):
# - OUTDIR/part-NN: Spark's runtime class path as the spark-plugin module resolves it (minus
#   rocksdbjni), JUnit's console launcher and a JRE with the modules Spark uses; jars rewritten with
#   stored entries, tarred, xz-compressed and split into parts that fit one device call each (64 MiB a
#   call). Rebuilt only when that list of jars changes.
# - OUTDIR/app: sparkccl's jars and the spark-plugin and ipc test classes (a few MB);
# - OUTDIR/submit: the application jar users spark-submit (14 MB).
# Send part-00 and part-01 with back-to-back calls (a warm machine keeps what earlier calls left in
# ignored paths) and the last part with OUTDIR/app and OUTDIR/submit in the call that runs
# spark-gpu-test.sh.
# Usage: scripts/spark-gpu-package.sh [OUTDIR]   (default .device/spark)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/.device/spark}
part_bytes=${PART_BYTES:-45000000}
junit_console_version=1.14.4
cd "$root"
# One reactor run: sparkccl's modules resolve to this build's jars, never to stale copies in ~/.m2.
mvn -o -B -q package dependency:build-classpath -pl tools -am -DskipTests \
    -Dmdep.outputFile=target/runtime.classpath -Dmdep.includeScope=runtime
console="$HOME/.m2/repository/org/junit/platform/junit-platform-console-standalone/$junit_console_version/junit-platform-console-standalone-$junit_console_version.jar"
[ -f "$console" ] || mvn -B -q dependency:get -Dartifact="org.junit.platform:junit-platform-console-standalone:$junit_console_version"

# sparkccl's own jars and test classes go to $out/app (small, carried with the last call); Spark's
# and the other third-party jars with the JRE go to the parts, rebuilt only when that list changes.
app=$out/app
rm -rf "$app"; mkdir -p "$app"
deps=()
IFS=':' read -r -a entries <<< "$(cat tools/target/runtime.classpath)"
for e in "${entries[@]}" "$console"; do
  case "$e" in
    "$root"/*) cp -r "$e" "$app/" ;;                            # collective-core, ipc, arrow-bridge
    */rocksdbjni-*.jar) ;;                                    # only Spark's disk-backed UI store needs it
    *.jar) deps+=("$e") ;;
  esac
done
cp tools/target/tools-*[0-9T].jar "$app/"
# The Spark tests (spark-plugin's, and train's and tools' in package org.sparkccl.spark) in one folder;
# the tests that run without Spark (core, ipc, train, tools) in the other.
mkdir -p "$app/spark-plugin-test-classes" "$app/ipc-test-classes"
cp -r spark-plugin/target/test-classes/. "$app/spark-plugin-test-classes/"
for m in train tools; do
  [ -d $m/target/test-classes/org/sparkccl/spark ] && mkdir -p "$app/spark-plugin-test-classes/org/sparkccl/spark" \
    && cp -r $m/target/test-classes/org/sparkccl/spark/. "$app/spark-plugin-test-classes/org/sparkccl/spark/"
done
for m in collective-core ipc train tools; do cp -r $m/target/test-classes/. "$app/ipc-test-classes/"; done
rm -rf "$app/ipc-test-classes/org/sparkccl/spark"
# The application jar users spark-submit (docs/spark.md), for the standalone-cluster run.
rm -rf "$out/submit"; mkdir -p "$out/submit"
cp tools/target/sparkccl-spark-app-*.jar "$out/submit/"
stamp=$( (printf '%s\n' "${deps[@]}"; cat "$0") | sha256sum | cut -c1-16)
if [ -f "$out/parts.stamp" ] && [ "$(cat "$out/parts.stamp")" = "$stamp" ] && ls "$out"/part-* >/dev/null 2>&1; then
  echo "third-party parts unchanged ($stamp)"; du -sh "$app"; ls -la "$out"; exit 0
fi
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
b=$work/spark-bundle; mkdir -p "$b/jars"
cp "${deps[@]}" "$b/jars/"
python3 - "$b/jars" <<'PY'
# Trim native libraries to linux x86-64 (JCuda: the driver binding only) and rewrite every jar with
# stored entries: xz then compresses class files across jars much better than deflate inside each.
import os, sys, zipfile
d = sys.argv[1]
def keep(jar, name):
    base = os.path.basename(jar)
    if base.startswith('jcuda-natives'):
        return not name.startswith('lib/') or 'JCudaDriver' in name
    if base.startswith('zstd-jni'):
        return not (name.endswith(('.so', '.dll', '.dylib')) and 'linux/amd64' not in name)
    return True
for name in os.listdir(d):
    if not name.endswith('.jar'):
        continue
    p = os.path.join(d, name); q = p + '.tmp'
    with zipfile.ZipFile(p) as zi, zipfile.ZipFile(q, 'w', zipfile.ZIP_STORED) as zo:
        for info in zi.infolist():
            if keep(p, info.filename):
                ni = zipfile.ZipInfo(info.filename, date_time=info.date_time)
                ni.external_attr = info.external_attr
                zo.writestr(ni, zi.read(info))
    os.replace(q, p)
PY
bash scripts/make-jre.sh "$work/jre.tgz" java.desktop,java.security.jgss,java.security.sasl,jdk.security.auth,jdk.incubator.vector,java.scripting,java.net.http,jdk.jfr,java.instrument,jdk.management,java.compiler,jdk.naming.dns,java.rmi,jdk.httpserver,java.transaction.xa >/dev/null
tar xzf "$work/jre.tgz" -C "$b"
mkdir -p "$out"; rm -f "$out"/part-*
tar cf - -C "$work" spark-bundle | xz -T0 -6 | split -b "$part_bytes" -d - "$out/part-"
echo "$stamp" > "$out/parts.stamp"
ls -la "$out"; du -sh "$app"

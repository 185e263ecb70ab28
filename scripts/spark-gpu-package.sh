#!/usr/bin/env bash
# Packs what scripts/spark-gpu-test.sh needs on the GPU machine (no Java, no Maven, no network there):
# Spark's runtime class path as the spark-plugin module resolves it (minus rocksdbjni, which only
# Spark's disk-backed UI store needs), sparkccl's jars, the spark-plugin and ipc test classes, JUnit's
# console launcher and a JRE with the modules Spark uses; jars rewritten with stored entries, all of
# it tarred, xz-compressed and split into parts that fit one device call each (64 MiB a call).
# Send the parts with back-to-back calls (a warm machine keeps what earlier calls left in ignored
# paths); the last call runs spark-gpu-test.sh, which reassembles them.
# Usage: scripts/spark-gpu-package.sh [OUTDIR]   (default .device/spark; parts part-00, part-01, ...)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/.device/spark}
part_bytes=${PART_BYTES:-45000000}
junit_console_version=1.14.4
cd "$root"
# One reactor run: sparkccl's modules resolve to this build's jars, never to stale copies in ~/.m2.
mvn -o -B -q package dependency:build-classpath -pl spark-plugin -am -DskipTests \
    -Dmdep.outputFile=target/runtime.classpath -Dmdep.includeScope=runtime
console="$HOME/.m2/repository/org/junit/platform/junit-platform-console-standalone/$junit_console_version/junit-platform-console-standalone-$junit_console_version.jar"
[ -f "$console" ] || mvn -B -q dependency:get -Dartifact="org.junit.platform:junit-platform-console-standalone:$junit_console_version"

work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
b=$work/spark-bundle; mkdir -p "$b/jars" "$b/dirs"
IFS=':' read -r -a entries <<< "$(cat spark-plugin/target/runtime.classpath)"
for e in "${entries[@]}" spark-plugin/target/spark-plugin-*.jar "$console"; do
  case "$(basename "$e")" in
    rocksdbjni-*.jar|*-tests.jar|*-sources.jar) continue ;;
  esac
  [ -f "$e" ] && cp "$e" "$b/jars/"
done
# Test classes stay folders, named by module, so that the device script can scan them.
cp -r spark-plugin/target/test-classes "$b/dirs/spark-plugin-test-classes"
cp -r ipc/target/test-classes "$b/dirs/ipc-test-classes"
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
ls -la "$out"

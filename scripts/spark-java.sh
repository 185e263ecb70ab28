#!/usr/bin/env bash
# Runs a main class of the train or tools module with java -cp on an embedded Spark (no Spark install
# needed), with the JVM flags Spark 4 needs on Java 17. Used by bin/train and bin/spark-allreduce-bench:
#   scripts/spark-java.sh org.sparkccl.train.TrainJob --ranks 4
# Builds the modules first when their classes are missing or older than the sources.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
main_class="$1"
shift
classpath_file="tools/target/run.classpath"

needs_build() {
  [[ ! -f "$classpath_file" ]] && return 0
  [[ -n "$(find collective-core ipc arrow-bridge spark-plugin train tools -path '*/src/main/*' -newer "$classpath_file" -print -quit)" ]]
}

if needs_build; then
  echo "$(basename "$0"): building (mvn package -DskipTests) ..." >&2
  offline=""
  if [[ -d "$HOME/.m2/repository/org/apache/spark/spark-core_2.13" ]]; then offline="-o"; fi
  mvn $offline -B -q -pl tools -am -DskipTests package dependency:build-classpath \
      -Dmdep.outputFile=target/runtime.classpath -Dmdep.includeScope=runtime >&2
  echo "$root/tools/target/classes:$(cat tools/target/runtime.classpath)" > "$classpath_file"
fi

# The JVM options Spark 4.2 gives its driver and executors (JavaModuleOptions), one per line in
# scripts/spark-jvm-options, and nothing more: sparkccl must work in the JVM a Spark user has.
mapfile -t opens < "$root/scripts/spark-jvm-options"
export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"
exec java "${opens[@]}" ${JAVA_OPTS:-} -cp "$(cat "$classpath_file")" "$main_class" "$@"

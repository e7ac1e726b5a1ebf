#!/usr/bin/env bash
# JFR off vs recording, alternately in one session (issue 46): RDMA WRITE 64 B on mlx5 (RdmaWriteBench.write),
# once in a JVM without a recording and once in one started with -XX:StartFlightRecording (the JDK's default
# settings, which record peerdirect's org.peerdirect.* events too). None of those events is on the data path
# (they are page faults, invalidations, peer-client callbacks, firmware commands, IOMMU faults), so the two
# should agree within the noise; run on a quiet machine.
#   bench/jfr-ab.sh            (JFR_ROUNDS=3, JMH: -f 1 -wi 3 -i 5)
#   JFR_ROUNDS=5 bench/jfr-ab.sh -p driver=mlx4
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
for c in "${JAVA_HOME:-}" /usr/lib/jvm/*25* /usr/lib/jvm/*2[6-9]*; do
  [ -n "$c" ] && [ -x "$c/bin/java" ] && "$c/bin/java" -version 2>&1 | grep -qE 'version "(2[5-9]|[3-9][0-9])' && { export JAVA_HOME="$c"; break; }
done
[ -n "${JAVA_HOME:-}" ] || { echo "bench/jfr-ab.sh: no JDK 25 found (set JAVA_HOME)" >&2; exit 3; }
export MAVEN_OPTS="${MAVEN_OPTS:-} --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow"
[ -d bench/target/lib ] || mvn -B -q -ntp package -DskipTests -pl bench -am >/dev/null
OUT=$(mktemp -d "${TMPDIR:-/tmp}/peerdirect-jfr.XXXXXX")
run() {  # $1 = extra JVM args of the fork, then JMH args
  local extra="$1"; shift
  "$JAVA_HOME/bin/java" --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow \
    -cp "bench/target/classes:bench/target/lib/*" org.peerdirect.bench.BenchMain -f 1 -wi 3 -i 5 -p size=64 -p driver=mlx5 \
    -jvmArgsAppend "--enable-native-access=ALL-UNNAMED $extra" "$@" 'RdmaWriteBench.write$' 2>&1 | grep -E '^RdmaWriteBench' || true
}
for r in $(seq 1 "${JFR_ROUNDS:-3}"); do
  echo "=== JFR off, round $r"; run "" "$@"
  echo "=== JFR recording, round $r"; run "-XX:StartFlightRecording=filename=$OUT/round-$r.jfr,settings=default" "$@"
done
echo "recordings: $OUT (jfr summary $OUT/round-1.jfr)"

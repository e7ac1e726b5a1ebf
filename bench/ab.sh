#!/usr/bin/env bash
# A/B benchmark in one session: builds the benchmarks of git ref REF (in a temporary worktree)
# and of the working tree, then runs the same JMH selection alternately, ROUNDS times each, so
# both are measured on the same machine under the same conditions.
#   bench/ab.sh REF [JMH args...]        e.g. bench/ab.sh 65ddc53 -f 1 -wi 3 -i 5 -p size=64 RdmaSendBench
#   AB_ROUNDS=3 bench/ab.sh ...          (default 2)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
[ $# -ge 1 ] || { echo "usage: bench/ab.sh REF [JMH args...]" >&2; exit 2; }
REF="$1"; shift
git rev-parse --verify -q "$REF^{commit}" >/dev/null || { echo "bench/ab.sh: '$REF' is not a commit" >&2; exit 2; }
for c in "${JAVA_HOME:-}" /usr/lib/jvm/*25* /usr/lib/jvm/*2[6-9]*; do
  [ -n "$c" ] && [ -x "$c/bin/java" ] && "$c/bin/java" -version 2>&1 | grep -qE 'version "(2[5-9]|[3-9][0-9])' && { export JAVA_HOME="$c"; break; }
done
[ -n "${JAVA_HOME:-}" ] || { echo "bench/ab.sh: no JDK 25 found (set JAVA_HOME)" >&2; exit 3; }
export PATH="$JAVA_HOME/bin:$PATH"
export MAVEN_OPTS="${MAVEN_OPTS:-} --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow"
WT=$(mktemp -d "${TMPDIR:-/tmp}/peerdirect-ab.XXXXXX")
trap 'git worktree remove --force "$WT" >/dev/null 2>&1 || rm -rf "$WT"' EXIT
git worktree add -q --detach "$WT" "$REF"
echo "bench/ab.sh: building A = $REF and B = working tree ..." >&2
(cd "$WT" && mvn -B -q -ntp package -DskipTests -pl bench -am >/dev/null)
mvn -B -q -ntp package -DskipTests -pl bench -am >/dev/null
run() {  # $1 = tree, then JMH args
  local tree="$1"; shift
  "$JAVA_HOME/bin/java" --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow \
    -cp "$tree/bench/target/classes:$tree/bench/target/lib/*" org.peerdirect.bench.BenchMain "$@" 2>&1 \
    | grep -E '^(Benchmark|[A-Z][A-Za-z]+Bench\.)' || true
}
for r in $(seq 1 "${AB_ROUNDS:-2}"); do
  echo "=== A ($REF) round $r"; run "$WT" "${@}"
  echo "=== B (working tree) round $r"; run "$ROOT" "${@}"
done

#!/usr/bin/env bash
# Console A/B (issue 46, "Performance"): RDMA WRITE 64 B and 64 KiB (rdma:write_bw on mlx5_0, perftest's
# JSON report) in a container started without --web, and in one started with --web where a client has the
# console's pages open and the live plot's server-sent event stream (/system/console/pdlive/events) running
# for the whole measurement. Both alternate ROUNDS times in one session on the same machine; the ratios
# on/off of the mean and of the median BW_average are printed per size. Each run first writes WARM 64 B
# messages (JIT warm-up, the web bundles' start, and the time the event stream needs to connect), then measures. The event stream's data lines are counted:
# a run "on" whose stream carried no point is reported as invalid, not measured.
#   bench/console-ab.sh                          (CONSOLE_ROUNDS=3 N64=3000000 N64K=500000 WARM=10000000)
#   CONSOLE_ROUNDS=5 N64=1000000 bench/console-ab.sh
# Needs the built distribution (launcher/target/peerdirect: ./peerdirect builds it), curl, and a quiet machine.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
for c in "${JAVA_HOME:-}" /usr/lib/jvm/*25* /usr/lib/jvm/*2[6-9]*; do
  [ -n "$c" ] && [ -x "$c/bin/java" ] && "$c/bin/java" -version 2>&1 | grep -qE 'version "(2[5-9]|[3-9][0-9])' && { export JAVA_HOME="$c"; break; }
done
[ -n "${JAVA_HOME:-}" ] || { echo "bench/console-ab.sh: no JDK 25 found (set JAVA_HOME)" >&2; exit 3; }
command -v curl >/dev/null || { echo "bench/console-ab.sh: curl is missing (apt install curl)" >&2; exit 3; }
DIST="$ROOT/launcher/target/peerdirect"
[ -d "$DIST/lib" ] && [ -d "$DIST/web" ] || { echo "bench/console-ab.sh: no distribution in $DIST: build it first (./peerdirect -c lb)" >&2; exit 3; }
ROUNDS=${CONSOLE_ROUNDS:-3} N64=${N64:-3000000} N64K=${N64K:-500000} WARM=${WARM:-10000000}
OUT=$(mktemp -d "${TMPDIR:-/tmp}/peerdirect-console-ab.XXXXXX")
CURL_PID=
cleanup() { [ -z "$CURL_PID" ] || kill "$CURL_PID" 2>/dev/null || true; }
trap cleanup EXIT

free_port() {
  "$JAVA_HOME/bin/jshell" -R-Xmx32m -q <<<'try (var s = new java.net.ServerSocket(0)) { System.out.println("PORT=" + s.getLocalPort()); }
/exit' 2>/dev/null | sed -n 's/.*PORT=\([0-9]*\).*/\1/p' | head -1
}

bw() {  # BW_average (MB/s) of a perftest JSON report
  sed -n 's/.*"BW_average": *\([0-9.]*\).*/\1/p' "$1" | head -1
}

run() {  # $1 = off|on, $2 = round
  local mode=$1 r=$2 web=() port=
  local cmds="rdma:write_bw -d mlx5_0 -s 64 -n $WARM; \
rdma:write_bw -d mlx5_0 -s 64 -n $N64 --out_json --out_json_file $OUT/$mode-$r-64.json; \
rdma:write_bw -d mlx5_0 -s 65536 -n $N64K --out_json --out_json_file $OUT/$mode-$r-64k.json"
  if [ "$mode" = on ]; then port=$(free_port); web=(--web "$port"); fi
  : >"$OUT/$mode-$r.log"  # exists before the launcher writes to it (the wait below reads it)
  "$JAVA_HOME/bin/java" --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow -Dpeerdirect.home="$DIST" \
    -cp "$ROOT/launcher/target/classes:$DIST/lib/*" org.peerdirect.launcher.Main --home "$OUT/home-$mode" ${web[@]+"${web[@]}"} \
    -c "$cmds" >"$OUT/$mode-$r.log" 2>&1 </dev/null &
  local pid=$!
  if [ "$mode" = on ]; then
    local base="http://127.0.0.1:$port/system/console"
    for _ in $(seq 1 600); do  # until the launcher says the console is up (at most 60 s)
      grep -q 'web console at' "$OUT/$mode-$r.log" && break
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1  # polling a child process's log, not synchronising threads
    done
    for p in pddevices pdprocesses pdiommu pdpeermem pdmlx5 pdlive; do curl -s -o /dev/null "$base/$p" || true; done
    curl -sN "$base/pdlive/events" >"$OUT/sse-$r.txt" 2>/dev/null &
    CURL_PID=$!
  fi
  wait "$pid" || { echo "bench/console-ab.sh: the $mode run $r failed, see $OUT/$mode-$r.log" >&2; tail -5 "$OUT/$mode-$r.log" >&2; exit 1; }
  if [ -n "$CURL_PID" ]; then kill "$CURL_PID" 2>/dev/null || true; wait "$CURL_PID" 2>/dev/null || true; CURL_PID=; fi
  local b64 b64k points=""
  b64=$(bw "$OUT/$mode-$r-64.json"); b64k=$(bw "$OUT/$mode-$r-64k.json")
  if [ "$mode" = on ]; then
    points=$(grep -c '^data:' "$OUT/sse-$r.txt" || true)
    [ "${points:-0}" -gt 0 ] || { echo "bench/console-ab.sh: round $r: the event stream carried no point (see $OUT/sse-$r.txt): invalid" >&2; exit 1; }
    points=" (event stream: $points points)"
  fi
  printf '%-4s round %d: 64 B %10.2f MB/s   64 KiB %10.2f MB/s%s\n' "$mode" "$r" "$b64" "$b64k" "$points"
  echo "$mode $b64 $b64k" >>"$OUT/results.txt"
}

echo "bench/console-ab.sh: $ROUNDS rounds, off and on alternately; reports in $OUT"
for r in $(seq 1 "$ROUNDS"); do
  run off "$r"
  run on "$r"
done
awk '{ n[$1]++; s64[$1] += $2; s64k[$1] += $3 }
     END { printf "mean off: 64 B %.2f MB/s, 64 KiB %.2f MB/s\n", s64["off"]/n["off"], s64k["off"]/n["off"];
           printf "mean on:  64 B %.2f MB/s, 64 KiB %.2f MB/s\n", s64["on"]/n["on"], s64k["on"]/n["on"];
           printf "ratio on/off: 64 B %.3f, 64 KiB %.3f\n", (s64["on"]/n["on"])/(s64["off"]/n["off"]), (s64k["on"]/n["on"])/(s64k["off"]/n["off"]) }' \
  "$OUT/results.txt"
median() {  # $1 = off|on, $2 = column (2: 64 B, 3: 64 KiB)
  awk -v m="$1" -v c="$2" '$1 == m { print $c }' "$OUT/results.txt" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
# the median is what to quote on a busy machine: one disturbed run moves the mean, not the median
awk -v a="$(median off 2)" -v b="$(median on 2)" -v c="$(median off 3)" -v d="$(median on 3)" \
  'BEGIN { printf "median ratio on/off: 64 B %.3f, 64 KiB %.3f\n", b / a, d / c }'
